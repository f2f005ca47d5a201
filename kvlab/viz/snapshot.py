"""What the pool looks like at one event: block status, free-queue window, block table rows.

These are plain data (no colours, no rich): the terminal renderers, the DOT builders and the
widget tests all read them, so every view agrees on what a block's status is.

A block's status at an event (exactly one applies, checked in this order)::

    null        the null_block (block 0): a placeholder id, never allocated, never freed
    in_use      ref_cnt > 0: some request's req_to_blocks holds it
    in_transit  ref_cnt == 0 but not in the free queue: mid-way through one BlockPool
                operation (popped by get_new_blocks before its ref_cnt rises, ...)
    evictable   ref_cnt == 0, in the free queue, still has its block_hash: a prefix-cache
                hit can take it back (touch); popleft evicts it (BlockRemoved)
    free        ref_cnt == 0, in the free queue, no block_hash: empty

Examples:
    >>> from kvlab.i18n import _
from kvlab.trace import KVState
    >>> s = KVState.fresh(4); s.free_queue.pop(3); s.ref_cnt[3] = 1
    >>> [c.value for c in block_statuses(s)]
    ['null', 'free', 'free', 'in_use']
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import Any

from kvlab.i18n import _
from kvlab.trace import KVState
from kvlab.trace.tables import split_key_code
from kvlab.trace.view import short_hash
from kvlab.viz.predict_common import group_label  # NOTE: numpy-free, so the playground ships it

__all__ = [
    "BlockCell",
    "BlockStatus",
    "BlockTableRow",
    "QueueWindow",
    "block_cells",
    "block_statuses",
    "block_table_rows",
    "free_queue_window",
    "group_label",
    "state_at",
]


class BlockStatus(str, Enum):
    """The status of one block at one event (see the module docstring)."""

    NULL = "null"
    IN_USE = "in_use"
    IN_TRANSIT = "in_transit"
    EVICTABLE = "evictable"
    FREE = "free"


@dataclass(frozen=True)
class BlockCell:
    """One block of the pool as a viewer shows it.

    Attributes:
        block_id: The block's id.
        status: Its BlockStatus.
        ref_cnt: Its ref_cnt.
        hash: Short hex of its block_hash (BlockHash bytes, no group id), or None.
        kv_cache_group_id: The group that holds it (req_to_blocks) or whose key it is cached
            under; None for the null block and for unowned free blocks.
    """

    block_id: int
    status: BlockStatus
    ref_cnt: int
    hash: str | None
    kv_cache_group_id: int | None


@dataclass(frozen=True)
class QueueWindow:
    """A free queue cut to fit a screen: the head end, a gap, the tail end.

    Attributes:
        head: Block ids from the fake head on (popleft takes ``head[0]`` first).
        tail: The last block ids before the fake tail (empty when nothing is hidden).
        num_hidden: Blocks between ``head`` and ``tail`` that are not shown (blocks).
        length: Blocks in the queue (blocks).
    """

    head: list[int]
    tail: list[int]
    num_hidden: int
    length: int

    def shown(self) -> list[int]:
        """Every shown block id, head end first."""
        return self.head + self.tail


@dataclass(frozen=True)
class BlockTableRow:
    """One request's block list in one group (``req_to_blocks[request_id]``).

    Attributes:
        request_id: The request.
        kv_cache_group_id: The group.
        block_ids: Logical block i -> block_id (the null block's id where nulled).
    """

    request_id: str
    kv_cache_group_id: int
    block_ids: list[int]


def state_at(trace: Any, index: int) -> KVState:
    """``trace.state_at(index)`` with a viewer-friendly error (index -1 = before event 0).

    Raises:
        IndexError: If ``index`` is not in [-1, len(trace)).
    """
    if not -1 <= index < len(trace):
        raise IndexError(
            f"event index {index} is outside [-1, {len(trace)}) for a trace of {len(trace)} events"
        )
    return trace.state_at(index)


def block_statuses(state: KVState) -> list[BlockStatus]:
    """The BlockStatus of every block of ``state``, indexed by block_id.

    NOTE: a block with ref_cnt 0 outside the free queue is in transit; between two
    KVCacheManager calls no block is (``kvlab.trace.check_invariants``).

    Args:
        state: A KVState.
    """
    queue, rc, bh, null = state.free_queue, state.ref_cnt, state.block_hash, state.null_block_id
    out = []
    for b in range(state.num_blocks):
        if b == null:
            out.append(BlockStatus.NULL)
        elif rc[b] > 0:
            out.append(BlockStatus.IN_USE)
        elif b not in queue:
            out.append(BlockStatus.IN_TRANSIT)
        elif bh[b] >= 0:
            out.append(BlockStatus.EVICTABLE)
        else:
            out.append(BlockStatus.FREE)
    return out


def _owner_groups(state: KVState) -> list[int | None]:
    owner: list[int | None] = [None] * state.num_blocks
    for b, code in enumerate(state.block_hash):
        if code >= 0:
            owner[b] = split_key_code(code)[1]
    for g, per_req in enumerate(state.req_to_blocks):
        for blocks in per_req.values():
            for b in blocks:
                owner[b] = g
    if state.null_block_id is not None:
        owner[state.null_block_id] = None
    return owner


def block_cells(trace: Any, index: int) -> list[BlockCell]:
    """Every block of the pool right after event ``index``, in block_id order.

    Args:
        trace: A kvlab.trace.Trace.
        index: Event index (-1 = the initial state).

    Returns:
        ``num_gpu_blocks`` cells.

    Raises:
        IndexError: If ``index`` is not in [-1, len(trace)).
    """
    state = state_at(trace, index)
    statuses = block_statuses(state)
    owners = _owner_groups(state)
    cells = []
    for b, status in enumerate(statuses):
        code = state.block_hash[b]
        h = None if code < 0 else short_hash(state.tables.hash_bytes(split_key_code(code)[0]))
        cells.append(BlockCell(b, status, state.ref_cnt[b], h, owners[b]))
    return cells


def free_queue_window(order: list[int], max_blocks: int = 32) -> QueueWindow:
    """Cut a free-queue order to at most ``max_blocks`` shown blocks.

    Keeps three quarters of the budget at the head (what popleft takes next, the eviction end)
    and the rest at the tail (what was freed last).

    Args:
        order: Block ids, head to tail (``KVState.free_queue_order()``).
        max_blocks: Blocks to show at most (blocks), >= 2.

    Raises:
        ValueError: If max_blocks < 2.
    """
    if max_blocks < 2:
        raise ValueError(f"max_blocks must be >= 2 (blocks), got {max_blocks}")
    n = len(order)
    if n <= max_blocks:
        return QueueWindow(list(order), [], 0, n)
    num_tail = max(1, max_blocks // 4)
    num_head = max_blocks - num_tail
    return QueueWindow(list(order[:num_head]), list(order[n - num_tail :]), n - max_blocks, n)


def block_table_rows(state: KVState) -> list[BlockTableRow]:
    """``req_to_blocks`` as rows: requests in order of first appearance, then by group.

    Args:
        state: A KVState.
    """
    rows = []
    requests = sorted({r for g in state.req_to_blocks for r in g})
    for r in requests:
        for g, per_req in enumerate(state.req_to_blocks):
            if r in per_req:
                rows.append(BlockTableRow(state.tables.request_id(r), g, list(per_req[r])))
    return rows
