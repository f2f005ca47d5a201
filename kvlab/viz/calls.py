"""What one KVCacheManager call did, as plain data: allocate_slots' token layout, the hybrid
fixed point's iterations, and the events around an index.

Examples:
    >>> call = find_call(trace, 40, "allocate_slots")        # doctest: +SKIP
    >>> [(s.name, s.num_tokens) for s in slot_layout(call, 4).segments]  # doctest: +SKIP
    [('comp', 0), ('new_comp', 12), ('ext_comp', 0), ('new', 8), ('lookahead', 0)]
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from kvlab.i18n import N_
from kvlab.trace import Call, Event, EventKind
from kvlab.trace.metadata import block_size_of_config

__all__ = [
    "SEGMENTS",
    "FixedPointRow",
    "Segment",
    "SlotLayout",
    "block_size_of",
    "event_window",
    "find_call",
    "fixed_point_rows",
    "slot_layout",
]

K = EventKind

SEGMENTS: tuple[tuple[str, str, str], ...] = (
    ("comp", "num_computed_tokens", N_("already computed, blocks held")),
    ("new_comp", "num_new_computed_tokens", N_("prefix-cache hit (touch)")),
    ("ext_comp", "num_external_computed_tokens", N_("KV from a connector")),
    ("new", "num_new_tokens", N_("computed this step")),
    ("lookahead", "num_lookahead_tokens", N_("draft slots, never cached")),
)
"""(segment name, allocate_slots arg, what it is), left to right along the request (the
meaning in English, marked for translation: views show it through ``kvlab.i18n._``)."""


@dataclass(frozen=True)
class Segment:
    """One span of allocate_slots' token layout.

    Attributes:
        name: ``comp`` | ``new_comp`` | ``ext_comp`` | ``new`` | ``lookahead``.
        start: First token position (tokens).
        num_tokens: Length (tokens).
        meaning: One line for a legend.
    """

    name: str
    start: int
    num_tokens: int
    meaning: str

    @property
    def end(self) -> int:
        """One past the last token position (tokens)."""
        return self.start + self.num_tokens


@dataclass(frozen=True)
class SlotLayout:
    """allocate_slots' view of a request (see kvlab.core.kv_cache_manager's diagram).

    Attributes:
        call: The allocate_slots call.
        block_size: Tokens per block (tokens), group 0's.
        segments: The five spans, left to right.
        num_blocks_to_allocate: From the call's result (blocks; -1 while unfinished).
        allocated: True / False (None while unfinished).
    """

    call: Call
    block_size: int
    segments: list[Segment]
    num_blocks_to_allocate: int
    allocated: bool | None

    @property
    def num_tokens(self) -> int:
        """Tokens from position 0 to the end of the lookahead slots (tokens)."""
        return self.segments[-1].end

    @property
    def num_blocks(self) -> int:
        """Blocks that cover ``num_tokens`` (blocks)."""
        return -(-self.num_tokens // self.block_size)


@dataclass(frozen=True)
class FixedPointRow:
    """One attention group's turn in one HybridKVCacheCoordinator fixed-point iteration.

    Attributes:
        seq: The FIXED_POINT_ITERATED event.
        iteration: Iteration number (0-based).
        kv_cache_group_ids: The groups that share this attention type.
        hit_length_in, hit_length_out: Candidate hit length before / after this turn (tokens).
        reused: A full-attention group's earlier hit truncated instead of searched again.
        block_ids: Per group of ``kv_cache_group_ids``, the block ids its hit holds after this
            turn (the null block included); None for a trace recorded without them.
    """

    seq: int
    iteration: int
    kv_cache_group_ids: tuple[int, ...]
    hit_length_in: int
    hit_length_out: int
    reused: bool
    block_ids: tuple[tuple[int, ...], ...] | None = None

    @property
    def shortened(self) -> bool:
        """True when this turn cut the candidate length."""
        return self.hit_length_out < self.hit_length_in


def find_call(trace: Any, index: int, name: str | None = None) -> Call | None:
    """The call to show at ``index``: the innermost enclosing call named ``name``, else the
    last such call that began at or before ``index`` (None when there is none).

    Args:
        trace: A kvlab.trace.Trace.
        index: Event index (-1 = before every event).
        name: Call name (``allocate_slots`` ...), None = any.

    Raises:
        IndexError: If ``index`` is not in [-1, len(trace)).
    """
    if not -1 <= index < len(trace):
        raise IndexError(f"event index {index} is outside [-1, {len(trace)})")
    if index < 0:
        return None
    j = index if trace.cols.kind[index] == K.CALL_BEGIN else trace.parent(index)
    while j >= 0:
        call = trace.call(j)
        if name is None or call.name == name:
            return call
        j = call.parent
    calls = [c for c in trace.calls(name=name) if c.begin <= index]
    return calls[-1] if calls else None


def block_size_of(trace: Any) -> int:
    """Group 0's block_size from the trace config (tokens; hash_block_size, then 16 if absent)."""
    return block_size_of_config(trace.config)


def slot_layout(call: Call, block_size: int) -> SlotLayout:
    """The token layout of one allocate_slots call.

    Args:
        call: An allocate_slots Call (``Trace.calls("allocate_slots")``).
        block_size: Tokens per block (tokens).

    Raises:
        ValueError: If the call is not allocate_slots or block_size < 1.
    """
    if call.name != "allocate_slots":
        raise ValueError(f"slot_layout needs an allocate_slots call, got {call.name!r}")
    if block_size < 1:
        raise ValueError(f"block_size must be >= 1 (tokens), got {block_size}")
    segments, pos = [], 0
    for name, arg, meaning in SEGMENTS:
        n = int(call.args.get(arg, 0))
        segments.append(Segment(name, pos, n, meaning))
        pos += n
    result = call.result
    return SlotLayout(
        call,
        block_size,
        segments,
        int(result.get("num_blocks_to_allocate", -1)),
        None if not result else bool(result.get("allocated")),
    )


def fixed_point_rows(trace: Any, call: Call) -> list[FixedPointRow]:
    """The FIXED_POINT_ITERATED turns recorded inside ``call`` (empty for a unitary one).

    Args:
        trace: A kvlab.trace.Trace.
        call: Usually a get_computed_blocks call.
    """
    stop = call.end if call.end >= 0 else len(trace) - 1
    rows = []
    for i in trace.filter(K.FIXED_POINT_ITERATED, start=call.begin, stop=stop + 1).tolist():
        f = trace[i].fields
        rows.append(
            FixedPointRow(
                i,
                f["iteration"],
                tuple(f["kv_cache_group_ids"]),
                f["hit_length_in"],
                f["hit_length_out"],
                f["reused"],
                None if f["block_ids"] is None else tuple(tuple(b) for b in f["block_ids"]),
            )
        )
    return rows


def event_window(trace: Any, index: int, before: int = 6, after: int = 6) -> list[Event]:
    """The events from ``index - before`` to ``index + after`` (clipped to the trace).

    Args:
        trace: A kvlab.trace.Trace.
        index: Centre event (-1 = before event 0).
        before, after: Events on each side (events), >= 0.

    Raises:
        ValueError: If before or after is negative.
    """
    if before < 0 or after < 0:
        raise ValueError(f"before and after must be >= 0 (events), got {before}, {after}")
    lo, hi = max(index - before, 0), min(index + after, len(trace) - 1)
    return [trace[i] for i in range(lo, hi + 1)]
