"""Grade a learner's implementation, decision by decision, against vLLM's recorded decisions.

For each scenario of the lab, kvlab's engine is built with the learner's piece in place
(``Lab.learner_side``) and the scenario's operations are replayed on it; after each operation the
return value and the observable state (free-queue order, ref_cnt, block_hash, cached map, the
requests' blocks, KV events ...) are compared with what vLLM 0.22.1 did (recorded) or what
kvlab's reference did (fresh randomized workloads). The first difference is the divergence; the
lab's catalogue recognises typical mistakes from it and gives a hint. Each scenario runs under a
time limit (``kvlab.labs.timelimit``): an exception or an endless loop in the learner's code is
reported, never raised.
"""

from __future__ import annotations

import os
import random
import traceback
from contextlib import contextmanager
from collections.abc import Iterator
from typing import Any

from kvlab.i18n import _, language, use_language
from kvlab.labs.registry import Accepted, Lab, Scenario
from kvlab.labs.result import Divergence, LabResult, fmt_value
from kvlab.labs.timelimit import ScenarioTimeout, run_limited

__all__ = ["DEFAULT_TIME_LIMIT_S", "NotImplementedYet", "hash_seeded", "replay", "run_lab"]

DEFAULT_TIME_LIMIT_S = 10.0
"""Time limit per scenario (seconds)."""

_KVLAB_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


class NotImplementedYet(Exception):
    """The learner's code raised NotImplementedError (the skeleton's body is still empty)."""


@contextmanager
def hash_seeded(hash_fn_name: str = "sha256") -> Iterator[None]:
    """NONE_HASH as vLLM 0.22.1 had it when the fixtures were recorded (PYTHONHASHSEED=0).

    Restores the environment variable and the previous NONE_HASH afterwards.
    """
    from kvlab.core import kv_cache_utils

    old_seed = os.environ.get("PYTHONHASHSEED")
    old_none = kv_cache_utils.__dict__.get("NONE_HASH")
    os.environ["PYTHONHASHSEED"] = "0"
    try:
        fn = {"sha256": kv_cache_utils.sha256, "sha256_cbor": kv_cache_utils.sha256_cbor}[hash_fn_name]
        kv_cache_utils.init_none_hash(fn)
        yield
    finally:
        if old_seed is None:
            os.environ.pop("PYTHONHASHSEED", None)
        else:
            os.environ["PYTHONHASHSEED"] = old_seed
        if old_none is None:
            kv_cache_utils.__dict__.pop("NONE_HASH", None)
        else:
            kv_cache_utils.NONE_HASH = old_none


def _learner_frame(exc: BaseException) -> str | None:
    """The innermost traceback frame outside kvlab (the learner's line), as one short line."""
    frames = traceback.extract_tb(exc.__traceback__)
    mine = [f for f in frames if not os.path.abspath(f.filename).startswith(_KVLAB_DIR)
            and "threading" not in f.filename]  # fmt: skip
    if not mine:
        return None
    f = mine[-1]
    where = f.filename if not f.filename.startswith("<") else f.filename.strip("<>")
    # A notebook cell's code is compiled under a temporary ipykernel path (or "<ipython-input-…>");
    # any other file, wherever it lives (a clone under /tmp too), is named as it is.
    if "ipykernel" in where or where.startswith("ipython-input"):
        where = _("your cell")
    return _("{where}, line {line}, in {name}").format(where=where, line=f.lineno, name=f.name)


def _unwritten(exc: BaseException, op: str) -> str:
    """The name of the function whose body still raises NotImplementedError."""
    frames = traceback.extract_tb(exc.__traceback__)
    return frames[-1].name if frames else op


def _error_text(exc: BaseException) -> str:
    msg = str(exc)
    return f"{type(exc).__name__}: {msg}" if msg else type(exc).__name__


def _raises_match(want: Any, exc: BaseException) -> bool:
    return isinstance(want, dict) and want.get("raises") == type(exc).__name__


def replay(rec: Any, side_factory: Any, lab: str, scenario: str,
           progress: dict | None = None) -> Divergence | None:
    """Replay ``rec``'s operations on the side ``side_factory()`` builds; the first divergence.

    Args:
        rec: The recording (expected answers and states).
        side_factory: Builds the learner's side.
        lab: The lab's name (for the report).
        scenario: The scenario's name (for the report).
        progress: Filled with the operation under way (``step``, ``op``, ``args``, ``history``),
            so that a time-out can say where it happened.

    Raises:
        NotImplementedYet: The learner's code raised NotImplementedError.
    """
    history: list[str] = []
    progress = progress if progress is not None else {}
    progress.update(step=-1, op="__init__", args=[], history=history, state_before={})

    def diverged(step: int, op: str, args: list, field: str, want: Any, got: Any, **kw: Any) -> Divergence:
        return Divergence(lab, scenario, rec.source, step, op, args, field, want, got,
                          history=list(history), config=rec.config, recording=rec, **kw)  # fmt: skip

    def crashed(step: int, op: str, args: list, exc: BaseException, before: dict) -> Divergence:
        if isinstance(exc, NotImplementedError):
            raise NotImplementedYet(_unwritten(exc, op)) from exc
        return diverged(step, op, args, "exception", None, _error_text(exc), error=_error_text(exc),
                        where=_learner_frame(exc), state_before=before)  # fmt: skip

    try:
        side = side_factory()
        got_state = side.state()
    except ScenarioTimeout:
        raise
    except Exception as exc:  # noqa: BLE001 - the learner's constructor
        return crashed(-1, "__init__", [], exc, {})
    state = rec.initial
    diffs = {k: (v, got_state.get(k)) for k, v in state.items() if got_state.get(k) != v}
    if diffs:
        name = next(iter(diffs))
        return diverged(-1, "__init__", [], name, *diffs[name], fields=diffs, want_state=state, got_state=got_state)
    for i, st in enumerate(rec.steps):
        before = state
        progress.update(step=i, op=st.op, args=st.args, state_before=before)
        try:
            got = side.call(st.op, st.args)
        except ScenarioTimeout:
            raise
        except Exception as exc:  # noqa: BLE001 - the learner's code may raise anything
            if not _raises_match(st.want, exc):
                return crashed(i, st.op, st.args, exc, before)
            got = st.want
        if got != st.want:
            try:
                got_state = side.state()
            except Exception:  # noqa: BLE001
                got_state = {}
            return diverged(i, st.op, st.args, "return value", st.want, got,
                            fields={"return value": (st.want, got)}, want_state=st.state,
                            got_state=got_state, state_before=before)  # fmt: skip
        try:
            got_state = side.state()
        except ScenarioTimeout:
            raise
        except Exception as exc:  # noqa: BLE001
            return crashed(i, st.op, st.args, exc, before)
        state = st.state
        diffs = {k: (v, got_state.get(k)) for k, v in state.items() if got_state.get(k) != v}
        if diffs:
            name = next(iter(diffs))
            return diverged(i, st.op, st.args, name, *diffs[name], fields=diffs, want_state=state,
                            got_state=got_state, state_before=before)  # fmt: skip
        history.append(f"{st.op}({', '.join(fmt_value(a, 40) for a in st.args)}) -> {fmt_value(st.want, 60)}")
    return None


def _hint(lab: Lab, div: Divergence) -> tuple[str | None, str | None]:
    with hash_seeded(div.config.get("hash_fn", "sha256")):  # patterns may recompute hashes
        for entry in lab.catalogue:
            try:
                if entry.matches(div):
                    return entry.id, format_hint(entry)
            except Exception:  # noqa: BLE001, S112 - a pattern that does not apply to this divergence
                continue
    return None, None


def format_hint(entry: Any) -> str:
    """``concept: hint (notebook NN, section "...")`` in the current language."""
    number = entry.notebook[:2]
    return _("{concept}: {hint} (notebook {number}, section “{section}”)").format(
        concept=_(entry.concept), hint=_(entry.hint), number=number, section=_(entry.section))


def run_lab(lab: Lab, implementation: Any, time_limit_s: float = DEFAULT_TIME_LIMIT_S,
            seed: int | None = None, lang: str | None = None) -> LabResult:
    """Run every scenario of ``lab`` on ``implementation`` (see ``kvlab.labs.check``)."""
    with use_language(lang):
        lang = language()
        seed = random.SystemRandom().randrange(2**31) if seed is None else seed
        try:
            accepted: Accepted = lab.accept(implementation)
        except ValueError as exc:
            return LabResult(lab.name, False, 0, 0, status="invalid", message=str(exc), seed=seed, lang=lang)
        scenarios: list[Scenario] = lab.scenarios(seed)
        total, passed = len(scenarios), 0
        first: Divergence | None = None
        first_scenario: Scenario | None = None
        status, message = "passed", ""
        for sc in scenarios:
            rec = sc.recording()
            progress: dict = {}
            outcome = run_limited(
                lambda rec=rec, sc=sc: _replay_seeded(lab, rec, accepted, sc.name, progress), time_limit_s)
            if isinstance(outcome.error, NotImplementedYet):
                where = str(outcome.error)
                msg = _("not implemented yet: {name} still raises NotImplementedError; write its body, then run this cell again").format(name=where)
                return LabResult(lab.name, False, passed, total, status="not implemented", message=msg,
                                 seed=seed, lang=lang)  # fmt: skip
            if outcome.timed_out:
                div = Divergence(lab.name, sc.name, rec.source, progress.get("step", -1), progress.get("op", "?"),
                                 progress.get("args", []), "time limit", None, None, config=rec.config,
                                 history=list(progress.get("history", [])), state_before=progress.get("state_before", {}),
                                 where=_learner_frame(outcome.error) if outcome.error else None)  # fmt: skip
                first, first_scenario = first or div, first_scenario or sc
                status = "timeout"
                message = _("scenario {name} did not finish within {limit} s; the remaining scenarios were skipped").format(
                    name=sc.name, limit=f"{time_limit_s:g}")
                break
            if outcome.error is not None:  # an error of the grader itself, reported plainly
                div = Divergence(lab.name, sc.name, rec.source, -1, "?", [], "exception", None,
                                 _error_text(outcome.error), error=_error_text(outcome.error),
                                 where=_learner_frame(outcome.error), config=rec.config)  # fmt: skip
            else:
                div = outcome.value
            if div is None:
                passed += 1
            elif first is None:
                first, first_scenario = div, sc
        if first is None:
            return LabResult(lab.name, True, passed, total, status="passed",
                             message=_("every decision matches {name}'s").format(name=lab.reference_name),
                             seed=seed, lang=lang)  # fmt: skip
        if status == "passed":
            status = "raised" if first.field == "exception" else "diverged"
        misconception, hint = _hint(lab, first)
        result = LabResult(lab.name, False, passed, total, divergence=first, hint=hint, status=status,
                           message=message, misconception=misconception, seed=seed, lang=lang)  # fmt: skip
        result._view_data = (lab, first_scenario, accepted)
        return result


def _replay_seeded(lab: Lab, rec: Any, accepted: Accepted, name: str, progress: dict) -> Divergence | None:
    with hash_seeded(rec.config.get("hash_fn", "sha256")):
        return replay(rec, lambda: lab.learner_side(rec, accepted), lab.name, name, progress)
