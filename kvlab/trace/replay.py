"""Replay: apply recorded events to a KVState, one at a time (checked) or in bulk (fast).

Each state-changing kind (``kvlab.trace.events.MUTATING_KINDS``) has one rule, the state change
the recorder protocol documents for its hook (``kvlab.core.recorder``). Reads (lookups,
fixed-point turns), calls and STEP markers change nothing and are skipped.

``apply_event`` checks every precondition (popleft takes the head, a removed block is in the
queue, an evicted key holds the block...) and raises ReplayError naming the event;
``replay_into`` applies a range of rows straight from the columns for speed (>= 1M events/s)
and relies on Python's own KeyError/IndexError for the same damage.

Examples:
    >>> from kvlab.trace.state import KVState
    >>> s = KVState.fresh(4)
    >>> apply_event(s, EventKind.POPLEFT_N, payload=[1, 2])
    >>> apply_event(s, EventKind.GET_NEW_BLOCKS, payload=[1, 2])
    >>> s.free_queue_order(), s.ref_cnt
    ([3], [0, 1, 1, 0])
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from kvlab.trace.columns import Columns
from kvlab.trace.events import MUTATING_KINDS, EventKind
from kvlab.trace.state import KVState
from kvlab.trace.tables import key_code

__all__ = ["MUTATING_MASK", "ReplayError", "apply_event", "replay_into"]

K = EventKind

MUTATING_MASK = np.zeros(256, dtype=bool)
"""Lookup table kind -> True when replay must apply the kind."""
MUTATING_MASK[[int(k) for k in MUTATING_KINDS]] = True


class ReplayError(ValueError):
    """An event cannot be applied to the state it is replayed on (damaged or foreign trace)."""


def apply_event(
    state: KVState,
    kind: int,
    group: int = 0,
    request: int = -1,
    a: int = 0,
    b: int = 0,
    payload: Sequence[int] = (),
) -> None:
    """Apply one event to ``state`` in place, checking its preconditions.

    Args:
        state: The state before the event.
        kind: An EventKind.
        group: kv_cache_group_id (BLOCK_STORED, BLOCK_REMOVED, REQ_*).
        request: Request index into ``state.tables`` (REQ_*, BLOCK_STORED).
        a, b: The event's scalars (see kvlab.trace.events).
        payload: The event's payload ints.

    Raises:
        ReplayError: If the event does not fit the state (the state is then unspecified).
    """
    kind = EventKind(kind)
    if kind not in MUTATING_KINDS:
        return
    try:
        _APPLY[kind](state, group, request, a, b, list(payload))
    except ReplayError:
        raise
    except (KeyError, IndexError, ValueError) as exc:
        raise ReplayError(
            f"{kind.name}(group={group}, request={request}, a={a}, b={b}, "
            f"payload={list(payload)[:8]}): {exc!r}"
        ) from exc


def _need(cond: bool, msg: str) -> None:
    if not cond:
        raise ReplayError(msg)


def _popleft(s: KVState, g: int, r: int, a: int, b: int, p: list[int]) -> None:
    _need(bool(s.free_queue), "POPLEFT on an empty free queue")
    head = next(iter(s.free_queue))
    _need(head == a, f"POPLEFT of block {a} but the head is block {head}")
    del s.free_queue[a]


def _popleft_n(s: KVState, g: int, r: int, a: int, b: int, p: list[int]) -> None:
    head = list(_take(s.free_queue, len(p)))
    _need(head == p, f"POPLEFT_N of {p[:8]} but the queue starts with {head[:8]}")
    for x in p:
        del s.free_queue[x]


def _take(queue: dict[int, None], n: int) -> list[int]:
    out = []
    for x in queue:
        if len(out) == n:
            break
        out.append(x)
    return out


def _remove(s: KVState, g: int, r: int, a: int, b: int, p: list[int]) -> None:
    _need(a in s.free_queue, f"REMOVE of block {a}, which is not in the free queue")
    del s.free_queue[a]


def _append(s: KVState, g: int, r: int, a: int, b: int, p: list[int]) -> None:
    _append_n(s, g, r, a, b, [a])


def _append_n(s: KVState, g: int, r: int, a: int, b: int, p: list[int]) -> None:
    for x in p:
        _need(0 <= x < s.num_blocks, f"APPEND of block {x} outside [0, {s.num_blocks})")
        _need(x not in s.free_queue, f"APPEND of block {x}, which is already in the free queue")
        s.free_queue[x] = None


def _ref_up(s: KVState, g: int, r: int, a: int, b: int, p: list[int]) -> None:
    for x in p:
        s.ref_cnt[x] += 1


def _ref_down(s: KVState, g: int, r: int, a: int, b: int, p: list[int]) -> None:
    for x in p:
        s.ref_cnt[x] -= 1


def _stored(s: KVState, g: int, r: int, a: int, b: int, p: list[int]) -> None:
    _need(len(p) % 2 == 0, f"BLOCK_STORED payload has odd length {len(p)}")
    n = len(p) // 2
    for bid, h in zip(p[:n], p[n:]):
        _need(s.block_hash[bid] < 0, f"BLOCK_STORED on block {bid}, which already has a hash")
        code = key_code(h, g)
        s.block_hash[bid] = code
        s.cached[code] = s.cached.get(code, ()) + (bid,)


def _removed(s: KVState, g: int, r: int, a: int, b: int, p: list[int]) -> None:
    code = key_code(b, g)
    held = s.cached.get(code, ())
    _need(a in held, f"BLOCK_REMOVED of block {a}, which is not cached under that key")
    _need(s.block_hash[a] == code, f"BLOCK_REMOVED of block {a} whose block_hash is another key")
    s.block_hash[a] = -1
    rest = tuple(x for x in held if x != a)
    if rest:
        s.cached[code] = rest
    else:
        del s.cached[code]


def _cleared(s: KVState, g: int, r: int, a: int, b: int, p: list[int]) -> None:
    s.cached.clear()
    s.block_hash[:] = [-1] * s.num_blocks  # NOTE: in place: the fast loop holds this list


def _req_add(s: KVState, g: int, r: int, a: int, b: int, p: list[int]) -> None:
    blocks = s.req_to_blocks[g]
    if r in blocks:
        blocks[r].extend(p)
    else:
        blocks[r] = list(p)


def _req_null(s: KVState, g: int, r: int, a: int, b: int, p: list[int]) -> None:
    blocks = s.req_to_blocks[g][r]
    _need(s.null_block_id is not None, "REQ_BLOCKS_NULLED but the pool has no null block")
    for i in p:
        blocks[i] = s.null_block_id


def _req_free(s: KVState, g: int, r: int, a: int, b: int, p: list[int]) -> None:
    s.req_to_blocks[g].pop(r, None)


_APPLY = {
    K.POPLEFT: _popleft,
    K.POPLEFT_N: _popleft_n,
    K.REMOVE: _remove,
    K.APPEND: _append,
    K.APPEND_N: _append_n,
    K.GET_NEW_BLOCKS: _ref_up,
    K.TOUCH: _ref_up,
    K.FREE_BLOCKS: _ref_down,
    K.BLOCK_STORED: _stored,
    K.BLOCK_REMOVED: _removed,
    K.ALL_BLOCKS_CLEARED: _cleared,
    K.REQ_BLOCKS_ADDED: _req_add,
    K.REQ_BLOCKS_NULLED: _req_null,
    K.REQ_FREED: _req_free,
}
assert set(_APPLY) == set(MUTATING_KINDS)


def replay_into(state: KVState, cols: Columns, start: int, stop: int) -> None:
    """Apply events [start, stop) of ``cols`` to ``state`` in place (the fast path).

    Args:
        state: The state before event ``start``.
        cols: The trace's columns.
        start, stop: Event range (0 <= start <= stop <= len(cols)).

    Raises:
        ReplayError: If an event does not fit the state (a damaged or foreign trace).
    """
    if start >= stop:
        return
    kinds = cols.kind[start:stop]
    rows = np.flatnonzero(MUTATING_MASK[kinds])
    if len(rows) == 0:
        return
    base = int(cols.offsets[start])
    o0 = (cols.offsets[start:stop][rows].astype(np.int64) - base).tolist()
    o1 = (cols.offsets[start + 1 : stop + 1][rows].astype(np.int64) - base).tolist()
    payload = cols.payload[base : int(cols.offsets[stop])].tolist()
    columns = (
        kinds[rows].tolist(),
        cols.group[start:stop][rows].tolist(),
        cols.request[start:stop][rows].tolist(),
        cols.a[start:stop][rows].tolist(),
        cols.b[start:stop][rows].tolist(),
        o0,
        o1,
    )
    try:
        _fast_loop(state, payload, *columns)
    except (KeyError, IndexError, ValueError, TypeError) as exc:
        raise ReplayError(
            f"replaying events [{start}, {stop}) failed: {exc!r}; "
            "use Trace.check_replay() to find the first bad event"
        ) from exc


def _fast_loop(
    state: KVState, P: list[int], kinds: list[int], groups: list[int], reqs: list[int],
    As: list[int], Bs: list[int], o0: list[int], o1: list[int],
) -> None:  # fmt: skip
    # NOTE: the frequent kinds are inlined, ordered by how often they occur when serving;
    # the rare ones go through the checked rules of apply_event.
    q, rc, bh = state.free_queue, state.ref_cnt, state.block_hash
    cached, rtb = state.cached, state.req_to_blocks
    shift = key_code(1, 0)
    for k, g, r, a, b, s, e in zip(kinds, groups, reqs, As, Bs, o0, o1):
        if k == 14:  # REQ_BLOCKS_ADDED
            blocks = rtb[g].get(r)
            if blocks is None:
                rtb[g][r] = P[s:e]
            else:
                blocks.extend(P[s:e])
        elif k == 6 or k == 7:  # GET_NEW_BLOCKS, TOUCH
            for x in P[s:e]:
                rc[x] += 1
        elif k == 2:  # POPLEFT_N
            for x in P[s:e]:
                del q[x]
        elif k == 9:  # BLOCK_STORED
            n = (e - s) >> 1
            for bid, h in zip(P[s : s + n], P[s + n : e]):
                code = h * shift + g
                bh[bid] = code
                held = cached.get(code)
                cached[code] = (bid,) if held is None else (*held, bid)
        elif k == 8:  # FREE_BLOCKS
            for x in P[s:e]:
                rc[x] -= 1
        elif k == 5:  # APPEND_N
            for x in P[s:e]:
                q[x] = None
        elif k == 16:  # REQ_FREED
            rtb[g].pop(r, None)
        elif k == 3 or k == 1:  # REMOVE, POPLEFT
            del q[a]
        else:  # BLOCK_REMOVED, APPEND, REQ_BLOCKS_NULLED, ALL_BLOCKS_CLEARED
            _APPLY[EventKind(k)](state, g, r, a, b, P[s:e])
