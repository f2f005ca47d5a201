"""EventRecorder: kvlab.core's hooks recorded as plain Python lists, for a browser without numpy.

It is ``kvlab.trace.Recorder`` without numpy: the same hook layer (``kvlab.trace.hooks``
.HookBuffer, shared code), then the same columnarisation done with lists: request ids and
hashes interned in the same order, call args packed as ``kvlab.trace.events.CALL_SPECS`` says,
the same call depth, the same step runs, chunk by chunk at the same points. So a scenario run
with either recorder gives equal columns, tables and initial state
(tests/playground/test_equivalence.py); ``kvlab.playground.encode`` turns a ``LiteTrace`` into
the player's format exactly as ``kvlab.viz.encode_trace`` turns a Trace.

Examples:
    >>> rec = EventRecorder()
    >>> rec.begin_call("free", "r0", ()); rec.free_blocks([3]); rec.end_call("free", ())
    >>> rec.lite_trace(initial=initial_state_fresh(8)).kind
    [17, 8, 18]
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from kvlab.core.kv_cache_utils import get_block_hash, get_group_id
from kvlab.trace.events import CALL_SPECS, VERBATIM, WIDE, EventKind, pack_wide
from kvlab.trace.hooks import HookBuffer
from kvlab.trace.metadata import manager_config

__all__ = ["COLUMNS", "EventRecorder", "InitialState", "LiteTrace", "initial_state_fresh"]

K = EventKind
COLUMNS = ("kind", "depth", "group", "request", "a", "b")
"""The per-event columns (``kvlab.trace.columns.COLUMN_DTYPES``'s names)."""

_SIDE_KINDS = (K.BLOCK_STORED, K.BLOCK_REMOVED, K.LOOKED_UP)
_LO, _HI = WIDE + 1, 2**31 - 1  # call values in [_LO, _HI] pack as is; others go WIDE
_RANGES = {"a": (-(2**31), 2**31 - 1), "b": (-(2**31), 2**31 - 1), "group": (-(2**15), 2**15 - 1)}


@dataclass
class InitialState:
    """The manager's state when the recorder was attached (``kvlab.trace.KVState``'s fields).

    Attributes:
        num_blocks, num_groups: Pool size (blocks) and KV cache groups.
        null_block_id: The null block's id (None: no null block).
        free_queue: Block ids, head to tail.
        ref_cnt: Per block id.
        block_hash: Per block id, key code (hash index << 16 | group) or -1.
        cached: Key code -> block ids, in the cached map's order.
        req_to_blocks: Per group, request index -> block ids.
    """

    num_blocks: int
    num_groups: int
    null_block_id: int | None
    free_queue: list[int]
    ref_cnt: list[int]
    block_hash: list[int]
    cached: dict[int, tuple[int, ...]] = field(default_factory=dict)
    req_to_blocks: list[dict[int, list[int]]] = field(default_factory=list)


def initial_state_fresh(num_blocks: int, num_groups: int = 1) -> InitialState:
    """A new BlockPool's state: block 0 is the null block, 1..n-1 queued (``KVState.fresh``)."""
    return InitialState(
        num_blocks,
        num_groups,
        0,
        list(range(1, num_blocks)),
        [0] * num_blocks,
        [-1] * num_blocks,
        {},
        [{} for _ in range(num_groups)],
    )


@dataclass
class LiteTrace:
    """A recorded trace as lists (the fields of ``kvlab.trace.columns.Columns`` and a Trace).

    Attributes:
        kind, depth, group, request, a, b: Per event (see kvlab.trace.events).
        offsets: [num_events + 1] payload offsets; event i owns payload[offsets[i]:offsets[i+1]].
        payload: The flat payload.
        step_seq, step_val: Step runs (step_val[j] holds from event step_seq[j] on).
        requests: Request index -> id.
        hashes: Hash index -> BlockHash bytes.
        call_names: Call id -> name.
        initial: The state before event 0.
        config: ``kvlab.trace.metadata.manager_config`` of the manager.
    """

    kind: list[int]
    depth: list[int]
    group: list[int]
    request: list[int]
    a: list[int]
    b: list[int]
    offsets: list[int]
    payload: list[int]
    step_seq: list[int]
    step_val: list[int]
    requests: list[str]
    hashes: list[bytes]
    call_names: list[str]
    initial: InitialState
    config: dict[str, Any]

    def __len__(self) -> int:
        return len(self.kind)

    def payload_of(self, i: int) -> list[int]:
        """Event ``i``'s payload."""
        return self.payload[self.offsets[i] : self.offsets[i + 1]]


class EventRecorder(HookBuffer):
    """Records kvlab.core's hooks into lists; ``lite_trace()`` returns them.

    Args:
        chunk_size: Events buffered before columnarising (events); the same default as
            ``kvlab.trace.Recorder``, since interning order follows the chunks.
    """

    def __init__(self, chunk_size: int = 8192) -> None:
        super().__init__()
        self._chunk_size = chunk_size
        self.cols: dict[str, list[int]] = {name: [] for name in COLUMNS}
        self.offsets: list[int] = [0]
        self.payload: list[int] = []
        self.step_seq: list[int] = [0]
        self.step_val: list[int] = [0]
        self.requests: list[str] = []
        self.hashes: list[bytes] = []
        self._request_index: dict[str, int] = {}
        self._hash_index: dict[bytes, int] = {}
        self._depth = 0
        self.manager: Any = None
        self.initial: InitialState | None = None
        self.config: dict[str, Any] = {}

    def attach(self, kv_cache_manager: Any) -> EventRecorder:
        """Snapshot a fresh KVCacheManager as the initial state and start recording it.

        Raises:
            RuntimeError: If this recorder is attached or has events, or the manager already
                holds requests or cached blocks (the playground attaches before any request).
        """
        if self.manager is not None or len(self) > 0:
            raise RuntimeError("attach() needs a fresh EventRecorder")
        pool = kv_cache_manager.block_pool
        managers = kv_cache_manager.coordinator.single_type_managers
        if any(b.block_hash is not None for b in pool.blocks) or any(
            m.req_to_blocks for m in managers
        ):
            raise RuntimeError("attach the EventRecorder to a manager that holds no request")
        null = pool.null_block
        self.initial = InitialState(
            len(pool.blocks),
            len(managers),
            None if null is None else null.block_id,
            [b.block_id for b in pool.free_block_queue.get_all_free_blocks()],
            [b.ref_cnt for b in pool.blocks],
            [-1] * len(pool.blocks),
            {},
            [{} for _ in managers],
        )
        self.config = manager_config(kv_cache_manager)
        kv_cache_manager.set_recorder(self)
        self.manager = kv_cache_manager
        return self

    def __len__(self) -> int:
        return len(self.cols["kind"]) + len(self._buf)

    # ------------------------------------------------------------------ HookBuffer hooks
    def _on_step(self, step: int) -> None:  # ColumnStore.set_step
        seq = len(self)
        if self.step_seq[-1] == seq:
            self.step_val[-1] = step
            if len(self.step_val) > 1 and self.step_val[-2] == step:
                self.step_seq.pop()
                self.step_val.pop()
        elif self.step_val[-1] != step:
            self.step_seq.append(seq)
            self.step_val.append(step)

    def _maybe_flush(self) -> None:
        if len(self._buf) >= self._chunk_size:
            self._flush()

    # ------------------------------------------------------------------ columnarisation
    def _intern_request(self, request_id: str) -> int:
        idx = self._request_index.get(request_id)
        if idx is None:
            idx = self._request_index[request_id] = len(self.requests)
            self.requests.append(request_id)
        return idx

    def _intern_hash(self, block_hash: bytes) -> int:
        idx = self._hash_index.get(block_hash)
        if idx is None:
            idx = self._hash_index[block_hash] = len(self.hashes)
            self.hashes.append(bytes(block_hash))
        return idx

    def _flush(self) -> None:
        """kvlab.trace.chunking.columnarise on lists (same interning order, same packing)."""
        rows = [list(r) for r in self._buf]
        if not rows:
            return
        side_rows = [i for i, r in enumerate(rows) if r[0] in _SIDE_KINDS]
        if len(side_rows) != len(self._side):
            raise RuntimeError(
                f"recorder side list out of step: {len(self._side)} items, {len(side_rows)} rows"
            )
        items = list(zip(side_rows, self._side, strict=True))
        for i, h in items:  # NOTE: lookups first, then evictions, then stores (as columnarise)
            if rows[i][0] == K.LOOKED_UP:
                rows[i][3] = self._intern_hash(h)
        for i, key in items:
            if rows[i][0] == K.BLOCK_REMOVED:
                rows[i][4], rows[i][1] = self._intern_hash(get_block_hash(key)), get_group_id(key)
        for i, keys in items:
            if rows[i][0] == K.BLOCK_STORED:
                rows[i][5] = (*rows[i][5], *(self._intern_hash(get_block_hash(k)) for k in keys))
        self._pack_calls(rows)
        cols, depth = self.cols, self._depth
        for kind, group, request, a, b, payload in rows:
            begin, end = kind == K.CALL_BEGIN, kind == K.CALL_END
            depth += 1 if begin else -1 if end else 0
            cols["depth"].append(min(max(depth - begin, 0), 255))
            cols["kind"].append(int(kind))
            cols["request"].append(-1 if request is None else self._intern_request(request))
            for name, value in (("group", group), ("a", a), ("b", b)):
                lo, hi = _RANGES[name]
                if not lo <= value <= hi:
                    raise OverflowError(f"an event's {name} value does not fit: {value}")
                cols[name].append(int(value))
            self.payload.extend(int(v) for v in payload)
            self.offsets.append(len(self.payload))
        self._depth = max(depth, 0)
        self._buf.clear()
        self._side.clear()

    def _pack_calls(self, rows: list[list[Any]]) -> None:
        """Pack CALL rows as chunking._pack_calls: per (kind, call) a layout; every row of a
        (kind, call) whose arity differs from its layout in this chunk is stored loose."""
        by_key: dict[tuple[int, int], list[int]] = {}
        for i, r in enumerate(rows):
            if r[0] in (K.CALL_BEGIN, K.CALL_END):
                by_key.setdefault((r[0], r[1]), []).append(i)
        for (kind, call_id), sel in by_key.items():
            spec = CALL_SPECS.get(self._call_names[call_id])
            is_end = kind == K.CALL_END
            order = (
                None if spec is None else (tuple(range(len(spec.result))) if is_end else spec.pack)
            )
            values = [tuple(int(v) for v in rows[i][5]) for i in sel]
            loose = order is None or any(len(v) != len(order) for v in values)
            for i, v in zip(sel, values, strict=True):
                row = rows[i]
                if loose or not all(_LO <= x <= _HI for x in v):
                    fits = all(_LO <= x <= _HI for x in v)
                    row[3], row[4] = (VERBATIM if fits else WIDE), len(v)
                    row[5] = v if fits else pack_wide(v)
                elif order:
                    packed = [v[j] for j in order]
                    row[3] = packed[0]
                    if len(order) > 1:
                        row[4] = packed[1]
                    rest = packed[2:]
                    while rest and rest[-1] == 0:
                        rest.pop()
                    row[5] = tuple(rest)

    # ------------------------------------------------------------------ output
    def lite_trace(self, initial: InitialState | None = None) -> LiteTrace:
        """Flush and return the trace recorded so far.

        Args:
            initial: The state before event 0 when not attached (hand-fed hooks).

        Raises:
            RuntimeError: If no initial state is known.
        """
        initial = initial or self.initial
        if initial is None:
            raise RuntimeError("no initial state: call attach(manager) or pass initial")
        self._flush()
        c = self.cols
        return LiteTrace(
            list(c["kind"]),
            list(c["depth"]),
            list(c["group"]),
            list(c["request"]),
            list(c["a"]),
            list(c["b"]),
            list(self.offsets),
            list(self.payload),
            list(self.step_seq),
            list(self.step_val),
            list(self.requests),
            list(self.hashes),
            list(self._call_names),
            initial,
            dict(self.config),
        )
