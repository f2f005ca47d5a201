"""The event vocabulary of a kvlab trace: one kind per recorder hook, plus STEP and CALL_BEGIN/END.

Every hook of ``kvlab.core.recorder.KVRecorder`` becomes exactly one event. Names reuse vLLM's
where vLLM has one (its queue / pool method names, and its KV events ``BlockStored``,
``BlockRemoved``, ``AllBlocksCleared``); kvlab's own kinds are past tense.

Storage: a stored event is a row of small integer columns (see ``kvlab.trace.trace.Trace``)::

    kind  u8   EventKind
    depth u8   call nesting (0 = outside every call; a CALL_BEGIN/END has its call's depth)
    group i16  kv_cache_group_id, or the call-name id for CALL_BEGIN / CALL_END
    request i32  index into the request-id table (-1 = none)
    a, b  i32  two per-kind scalars (table below)
    payload    a slice of one flat int32 array (block-id lists, hash indexes, spilled args)

``seq`` (the row index), ``step`` (run-length coded) and ``parent`` (derived from the
CALL_BEGIN rows) are not stored per event. Hashes are stored as indexes into the trace's hash
table (BlockHash bytes, without the group id); a cached-map key (BlockHashWithGroupId) is the
pair (hash index, group).

Field schema (``a`` / ``b`` / payload), per kind:

====================  ==================  ==============  ========================================
kind                  a                   b               payload
====================  ==================  ==============  ========================================
STEP                  step                -               -
POPLEFT               block_id            -               -
POPLEFT_N             -                   -               block_ids
REMOVE                block_id            -               -
APPEND                block_id            -               -
APPEND_N              -                   -               block_ids
GET_NEW_BLOCKS        -                   -               block_ids
TOUCH                 -                   -               block_ids
FREE_BLOCKS           -                   -               block_ids (in the order freed)
BLOCK_STORED          num_cached_blocks   num_full_blocks block_ids + hash indexes (n + n)
BLOCK_REMOVED         block_id            hash index      - (group = the key's group)
ALL_BLOCKS_CLEARED    -                   -               -
LOOKED_UP             hash index          block_id / -1   -
FIXED_POINT_ITERATED  iteration           hit_length_in   hit_length_out, flags, group ids..., then
                                                          per-group block counts..., block ids...
REQ_BLOCKS_ADDED      -                   -               block_ids
REQ_BLOCKS_NULLED     -                   -               indices (into the request's block list)
REQ_FREED             -                   -               -
CALL_BEGIN            packed args (see CALL_SPECS)
CALL_END              packed result (see CALL_SPECS)
====================  ==================  ==============  ========================================

FIXED_POINT_ITERATED's ``flags`` is ``reused | (n << 1)``: ``n`` groups' hit block lists follow
the n group ids as n counts then the ids, group by group (``pack_fixed_point``). Traces recorded
before the block lists existed store ``flags`` = reused (0 or 1), so ``n`` = 0 and every payload
entry after ``flags`` is a group id; ``unpack_fixed_point`` then returns ``block_ids`` = None.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from enum import IntEnum
from operator import itemgetter
from typing import Any

from kvlab.i18n import N_

__all__ = [
    "CALL_SPECS",
    "HOOK_KINDS",
    "KIND_SCHEMA",
    "MUTATING_KINDS",
    "VERBATIM",
    "WIDE",
    "CallSpec",
    "EventKind",
    "KindSchema",
    "decode_call",
    "make_packer",
    "pack_wide",
    "pack_fixed_point",
    "unpack_fixed_point",
    "unpack_wide",
]


class EventKind(IntEnum):
    """What happened; one member per recorder hook plus STEP and the call brackets."""

    STEP = 0
    POPLEFT = 1
    POPLEFT_N = 2
    REMOVE = 3
    APPEND = 4
    APPEND_N = 5
    GET_NEW_BLOCKS = 6
    TOUCH = 7
    FREE_BLOCKS = 8
    BLOCK_STORED = 9
    BLOCK_REMOVED = 10
    ALL_BLOCKS_CLEARED = 11
    LOOKED_UP = 12
    FIXED_POINT_ITERATED = 13
    REQ_BLOCKS_ADDED = 14
    REQ_BLOCKS_NULLED = 15
    REQ_FREED = 16
    CALL_BEGIN = 17
    CALL_END = 18


K = EventKind

HOOK_KINDS: dict[str, EventKind] = {
    "popleft": K.POPLEFT,
    "popleft_n": K.POPLEFT_N,
    "remove": K.REMOVE,
    "append": K.APPEND,
    "append_n": K.APPEND_N,
    "get_new_blocks": K.GET_NEW_BLOCKS,
    "touch": K.TOUCH,
    "free_blocks": K.FREE_BLOCKS,
    "cache_full_blocks": K.BLOCK_STORED,
    "evict": K.BLOCK_REMOVED,
    "reset": K.ALL_BLOCKS_CLEARED,
    "lookup": K.LOOKED_UP,
    "fixed_point": K.FIXED_POINT_ITERATED,
    "req_blocks_add": K.REQ_BLOCKS_ADDED,
    "req_blocks_null": K.REQ_BLOCKS_NULLED,
    "req_free": K.REQ_FREED,
    "begin_call": K.CALL_BEGIN,
    "end_call": K.CALL_END,
}
"""Recorder hook name -> the kind of event it records."""


@dataclass(frozen=True)
class KindSchema:
    """How one kind uses the stored columns (None = column unused)."""

    hook: str | None
    a: str | None
    b: str | None
    payload: str | None
    uses_group: bool
    uses_request: bool
    mutates: bool
    doc: str


def _k(
    hook: str | None, a: str | None, b: str | None, payload: str | None, flags: str, doc: str
) -> KindSchema:
    # flags: "g" uses group, "r" uses request, "m" mutates the state
    return KindSchema(hook, a, b, payload, "g" in flags, "r" in flags, "m" in flags, doc)


# fmt: off
KIND_SCHEMA: dict[EventKind, KindSchema] = {
    K.STEP: _k(None, "step", None, None, "", N_("a scheduler step starts")),
    K.POPLEFT: _k("popleft", "block_id", None, None, "m", N_("free queue: head block unlinked")),
    K.POPLEFT_N: _k("popleft_n", None, None, "block_ids", "m",
                    N_("free queue: first len(block_ids) blocks unlinked")),
    K.REMOVE: _k("remove", "block_id", None, None, "m",
                 N_("free queue: block unlinked from the middle (cache hit)")),
    K.APPEND: _k("append", "block_id", None, None, "m", N_("free queue: block linked at the tail")),
    K.APPEND_N: _k("append_n", None, None, "block_ids", "m",
                   N_("free queue: blocks linked at the tail, in order")),
    K.GET_NEW_BLOCKS: _k("get_new_blocks", None, None, "block_ids", "m",
                         N_("ref_cnt += 1 for each new block")),
    K.TOUCH: _k("touch", None, None, "block_ids", "m",
                N_("ref_cnt += 1 for each hit block (null block included)")),
    K.FREE_BLOCKS: _k("free_blocks", None, None, "block_ids", "m",
                      N_("ref_cnt -= 1 for each block, in eviction order")),
    K.BLOCK_STORED: _k("cache_full_blocks", "num_cached_blocks", "num_full_blocks",
                       "block_ids+hashes", "grm",
                       N_("full blocks got their block_hash and entered the cached map")),
    K.BLOCK_REMOVED: _k("evict", "block_id", "hash", None, "gm",
                        N_("a cached block lost its block_hash (evicted from the map)")),
    K.ALL_BLOCKS_CLEARED: _k("reset", None, None, None, "m",
                             N_("reset_prefix_cache: every block_hash cleared")),
    K.LOOKED_UP: _k("lookup", "hash", "block_id", None, "g",
                    N_("get_cached_block probe for one group (block_id -1 = miss)")),
    K.FIXED_POINT_ITERATED: _k("fixed_point", "iteration", "hit_length_in",
                               "hit_length_out,flags,kv_cache_group_ids,block_ids", "g",
                               N_("one attention group's turn in the hybrid fixed point")),
    K.REQ_BLOCKS_ADDED: _k("req_blocks_add", None, None, "block_ids", "grm",
                           N_("req_to_blocks[request][group].extend(block_ids)")),
    K.REQ_BLOCKS_NULLED: _k("req_blocks_null", None, None, "indices", "grm",
                            N_("req_to_blocks[request][group][i] = null_block")),
    K.REQ_FREED: _k("req_free", None, None, None, "grm", N_("req_to_blocks[request][group] dropped")),
    K.CALL_BEGIN: _k("begin_call", "args", "args", "args", "r", N_("a KVCacheManager call starts")),
    K.CALL_END: _k("end_call", "result", "result", "result", "r", N_("the call opened last returns")),
}
# fmt: on
"""Field schema per kind; ``KIND_SCHEMA[k].doc`` is a one-line description."""

MUTATING_KINDS: frozenset[EventKind] = frozenset(k for k, s in KIND_SCHEMA.items() if s.mutates)
"""Kinds whose replay changes the KV state; all others are skipped by replay."""

VERBATIM = -(2**31)
"""Marker in ``a`` of a CALL event whose args/result are stored unpacked in the payload."""

WIDE = -(2**31) + 1
"""Marker in ``a`` of a CALL event holding a value outside int32 (``pack_wide``; b = arity)."""

_LIMB = 1 << 32


def pack_wide(values: Sequence[int]) -> tuple[int, ...]:
    """Store ints of any size in int32 payload slots, losslessly (a CALL row marked WIDE).

    Each value becomes ``n`` then its ``n`` 32-bit limbs, least significant first; the last
    limb is signed, the others are the low 32 bits reinterpreted as int32. A refused
    ``allocate_slots(r, 10**12)`` is recorded this way instead of failing the trace.

    Examples:
        >>> pack_wide([5, 10**12])
        (1, 5, 2, -727379968, 232)
        >>> unpack_wide(pack_wide([5, -(10**30)]))
        (5, -1000000000000000000000000000000)
    """
    out: list[int] = []
    for v in values:
        limbs = []
        while not -(2**31) <= v < 2**31:
            lo = v & 0xFFFFFFFF
            limbs.append(lo - _LIMB if lo >= 2**31 else lo)
            v >>= 32
        limbs.append(v)
        out.append(len(limbs))
        out.extend(limbs)
    return tuple(out)


def unpack_wide(payload: Sequence[int]) -> tuple[int, ...]:
    """Inverse of ``pack_wide``.

    Raises:
        ValueError: If the payload is not a ``pack_wide`` encoding.
    """
    values, pos = [], 0
    while pos < len(payload):
        n = int(payload[pos])
        if n < 1 or pos + 1 + n > len(payload):
            raise ValueError(f"bad WIDE payload: limb count {n} at position {pos}")
        limbs = [int(x) for x in payload[pos + 1 : pos + 1 + n]]
        v = limbs[-1]
        for limb in reversed(limbs[:-1]):
            v = (v << 32) | (limb & 0xFFFFFFFF)
        values.append(v)
        pos += 1 + n
    return tuple(values)


Packed = tuple[int, int, tuple[int, ...]]


@dataclass(frozen=True)
class CallSpec:
    """The integer args/result layout of one KVCacheManager call (kvlab.core.recorder).

    ``pack`` is the order in which args are stored: ``args[pack[0]]`` -> a, ``args[pack[1]]``
    -> b, the rest in the payload with trailing zeros trimmed (a decode step's
    ``allocate_slots`` then needs no payload at all).
    """

    call_id: int
    args: tuple[str, ...]
    result: tuple[str, ...]
    pack: tuple[int, ...] | None  # None = variable arity, stored verbatim

    def pack_args(self, args: Sequence[int]) -> Packed:
        """Return (a, b, payload) for ``args``; verbatim when the arity is unexpected."""
        return make_packer(self.pack)(args)

    def unpack_args(self, a: int, b: int, payload: list[int]) -> tuple[int, ...]:
        """Inverse of pack_args."""
        return _unpack(self.pack, a, b, payload)

    def pack_result(self, result: Sequence[int]) -> Packed:
        """Return (a, b, payload) for ``result`` (stored in order)."""
        return make_packer(tuple(range(len(self.result))))(result)

    def unpack_result(self, a: int, b: int, payload: list[int]) -> tuple[int, ...]:
        """Inverse of pack_result."""
        return _unpack(tuple(range(len(self.result))), a, b, payload)


def _verbatim(values: Sequence[int]) -> Packed:
    return VERBATIM, len(values), tuple(values)


def make_packer(order: tuple[int, ...] | None) -> Callable[[Sequence[int]], Packed]:
    """A fast ``args -> (a, b, payload)`` function for one arg layout (None = verbatim).

    Values are taken as given (ints); args of another arity are stored verbatim.
    """
    if order is None:
        return _verbatim
    arity = len(order)
    if arity <= 2:

        def pack_small(values: Sequence[int]) -> Packed:
            if len(values) != arity:
                return _verbatim(values)
            return (values[order[0]] if arity else 0, values[order[1]] if arity == 2 else 0, ())

        return pack_small
    getter = itemgetter(*order)

    def pack(values: Sequence[int]) -> Packed:
        if len(values) != arity:
            return _verbatim(values)
        packed = getter(values)
        rest = packed[2:]
        if not any(rest):
            return packed[0], packed[1], ()
        while not rest[-1]:
            rest = rest[:-1]
        return packed[0], packed[1], rest

    return pack


def _unpack(order: tuple[int, ...] | None, a: int, b: int, payload: list[int]) -> tuple[int, ...]:
    if a == VERBATIM or order is None:
        return tuple(payload)
    packed = [a, b, *payload][: max(len(order), 0)]
    packed += [0] * (len(order) - len(packed))
    values = [0] * len(order)
    for pos, j in enumerate(order):
        values[j] = packed[pos]
    return tuple(values)


def _spec(call_id: int, args: str, result: str, pack: tuple[int, ...] | None = ()) -> CallSpec:
    arg_names = tuple(args.split()) if args else ()
    if pack == ():
        pack = tuple(range(len(arg_names)))
    return CallSpec(call_id, arg_names, tuple(result.split()) if result else (), pack)


CALL_SPECS: dict[str, CallSpec] = {
    "get_computed_blocks": _spec(0, "num_tokens num_block_hashes", "num_new_computed_tokens"),
    # a = num_computed_tokens, b = num_new_tokens: a decode step packs into a and b alone.
    "allocate_slots": _spec(
        1,
        "num_computed_tokens num_new_computed_tokens num_external_computed_tokens num_new_tokens "
        "num_lookahead_tokens num_encoder_tokens delay_cache_blocks full_sequence_must_fit",
        "allocated num_blocks_to_allocate",
        (0, 3, 1, 2, 4, 5, 6, 7),
    ),
    "free": _spec(2, "", ""),
    "remove_skipped_blocks": _spec(3, "total_computed_tokens", ""),
    "cache_blocks": _spec(4, "num_computed_tokens", ""),
    "evict_blocks": _spec(5, "", "", None),  # args: the sorted block ids (variable arity)
    "reset_prefix_cache": _spec(6, "", "reset"),
    "new_step_starts": _spec(7, "", ""),
}
"""Known calls by name; their ``call_id`` is the name's index in every trace's call table."""


def decode_call(name: str, a: int, b: int, payload: list[int], is_end: bool) -> dict[str, Any]:
    """Decode packed call args (``is_end`` False) or result (True) into a dict by name.

    Numpy-free: ``kvlab.trace.Trace`` and the browser playground's ``LiteTrace`` decode calls
    with it.
    """
    spec = CALL_SPECS.get(name)
    key = "result" if is_end else "args"
    if a in (VERBATIM, WIDE) or spec is None:
        values = (
            list(payload) if a == VERBATIM
            else list(unpack_wide(payload)) if a == WIDE
            else [a, b, *payload]
        )  # fmt: skip
        names = None if spec is None else (spec.result if is_end else spec.args)
        if names and len(names) == len(values):
            return dict(zip(names, values))
        if name == "evict_blocks" and not is_end:
            return {"block_ids": values}
        return {key: values} if values else {}
    if is_end:
        return dict(zip(spec.result, spec.unpack_result(a, b, payload)))
    return dict(zip(spec.args, spec.unpack_args(a, b, payload)))


def pack_fixed_point(
    hit_length_out: int,
    reused: bool,
    kv_cache_group_ids: Sequence[int],
    block_ids: Sequence[Sequence[int]] | None,
) -> tuple[int, ...]:
    """The FIXED_POINT_ITERATED payload (layout in the module docstring).

    Args:
        hit_length_out: Candidate hit length after the turn (tokens).
        reused: Full attention truncated its earlier hit instead of searching.
        kv_cache_group_ids: The attention group's kv_cache_group_ids.
        block_ids: Per group (same order), the hit's block ids after the turn; None stores
            the old layout without block lists.

    Raises:
        ValueError: If ``block_ids`` does not have one list per group.

    Examples:
        >>> pack_fixed_point(8, False, [1, 2], [[0, 7], [0, 9]])
        (8, 4, 1, 2, 2, 2, 0, 7, 0, 9)
    """
    flags = 1 if reused else 0
    if block_ids is None:
        return (hit_length_out, flags, *kv_cache_group_ids)
    if len(block_ids) != len(kv_cache_group_ids) or not block_ids:
        raise ValueError(
            f"block_ids needs one list per kv_cache_group_id ({len(kv_cache_group_ids)}), "
            f"got {len(block_ids)}"
        )
    n = len(kv_cache_group_ids)
    flat = [b for blocks in block_ids for b in blocks]
    return (hit_length_out, flags | n << 1, *kv_cache_group_ids, *map(len, block_ids), *flat)


def unpack_fixed_point(
    payload: Sequence[int],
) -> tuple[int, bool, list[int], list[list[int]] | None]:
    """Inverse of ``pack_fixed_point``; old payloads (no block lists) give ``block_ids`` None.

    Returns:
        ``(hit_length_out, reused, kv_cache_group_ids, block_ids)``.
    """
    values = [int(v) for v in payload]
    flags = values[1]
    n = flags >> 1
    if n == 0:
        return values[0], bool(flags & 1), values[2:], None
    counts = values[2 + n : 2 + 2 * n]
    block_ids, pos = [], 2 + 2 * n
    for c in counts:
        block_ids.append(values[pos : pos + c])
        pos += c
    return values[0], bool(flags & 1), values[2 : 2 + n], block_ids
