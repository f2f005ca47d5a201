"""The divergence view: vLLM's run in the player, opened at the divergence, beside the learner's state.

vLLM's side is kvlab's reference engine replaying the scenario up to and including the operation
that diverged, recorded by ``kvlab.trace.Recorder`` (kvlab makes vLLM 0.22.1's decisions; for a
recorded scenario the tests check it step by step), so the learner can step back through every
decision that led there. The learner's side is their state right after that operation, drawn by
the same views (a trace with no events whose initial state is that state). In JupyterLab both are
``TracePlayer`` widgets side by side under the report; without ``kvlab[lab]`` the report alone.
Lab ``radix_cache`` (SGLang's tree, no vLLM trace) draws both trees inside the report itself, as
static HTML (``kvlab.labs.radix_view``): in JupyterLab, in exported notebooks and in
``kvlab labs grade``'s outputs alike; lab ``nano_block_manager`` likewise draws both
BlockManagers (``kvlab.labs.nano_view``).
"""

from __future__ import annotations

import html
from collections import OrderedDict
from typing import Any

from kvlab.i18n import _, use_language
from kvlab.labs.nano_view import nano_divergence_html
from kvlab.labs.radix_view import radix_divergence_html
from kvlab.labs.result import LabResult, field_label, fmt_value, source_name

__all__ = ["divergence_traces", "divergence_view", "learner_state", "result_html"]


def _reference_run(lab: Any, rec: Any, upto: int) -> tuple[Any, int] | None:
    """(trace, event index at the end of operation ``upto``) of kvlab's reference on ``rec``."""
    from kvlab.labs.engine import hash_seeded
    from kvlab.trace import KVState, Recorder

    with hash_seeded(rec.config.get("hash_fn", "sha256")):
        side = lab.reference_side(rec)
        if rec.kind == "manager":
            recorder = Recorder().attach(side.mgr)
        elif rec.kind == "queue":
            n = rec.config["num_blocks"]
            initial = KVState(n, 0, None)
            initial.free_queue = OrderedDict.fromkeys(range(n))
            recorder = Recorder(initial_state=initial, config={"num_gpu_blocks": n, "groups": []})
            side.queue.recorder = recorder
        else:
            return None
        index = -1
        for i, st in enumerate(rec.steps[: upto + 1]):
            recorder.mark_step(i)
            side.call(st.op, st.args)
            index = len(recorder) - 1
        return recorder.trace(), index


def learner_state(div: Any, num_groups: int) -> Any:
    """The learner's state after the divergent operation, as a ``kvlab.trace.KVState``."""
    from kvlab.core.kv_cache_utils import get_block_hash, get_group_id
    from kvlab.trace import KVState
    from kvlab.trace.tables import InternTables, key_code

    got = div.got_state
    queue = [b for b in got.get("free queue", []) if isinstance(b, int) and b >= 0]
    ref_cnt = got.get("ref_cnt")
    num_blocks = len(ref_cnt) if ref_cnt else max(queue + [div.config.get("num_blocks", 1) - 1]) + 1
    tables = InternTables()
    state = KVState(num_blocks, num_groups, 0 if ref_cnt else None, tables)
    state.free_queue = OrderedDict.fromkeys(b for b in queue if b < num_blocks)
    if ref_cnt:
        state.ref_cnt = [0 if r is None else int(r) for r in ref_cnt]

    def code(key: bytes) -> int:
        return key_code(tables.hash_index(get_block_hash(key)), get_group_id(key))

    for i, key in enumerate(got.get("block_hash") or []):
        if isinstance(key, bytes) and len(key) > 4:
            state.block_hash[i] = code(key)
    for key, ids in (got.get("cached map") or {}).items():
        if isinstance(key, bytes) and len(key) > 4:
            state.cached[code(key)] = tuple(ids)
    for rid, groups in (got.get("block ids") or {}).items():
        for g, ids in enumerate(groups[:num_groups]):
            state.req_to_blocks[g][tables.request_index(rid)] = list(ids)
    return state


def divergence_traces(result: LabResult) -> tuple[Any, int, Any] | None:
    """``(vLLM's trace, its event index at the divergence, the learner's trace)``, or None.

    None when the result has no divergence, or its scenario has no state to draw (block hashes).
    """
    from kvlab.trace import Recorder

    if result.divergence is None or result._view_data is None:
        return None
    lab, scenario, _accepted = result._view_data
    rec = scenario.recording()
    div = result.divergence
    run = _reference_run(lab, rec, max(div.step, 0))
    if run is None:
        return None
    trace, index = run
    if not div.got_state:
        return trace, index, None
    mine = Recorder(initial_state=learner_state(div, int(trace.config.get("num_groups") or 0)),
                    config=dict(trace.config)).trace()  # fmt: skip
    return trace, index, mine


def _rows(result: LabResult) -> str:
    div = result.divergence
    who, yours = source_name(div.source), _("yours")
    if div.field in ("exception", "time limit"):
        what = div.error if div.field == "exception" else _("did not finish within the time limit")
        where = f" ({html.escape(div.where)})" if div.where else ""
        return f"<tr><th>{yours}</th><td colspan=2>{html.escape(str(what))}{where}</td></tr>"
    head = f"<tr><th></th><th>{html.escape(who)}</th><th>{yours}</th></tr>"
    body = "".join(
        f"<tr><th>{html.escape(field_label(name))}</th><td><code>{html.escape(fmt_value(want))}</code></td>"
        f"<td style='background:#fde2e1'><code>{html.escape(fmt_value(got))}</code></td></tr>"
        for name, (want, got) in div.fields.items()
    )  # fmt: skip
    return head + body


def result_html(result: LabResult) -> str:
    """The report as HTML (the check cell's output in JupyterLab)."""
    with use_language(result.lang):
        color = "#1a7f37" if result.passed else "#b42318"
        mark = "✓" if result.passed else "✗"
        title = _("{mark} {lab}: {passed}/{total} scenarios passed").format(
            mark=mark, lab=result.lab, passed=result.scenarios_passed, total=result.scenarios_total)
        parts = [f"<div class='kvlab-lab-result'><b style='color:{color}'>{html.escape(title)}</b>"]
        if result.message:
            parts.append(f"<div>{html.escape(result.message)}</div>")
        div = result.divergence
        if div is not None and result.status != "not implemented":
            parts.append("<div>" + html.escape(_("First divergence: scenario {scenario}, operation {step}: {call}").format(
                scenario=div.scenario, step=div.step, call=div.call)) + "</div>")
            parts.append(f"<table class='kvlab-divergence'>{_rows(result)}</table>")
            parts.append(radix_divergence_html(div))  # "" outside lab radix_cache
            parts.append(nano_divergence_html(div))  # "" outside lab nano_block_manager
            if div.history:
                calls = "<br>".join(html.escape(h) for h in div.history[-5:])
                summary = html.escape(_("calls just before"))
                parts.append(f"<details><summary>{summary}</summary><code>{calls}</code></details>")
        if result.hint:
            label = html.escape(_("Hint:"))
            parts.append(f"<div class='kvlab-hint'><b>{label}</b> {html.escape(result.hint)}</div>")
        parts.append("</div>")
        return "".join(parts)


def divergence_view(result: LabResult) -> Any:
    """The report with vLLM's player (at the divergence) beside the learner's state (widgets).

    Returns:
        An ipywidgets ``VBox``, or None when there is nothing to draw. Needs ``kvlab[lab]``
        (anywidget, ipywidgets).
    """
    traces = divergence_traces(result)
    if traces is None:
        return None
    import ipywidgets as w

    from kvlab.viz import TracePlayer

    trace, index, mine = traces
    with use_language(result.lang):
        views = ["free_queue", "pool"] if not trace.config.get("groups") else ["pool", "free_queue", "block_table", "events"]
        left_title, right_title = _("vLLM 0.22.1, at the divergence"), _("yours, after the same call")
        left = w.VBox([w.HTML(f"<b>{html.escape(left_title)}</b>"),
                       TracePlayer(trace, index=index, views=views, lang=result.lang)])  # fmt: skip
        panels = [left]
        if mine is not None:
            panels.append(w.VBox([w.HTML(f"<b>{html.escape(right_title)}</b>"),
                                  TracePlayer(mine, views=views, lang=result.lang)]))  # fmt: skip
        box = w.VBox([w.HTML(result_html(result)), w.HBox(panels)])
        box.add_class("kvlab-divergence-view")
        return box
