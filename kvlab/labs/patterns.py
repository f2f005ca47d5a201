"""Divergence patterns the catalogues are written with (predicates over a ``Divergence``).

Each helper reads what both sides had before the operation, what vLLM (or the reference) had
after it and what the learner's code had after it, so the same pattern is recognised whether the
operation was a direct call (``popleft_n(3)``) or a manager call that made it
(``allocate_slots`` popping blocks through ``get_new_blocks``).
"""

from __future__ import annotations

from typing import Any

__all__ = ["field_is", "flat", "hit_blocks", "queue_change", "ref_cnt_change", "same_divergence"]


def field_is(div: Any, *names: str) -> bool:
    """Whether one of ``names`` is among the fields that differ."""
    return any(n in div.fields for n in names) or div.field in names


def queue_change(div: Any) -> tuple[list[int], list[int], list[int]] | None:
    """``(before, want, got)``: the free queue (head to tail) before, expected after, learner's after."""
    before = div.state_before.get("free queue")
    want = div.want_state.get("free queue")
    got = div.got_state.get("free queue")
    if before is None or want is None or got is None:
        return None
    return list(before), list(want), list(got)


def ref_cnt_change(div: Any) -> tuple[list, list, list] | None:
    """``(before, want, got)`` ref_cnt per block id (None for the null block)."""
    before = div.state_before.get("ref_cnt")
    want = div.want_state.get("ref_cnt")
    got = div.got_state.get("ref_cnt")
    if before is None or want is None or got is None:
        return None
    return list(before), list(want), list(got)


def flat(value: Any) -> list:
    """Nested lists flattened (block ids per group -> one list)."""
    if isinstance(value, (list, tuple)):
        return [x for v in value for x in flat(v)]
    return [value]


def hit_blocks(value: Any) -> tuple[int, list[list[int]]] | None:
    """``(num_new_computed_tokens, block ids per group)`` of a get_computed_blocks result."""
    if isinstance(value, list) and len(value) == 2 and isinstance(value[0], int):
        return value[0], value[1]
    return None


def same_divergence(div: Any, side_factory: Any) -> bool:
    """Whether a model of a mistake (the side ``side_factory()`` builds) diverges exactly as the
    learner's code did: at the same operation, on the same field, with the same value.

    The model replays the divergence's recording from the start (kvlab's engine with the mistaken
    piece in place); it is never shown to the learner, only its first divergence is compared.
    """
    from kvlab.labs.engine import hash_seeded, replay

    rec = div.recording
    if rec is None:
        return False
    with hash_seeded(rec.config.get("hash_fn", "sha256")):
        model = replay(rec, side_factory, div.lab, div.scenario)
    return model is not None and (model.step, model.field, model.got) == (div.step, div.field, div.got)
