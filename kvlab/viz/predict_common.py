"""What every predict-mode question kind shares: the kinds, the QuizPoint record, how choices
are made, and the labels the questions use (blocks, KV cache groups).

Split out of ``predict.py`` so that the kinds (``predict.py``: popleft, evict, hit;
``predict_decisions.py``: window, fixed_point, preempt) share one record and one shuffle.
Numpy-free: the browser playground (``kvlab.playground.quiz``) ships this file verbatim.
"""

from __future__ import annotations

import random
from dataclasses import asdict, dataclass
from typing import Any

from kvlab.i18n import _

__all__ = ["PREDICT_KINDS", "QuizPoint", "blocks_label", "group_label", "options", "then"]

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
