"""What every predict-mode question kind shares: the kinds, the QuizPoint record, how choices
are made, the labels the questions use (blocks, KV cache groups) and which points are asked.

Split out of ``predict.py`` so that the kinds (``predict_cache_questions.py``: popleft, evict,
hit; ``predict_questions.py``: window, fixed_point, preempt) and both trace forms
(``kvlab.viz.predict`` on a Trace, ``kvlab.playground.quiz`` on the browser's LiteTrace) share
one record, one shuffle and one selection (``ask_points``). Numpy-free: the browser playground
ships this file verbatim.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass
from typing import Any

from kvlab.i18n import _

__all__ = [
    "PREDICT_KINDS",
    "QuizPoint",
    "ask_points",
    "blocks_label",
    "group_label",
    "options",
    "then",
]

PREDICT_KINDS = ("evict", "fixed_point", "hit", "popleft", "preempt", "window")
"""Decision kinds the player can ask about (see kvlab.viz.predict's docstring)."""

_SHOWN = 12  # block ids listed in full in a choice label; longer lists are shortened


@dataclass(frozen=True)
class QuizPoint:
    """One question of the predict mode.

    Attributes:
        kind: One of ``PREDICT_KINDS`` (kvlab.viz.predict).
        ask: Cursor (event index, -1 = before event 0) at which the question is shown: the
            state right before the decision.
        reveal: The event that shows the answer; the cursor moves there once answered.
        question: The question (plain text).
        choices: Labels of the choices (2-4, distinct).
        values: The value behind each label: block-id lists (popleft), a block_id (evict), a
            hit length in tokens (hit, fixed_point), logical block indexes (window) or a
            request id (preempt).
        answer: Index of the right choice in ``choices``.
        explanation: Why the answer is right, in vLLM's terms (one line).
    """

    kind: str
    ask: int
    reveal: int
    question: str
    choices: tuple[str, ...]
    values: tuple[Any, ...]
    answer: int
    explanation: str

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON data (the player's ``quiz`` state)."""
        data = asdict(self)
        data["choices"], data["values"] = list(self.choices), list(self.values)
        return data


def blocks_label(block_ids: list[int]) -> str:
    if len(block_ids) == 1:
        return _("block {b}").format(b=block_ids[0])
    if len(block_ids) <= _SHOWN:
        return _("blocks {ids}").format(ids=", ".join(map(str, block_ids)))
    head, tail = ", ".join(map(str, block_ids[:4])), ", ".join(map(str, block_ids[-2:]))
    return _("blocks {head}, …, {tail} ({n})").format(head=head, tail=tail, n=len(block_ids))


def group_label(config: dict[str, Any], kv_cache_group_id: int) -> str:
    """``"group 1 · SlidingWindow (window 8)"`` from a trace's config (spec name shortened), in
    the current language (kvlab.i18n).

    Args:
        config: ``Trace.config``.
        kv_cache_group_id: The group.
    """
    groups = config.get("groups") or []
    if not 0 <= kv_cache_group_id < len(groups):
        return _("group {kv_cache_group_id}").format(kv_cache_group_id=kv_cache_group_id)
    g = groups[kv_cache_group_id]
    spec = str(g.get("spec", "?")).removesuffix("Spec")
    extra = (
        _(" (window {sliding_window})").format(sliding_window=g["sliding_window"])
        if g.get("sliding_window")
        else ""
    )
    return _("group {kv_cache_group_id} · {spec}{extra}").format(
        kv_cache_group_id=kv_cache_group_id, spec=spec, extra=extra
    )


def then(first: str, second: str) -> str:
    """Two sentences one after the other (a space in English, none in Chinese)."""
    return _("{first} {second}").format(first=first, second=second)


def options(
    seed: int, candidates: list[tuple[Any, str]]
) -> tuple[tuple[str, ...], tuple[Any, ...], int] | None:
    """The truth (first candidate) and up to 3 distinct others, shuffled by ``seed``."""
    truth = candidates[0]
    picked, labels = [truth], {truth[1]}
    for value, label in candidates[1:]:
        if len(picked) == 4:
            break
        if label not in labels and value != truth[0]:
            picked.append((value, label))
            labels.add(label)
    if len(picked) < 2:
        return None
    random.Random(seed).shuffle(picked)
    return tuple(p[1] for p in picked), tuple(p[0] for p in picked), picked.index(truth)


def ask_points(
    found: Iterable[tuple[int, int, str]],
    kinds: tuple[str, ...],
    call_end: Callable[[int], int],
    replay: Callable[[int, int], None],
    make: Callable[[str, int, int], QuizPoint | None],
) -> list[QuizPoint]:
    """The points the player asks, ordered by ``reveal``, from every decision found.

    When both ``hit`` and ``fixed_point`` are asked, a hybrid lookup is asked turn by turn
    (fixed_point), not as a whole (hit); a point whose [ask, reveal] window overlaps an earlier
    one is dropped, so the player never has two questions open.

    Args:
        found: ``(ask, reveal, kind)`` of each decision of the ``kinds`` asked.
        kinds: The kinds asked.
        call_end: Event index -> the CALL_END of the call holding it (-1: none).
        replay: ``replay(start, stop)`` applies events ``start..stop-1`` to the state ``make``
            reads; called with ascending, contiguous ranges from event 0.
        make: ``make(kind, ask, reveal)`` -> the point, from the state replayed to ``ask``
            (None: nothing could be wrong).
    """
    found = list(found)
    if "fixed_point" in kinds and "hit" in kinds:
        turned = {call_end(reveal) for ask, reveal, kind in found if kind == "fixed_point"}
        found = [f for f in found if not (f[2] == "hit" and f[1] in turned)]
    at, points = 0, []
    for ask, reveal, kind in sorted(found):  # replay forward once
        stop = max(at, ask + 1)
        replay(at, stop)
        at = stop
        point = make(kind, ask, reveal)
        if point is not None:
            points.append(point)
    kept: list[QuizPoint] = []
    for point in sorted(points, key=lambda p: (p.ask, p.reveal)):
        if not kept or point.ask >= kept[-1].reveal:
            kept.append(point)
    return sorted(kept, key=lambda p: p.reveal)
