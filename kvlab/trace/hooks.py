"""HookBuffer: the recorder's hot path, core's hook calls as a list of small tuples (no numpy).

``kvlab.trace.Recorder`` and the browser playground's recorder (``kvlab.playground.events``)
both subclass it, so the two turn the same hook calls into the same rows: every
``kvlab.core.recorder.KVRecorder`` hook appends one tuple ``(kind, group, request, a, b,
payload)`` to ``_buf`` (hash bytes go to ``_side``), merging consecutive reports of the same
kind as the protocol describes. What happens to the rows next is the subclass's business:
``_maybe_flush`` (called at call brackets and step marks) and ``_on_step`` are its two hooks.
This module imports only the standard library and ``kvlab.trace.events``, so it runs where
numpy does not (Pyodide).

Examples:
    >>> buf = HookBuffer()
    >>> buf.begin_call("free", "r0", ()); buf.free_blocks([3]); buf.end_call("free", ())
    >>> [row[0] for row in buf._buf]  # CALL_BEGIN, FREE_BLOCKS, CALL_END
    [17, 8, 18]
"""

from __future__ import annotations

import operator
from collections.abc import Sequence
from typing import Any

from kvlab.trace.events import CALL_SPECS, EventKind, pack_fixed_point

__all__ = ["HookBuffer", "is_int"]

K = EventKind
_POPLEFT, _POPLEFT_N, _REMOVE, _APPEND, _APPEND_N = 1, 2, 3, 4, 5
_GET_NEW, _TOUCH, _FREE, _STORED, _REMOVED, _CLEARED = 6, 7, 8, 9, 10, 11
_LOOKED_UP, _FIXED, _ADDED, _NULLED, _FREED, _BEGIN, _END, _STEP = 12, 13, 14, 15, 16, 17, 18, 0
_EMPTY: tuple[int, ...] = ()


def is_int(value: Any) -> bool:
    """True for ints and int-like values (``operator.index`` accepts them)."""
    try:
        operator.index(value)
    except TypeError:
        return False
    return True


class HookBuffer:
    """Every KVRecorder hook as one buffered row; subclasses decide what a flush does.

    Rows are ``(kind, group, request, a, b, payload)`` with ``kind`` an EventKind value; CALL
    rows hold the call id in ``group`` and the raw int args / result as ``payload``.
    LOOKED_UP, BLOCK_REMOVED and BLOCK_STORED rows each push one item to ``_side`` (the hash
    bytes, or the tuple of BlockHashWithGroupIds of a store), in row order.

    Attributes:
        step: The scheduler step stamped on events from now on (settable; see mark_step).
    """

    def __init__(self) -> None:
        self._buf: list[tuple] = []
        self._push = self._buf.append
        self._side: list[Any] = []
        self._side_push = self._side.append
        self._call_names: list[str] = sorted(CALL_SPECS, key=lambda n: CALL_SPECS[n].call_id)
        self._call_ids: dict[str, int] = {name: i for i, name in enumerate(self._call_names)}
        self._open_calls: list[str | None] = []
        # (request_id, group) pairs req_to_blocks holds: empty adds of a known pair and frees
        # of an unknown one change nothing and record nothing.
        self._req_keys: set[tuple[str, int]] = set()
        # The hybrid fixed point of the current lookup: (iteration, last candidate length).
        self._fixed_point: tuple[int, int] | None = None
        self._num_blocks_to_allocate = 0
        self._step = 0

    # ------------------------------------------------------------------ subclass hooks
    def _maybe_flush(self) -> None:
        """Called at call brackets and step marks (a subclass may columnarise here)."""

    def _on_step(self, step: int) -> None:
        """Called when ``step`` is set (a subclass records the step runs)."""

    # ------------------------------------------------------------------ steps
    @property
    def step(self) -> int:
        """The scheduler step of the events recorded from now on."""
        return self._step

    @step.setter
    def step(self, value: int) -> None:
        if isinstance(value, bool) or not is_int(value) or not 0 <= value < 2**31:
            raise ValueError(f"step must be an int in [0, 2**31), got {value!r}")
        value = int(value)
        self._step = value
        self._on_step(value)

    def mark_step(self, step: int) -> None:
        """Set ``step`` and record a STEP event (a scheduler step boundary).

        Raises:
            ValueError: If ``step`` is not an int in [0, 2**31) (nothing recorded).
        """
        self.step = step
        self._push((_STEP, 0, None, self._step, 0, _EMPTY))
        self._maybe_flush()

    # ------------------------------------------------------------------ FreeKVCacheBlockQueue
    # NOTE: the hot path. Each hook appends one tuple (kind, group, request, a, b, payload);
    # bytes (hashes) go to a side list, interned at columnarisation.
    def popleft(self, block_id: int) -> None:
        """Hook: the free queue's head block was unlinked."""
        self._push((_POPLEFT, 0, None, block_id, 0, _EMPTY))

    def popleft_n(self, block_ids: Sequence[int]) -> None:
        """Hook: the first len(block_ids) blocks were unlinked."""
        self._push((_POPLEFT_N, 0, None, 0, 0, tuple(block_ids)))

    def remove(self, block_id: int) -> None:
        """Hook: a block was unlinked from the middle of the free queue."""
        self._push((_REMOVE, 0, None, block_id, 0, _EMPTY))

    def append(self, block_id: int) -> None:
        """Hook: a block was linked at the free queue's tail."""
        self._push((_APPEND, 0, None, block_id, 0, _EMPTY))

    def append_n(self, block_ids: Sequence[int]) -> None:
        """Hook: blocks were linked at the tail, in order."""
        self._push((_APPEND_N, 0, None, 0, 0, tuple(block_ids)))

    # ------------------------------------------------------------------ BlockPool
    def _merge(self, kind: int, group: int, request: str | None, ids: Sequence[int]) -> bool:
        """Extend the last buffered event if it is ``kind`` for the same group and request."""
        buf = self._buf
        if buf:
            last = buf[-1]
            if last[0] == kind and last[1] == group and last[2] == request:
                buf[-1] = (kind, group, request, last[3], last[4], last[5] + tuple(ids))
                return True
        return False

    def get_new_blocks(self, block_ids: Sequence[int]) -> None:
        """Hook: ref_cnt += 1 for each newly allocated block (merged with a GET_NEW_BLOCKS
        event just before it: core reports the blocks of its loop one by one)."""
        if not self._merge(_GET_NEW, 0, None, block_ids):
            self._push((_GET_NEW, 0, None, 0, 0, tuple(block_ids)))

    def touch(self, block_ids: Sequence[int]) -> None:
        """Hook: ref_cnt += 1 for each hit block (merged with a TOUCH event just before it)."""
        if not self._merge(_TOUCH, 0, None, block_ids):
            self._push((_TOUCH, 0, None, 0, 0, tuple(block_ids)))

    def free_blocks(self, block_ids: Sequence[int]) -> None:
        """Hook: ref_cnt -= 1 for each block, in this order (nothing for no block)."""
        if block_ids:
            self._push((_FREE, 0, None, 0, 0, tuple(block_ids)))

    def cache_full_blocks(
        self,
        request_id: str,
        kv_cache_group_id: int,
        num_cached_blocks: int,
        num_full_blocks: int,
        block_ids: Sequence[int],
        block_hashes: Sequence[bytes],
    ) -> None:
        """Hook: ``block_ids[i]`` got BlockHashWithGroupId ``block_hashes[i]`` and was cached
        (nothing when no block was: all null or masked out)."""
        if not block_ids:
            return
        self._push(
            (
                _STORED,
                kv_cache_group_id,
                request_id,
                num_cached_blocks,
                num_full_blocks,
                tuple(block_ids),
            )
        )
        self._side_push(tuple(block_hashes))

    def evict(self, block_id: int, block_hash: bytes) -> None:
        """Hook: a cached block lost its BlockHashWithGroupId ``block_hash``."""
        self._push((_REMOVED, 0, None, block_id, 0, _EMPTY))
        self._side_push(block_hash)

    def reset(self) -> None:
        """Hook: reset_prefix_cache cleared every hash."""
        self._push((_CLEARED, 0, None, 0, 0, _EMPTY))

    def lookup(self, block_hash: bytes, kv_cache_group_id: int, block_id: int) -> None:
        """Hook: one get_cached_block probe (block_id -1 on a miss)."""
        self._push((_LOOKED_UP, kv_cache_group_id, None, 0, block_id, _EMPTY))
        self._side_push(block_hash)

    # ------------------------------------------------------------------ coordinator / managers
    def fixed_point(
        self,
        idx: int,
        kv_cache_group_ids: Sequence[int],
        hit_length: int,
        curr_hit_length: int,
        reused: bool,
        block_ids: Sequence[Sequence[int]] | None = None,
    ) -> None:
        """Hook: attention group ``idx``'s turn in a hybrid fixed-point iteration.

        The iteration started at ``hit_length`` tokens; the candidate is ``curr_hit_length``
        after the turn. The recorder numbers the iterations (a turn of attention group 0 starts
        one; a call bracket starts a new lookup) and stores the candidate before the turn.
        ``block_ids`` (one list per group: the hit's block ids after the turn) is stored after
        the group ids; None records the pre-block-list layout (``pack_fixed_point``).
        """
        state = self._fixed_point
        if state is None:
            iteration, hit_length_in = 0, hit_length
        elif idx == 0:
            iteration, hit_length_in = state[0] + 1, hit_length
        else:
            iteration, hit_length_in = state[0], state[1]
        self._fixed_point = (iteration, curr_hit_length)
        hit_length_out = curr_hit_length
        payload = pack_fixed_point(hit_length_out, reused, kv_cache_group_ids, block_ids)
        self._push(
            (
                _FIXED,
                kv_cache_group_ids[0] if kv_cache_group_ids else 0,
                None,
                iteration,
                hit_length_in,
                payload,
            )
        )

    def req_blocks_add(
        self, request_id: str, kv_cache_group_id: int, block_ids: Sequence[int]
    ) -> None:
        """Hook: ``req_to_blocks[request_id][group].extend(block_ids)``.

        An empty ``block_ids`` marks where the defaultdict creates the entry: recorded only if
        the request had none in this group. Merged with an add just before it for the same
        request and group (e.g. null padding, then hits).
        """
        key = (request_id, kv_cache_group_id)
        if not block_ids and key in self._req_keys:
            return
        self._req_keys.add(key)
        if not self._merge(_ADDED, kv_cache_group_id, request_id, block_ids):
            self._push((_ADDED, kv_cache_group_id, request_id, 0, 0, tuple(block_ids)))

    def req_blocks_null(
        self, request_id: str, kv_cache_group_id: int, indices: Sequence[int]
    ) -> None:
        """Hook: ``req_to_blocks[request_id][group][i] = null_block`` for each i (merged with a
        nulling of the same request and group just before it)."""
        if not self._merge(_NULLED, kv_cache_group_id, request_id, indices):
            self._push((_NULLED, kv_cache_group_id, request_id, 0, 0, tuple(indices)))

    def req_free(self, request_id: str, kv_cache_group_id: int) -> None:
        """Hook: ``req_to_blocks[request_id][group]`` dropped (nothing if it did not exist)."""
        key = (request_id, kv_cache_group_id)
        if key not in self._req_keys:
            return
        self._req_keys.discard(key)
        self._push((_FREED, kv_cache_group_id, request_id, 0, 0, _EMPTY))

    # ------------------------------------------------------------------ calls
    def num_blocks_to_allocate(self, num_blocks: int) -> None:
        """Hook: allocate_slots' block count (the second value of its call's result)."""
        self._num_blocks_to_allocate = num_blocks

    def begin_call(self, name: str, request_id: str | None, args: Sequence[int]) -> None:
        """Hook: a KVCacheManager call starts (args packed at columnarisation, see CALL_SPECS)."""
        self._fixed_point = None
        self._num_blocks_to_allocate = 0
        call_id = self._call_ids.get(name)
        if call_id is None:
            call_id = self._new_call(name)
        self._push((_BEGIN, call_id, request_id, 0, 0, args))
        self._open_calls.append(request_id)
        self._maybe_flush()

    def end_call(self, name: str, result: Sequence[int]) -> None:
        """Hook: the call opened last returns ``result``.

        ``allocate_slots`` reports ``(allocated,)``: the recorder adds the last
        ``num_blocks_to_allocate`` of the call, giving ``(allocated, num_blocks_to_allocate)``.
        """
        self._fixed_point = None
        if name == "allocate_slots" and len(result) == 1:
            result = (result[0], self._num_blocks_to_allocate)
        call_id = self._call_ids.get(name)
        if call_id is None:
            call_id = self._new_call(name)
        open_calls = self._open_calls
        self._push((_END, call_id, open_calls.pop() if open_calls else None, 0, 0, result))
        self._maybe_flush()

    def abort_call(self, name: str) -> None:
        """Hook: the call opened last raised. Dropped if nothing was recorded inside it (its
        guard refused the input), else closed with an empty result."""
        buf = self._buf
        if buf and buf[-1][0] == _BEGIN and self._open_calls:
            buf.pop()
            self._open_calls.pop()
            return
        self.end_call(name, ())

    def _new_call(self, name: str) -> int:
        call_id = self._call_ids[name] = len(self._call_names)
        self._call_names.append(name)
        return call_id
