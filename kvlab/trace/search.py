"""Search a trace: vectorised filters over the event columns (kind, request, group, step, block).

Examples:
    >>> from kvlab.trace import Recorder, KVState, EventKind
    >>> rec = Recorder(initial_state=KVState.fresh(4))
    >>> rec.popleft_n([1, 2]); rec.get_new_blocks([1, 2]); rec.free_blocks([2])
    >>> filter_events(rec.trace(), block_id=2).tolist()
    [0, 1, 2]
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np

from kvlab.trace.columns import Columns
from kvlab.trace.events import EventKind

__all__ = ["filter_events", "mentions_block"]

K = EventKind
_BLOCK_IN_A = [int(k) for k in (K.POPLEFT, K.REMOVE, K.APPEND, K.BLOCK_REMOVED)]
_BLOCK_LISTS = [
    int(k)
    for k in (K.POPLEFT_N, K.APPEND_N, K.GET_NEW_BLOCKS, K.TOUCH, K.FREE_BLOCKS, K.REQ_BLOCKS_ADDED)
]


def filter_events(
    trace: Any,
    kind: EventKind | Iterable[EventKind] | None = None,
    *,
    request: str | None = None,
    group: int | None = None,
    step: int | None = None,
    block_id: int | None = None,
    depth: int | None = None,
    start: int = 0,
    stop: int | None = None,
) -> np.ndarray:
    """Indexes of the events in [start, stop) matching every given criterion.

    Args:
        trace: A kvlab.trace.Trace; kind: one kind or several.
        request: Request id the event carries (REQ_*, BLOCK_STORED, CALL_BEGIN/END).
        group: kv_cache_group_id (CALL events never match: their column holds the call id).
        step: Scheduler step.
        block_id: Events that name this block (as block_id or in a block list).
        depth: Call nesting depth.
        start, stop: Event range (stop None = the end).

    Returns:
        int64 array of the matching event indexes, ascending.

    Raises:
        ValueError: If start is negative.
    """
    if start < 0:
        raise ValueError(f"start must be >= 0, got {start}")
    c = trace.cols
    stop = len(c) if stop is None else min(stop, len(c))
    sl = slice(start, stop)
    mask = np.ones(max(stop - start, 0), dtype=bool)
    if kind is not None:
        kinds = [kind] if isinstance(kind, (int, EventKind)) else list(kind)
        mask &= np.isin(c.kind[sl], [int(k) for k in kinds])
    if request is not None:
        idx = trace.tables.find_request(request)
        mask &= (c.request[sl] == idx) if idx >= 0 else False  # an unknown id matches nothing
    if group is not None:
        mask &= (c.group[sl] == group) & (c.kind[sl] != K.CALL_BEGIN) & (c.kind[sl] != K.CALL_END)
    if step is not None:
        mask &= trace.steps()[sl] == step
    if depth is not None:
        mask &= c.depth[sl] == depth
    if block_id is not None:
        mask &= mentions_block(c, block_id)[sl]
    return np.flatnonzero(mask) + start


def mentions_block(cols: Columns, block_id: int) -> np.ndarray:
    """bool [num_events]: the event names ``block_id`` (a block_id field or a block list).

    Hash indexes and request positions in payloads are not block ids and never match.
    """
    c = cols
    hit = np.isin(c.kind, _BLOCK_IN_A) & (c.a == block_id)
    hit |= (c.kind == K.LOOKED_UP) & (c.b == block_id)
    pos = np.flatnonzero(c.payload == block_id)
    owner = np.searchsorted(c.offsets, pos, side="right") - 1
    kinds = c.kind[owner]
    begin = c.offsets[owner].astype(np.int64)
    half = (c.offsets[owner + 1].astype(np.int64) - begin) // 2
    ok = np.isin(kinds, _BLOCK_LISTS) | ((kinds == K.BLOCK_STORED) & (pos - begin < half))
    hit[owner[ok]] = True
    return hit
