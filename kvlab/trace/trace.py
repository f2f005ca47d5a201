"""Trace: a recorded run of a KV-cache manager, columnar, replayable and savable.

A Trace holds the event columns (``kvlab.trace.columns``), the intern tables, the state before
the first event, and metadata about the manager it was recorded from. Everything a viewer needs
is derived from those: ``trace[i]`` decodes one event, ``calls()`` the call spans, ``state_at(i)``
replays (with checkpoints, so scrubbing anywhere costs at most one checkpoint interval).

Examples:
    >>> from kvlab.trace import Recorder, KVState
    >>> rec = Recorder(initial_state=KVState.fresh(4))
    >>> rec.popleft_n([1, 2]); rec.get_new_blocks([1, 2])
    >>> t = rec.trace()
    >>> len(t), t[0].kind.name, t.state_at(1).free_queue_order()
    (2, 'POPLEFT_N', [3])
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable, Iterator
from os import PathLike
from typing import Any

import numpy as np

from kvlab.trace.columns import Columns
from kvlab.trace.events import KIND_SCHEMA, EventKind
from kvlab.trace.replay import ReplayError, apply_event, replay_into
from kvlab.trace.search import filter_events
from kvlab.trace.state import KVState
from kvlab.trace.tables import FrozenTables
from kvlab.trace.view import Call, Event, decode_call, decode_fields

__all__ = ["Trace"]

K = EventKind


def _is_int(value: Any) -> bool:
    """True for ints and numpy integers; False for bool, float, str, None."""
    return isinstance(value, (int, np.integer)) and not isinstance(value, bool)


class Trace:
    """An immutable recorded event sequence (build one with Recorder.trace() or load_trace()).

    Args:
        cols: The event columns.
        tables: Frozen intern tables (request ids, hashes).
        initial_state: The state before event 0 (copied; re-bound to ``tables``).
        config: Metadata: num_gpu_blocks, groups (spec, block_size, sliding_window, ...),
            enable_caching, use_eagle, hash_block_size, null_block_id.
        call_names: Call-name table; ``call_names[i]`` is call id i.
        checkpoint_interval: Events between replay checkpoints (raised so that at most
            ``max_checkpoints`` exist).
        max_checkpoints: Upper bound on stored checkpoints (memory).
    """

    def __init__(
        self,
        cols: Columns,
        tables: FrozenTables,
        initial_state: KVState,
        config: dict[str, Any] | None = None,
        call_names: list[str] | None = None,
        checkpoint_interval: int = 4096,
        max_checkpoints: int = 128,
    ) -> None:
        if not _is_int(checkpoint_interval) or checkpoint_interval < 1:
            raise ValueError(
                f"checkpoint_interval must be an int >= 1 (events), got {checkpoint_interval!r}"
            )
        self.cols = cols
        self.tables = tables
        self.config: dict[str, Any] = dict(config or {})
        self.call_names: list[str] = list(call_names or [])
        state = initial_state.copy()
        state.tables = tables
        state.num_free_blocks = None
        self.initial_state = state
        n = len(cols)
        self.checkpoint_interval = max(checkpoint_interval, -(-n // max(max_checkpoints, 1)))
        self._checkpoints: dict[int, KVState] = {0: state}
        self._checkpoint_keys: list[int] = [0]
        self._cursor: tuple[int, KVState] | None = None
        self._levels: tuple[list[np.ndarray], list[np.ndarray]] | None = None
        self._span_cache: tuple[np.ndarray, np.ndarray] | None = None

    # ------------------------------------------------------------------ sequence protocol
    def __len__(self) -> int:
        return len(self.cols)

    def __getitem__(self, index: int | slice) -> Event | list[Event]:
        if isinstance(index, slice):
            return [self.event(i) for i in range(*index.indices(len(self)))]
        return self.event(index)

    def __iter__(self) -> Iterator[Event]:
        for i in range(len(self)):
            yield self.event(i)

    def __repr__(self) -> str:
        return (
            f"Trace({len(self)} events, {len(self.tables.requests)} requests, "
            f"{self.tables.num_hashes} hashes, num_gpu_blocks={self.config.get('num_gpu_blocks')})"
        )

    def _index(self, i: int) -> int:
        n = len(self)
        if not _is_int(i):
            raise TypeError(f"event index must be an int in [-{n}, {n}), got {i!r}")
        j = i + n if i < 0 else i
        if not 0 <= j < n:
            raise IndexError(f"event index {i} out of range for a trace of {n} events")
        return int(j)

    def payload(self, i: int) -> list[int]:
        """The raw payload ints of event ``i``."""
        i = self._index(i)
        o = self.cols.offsets
        return self.cols.payload[int(o[i]) : int(o[i + 1])].tolist()

    def row(self, i: int) -> tuple[int, int, int, int, int, list[int]]:
        """Event ``i`` raw: ``(kind, group, request, a, b, payload)`` (``KVState.apply``'s args)."""
        i = self._index(i)
        c = self.cols
        return (
            int(c.kind[i]),
            int(c.group[i]),
            int(c.request[i]),
            int(c.a[i]),
            int(c.b[i]),
            self.payload(i),
        )

    def event(self, i: int) -> Event:
        """Event ``i`` decoded (negative indexes count from the end).

        Raises:
            TypeError: If ``i`` is not an int.
            IndexError: If ``i`` is out of range.
        """
        i = self._index(i)
        c = self.cols
        kind = EventKind(int(c.kind[i]))
        group, a, b = int(c.group[i]), int(c.a[i]), int(c.b[i])
        fields = decode_fields(kind, group, a, b, self.payload(i), self.tables, self.call_names)
        schema = KIND_SCHEMA[kind]
        return Event(
            seq=i,
            kind=kind,
            step=self.step_of(i),
            depth=int(c.depth[i]),
            parent=self.parent(i),
            group=group if schema.uses_group else None,
            request=self.tables.request_id(int(c.request[i])),
            fields=fields,
        )

    # ------------------------------------------------------------------ steps and nesting
    def step_of(self, i: int) -> int:
        """The scheduler step of event ``i``."""
        j = int(np.searchsorted(self.cols.step_seq, i, side="right")) - 1
        return int(self.cols.step_val[max(j, 0)])

    def steps(self) -> np.ndarray:
        """int32 [num_events]: the step of every event (computed on demand, not stored)."""
        bounds = np.append(self.cols.step_seq, len(self)).clip(0, len(self))
        return np.repeat(self.cols.step_val, np.diff(bounds))

    def _call_levels(self) -> tuple[list[np.ndarray], list[np.ndarray]]:
        if self._levels is None:
            c = self.cols
            begins = np.flatnonzero(c.kind == K.CALL_BEGIN)
            ends = np.flatnonzero(c.kind == K.CALL_END)
            top = int(c.depth.max()) + 1 if len(c.depth) else 0
            self._levels = (
                [begins[c.depth[begins] == d] for d in range(top)],
                [ends[c.depth[ends] == d] for d in range(top)],
            )
        return self._levels

    def parent(self, i: int) -> int:
        """seq of the CALL_BEGIN enclosing event ``i`` (for a CALL_END, its own), else -1."""
        i = self._index(i)
        kind, depth = int(self.cols.kind[i]), int(self.cols.depth[i])
        level = depth if kind == K.CALL_END else depth - 1
        begins = self._call_levels()[0]
        if level < 0 or level >= len(begins):
            return -1
        j = int(np.searchsorted(begins[level], i)) - 1
        return int(begins[level][j]) if j >= 0 else -1

    # ------------------------------------------------------------------ calls
    def _spans(self) -> tuple[np.ndarray, np.ndarray]:
        """(begins, ends) of every call, sorted by begin; end -1 for an unfinished call."""
        if self._span_cache is None:
            begins_by_level, ends_by_level = self._call_levels()
            all_b, all_e = [np.zeros(0, dtype=np.int64)], [np.zeros(0, dtype=np.int64)]
            for begins, ends in zip(begins_by_level, ends_by_level, strict=True):
                # NOTE: calls of one depth never overlap, so the k-th begin matches the k-th end.
                matched = np.full(len(begins), -1, dtype=np.int64)
                m = min(len(begins), len(ends))
                matched[:m] = np.where(ends[:m] > begins[:m], ends[:m], -1)
                all_b.append(begins.astype(np.int64))
                all_e.append(matched)
            begins, ends = np.concatenate(all_b), np.concatenate(all_e)
            order = np.argsort(begins, kind="stable")
            self._span_cache = (begins[order], ends[order])
        return self._span_cache

    def calls(self, name: str | None = None, request: str | None = None) -> list[Call]:
        """Every call (optionally only one name and/or request), in order of their CALL_BEGIN."""
        begins, ends = self._spans()
        sel = np.ones(len(begins), dtype=bool)
        if name is not None:
            ids = [i for i, n in enumerate(self.call_names) if n == name]
            sel &= np.isin(self.cols.group[begins], ids)
        if request is not None:
            idx = self.tables.find_request(request)
            sel &= (self.cols.request[begins] == idx) if idx >= 0 else False
        return [self._make_call(b, e) for b, e in zip(begins[sel].tolist(), ends[sel].tolist())]

    def _make_call(self, begin: int, end: int) -> Call:
        c = self.cols
        name = self._call_name(int(c.group[begin]))
        args = decode_call(name, int(c.a[begin]), int(c.b[begin]), self.payload(begin), False)
        result = (
            {}
            if end < 0
            else decode_call(name, int(c.a[end]), int(c.b[end]), self.payload(end), True)
        )
        return Call(
            begin=begin,
            end=end,
            name=name,
            request=self.tables.request_id(int(c.request[begin])),
            args=args,
            result=result,
            depth=int(c.depth[begin]),
            parent=self.parent(begin),
            step=self.step_of(begin),
        )

    def _call_name(self, call_id: int) -> str:
        return (
            self.call_names[call_id] if 0 <= call_id < len(self.call_names) else f"call#{call_id}"
        )

    def call(self, begin: int) -> Call:
        """The call whose CALL_BEGIN is ``begin``, or the innermost call containing event ``begin``.

        Raises:
            ValueError: If the event is outside every call.
        """
        i = self._index(begin)
        if self.cols.kind[i] != K.CALL_BEGIN:
            i = self.parent(i)
            if i < 0:
                raise ValueError(f"event {begin} is not inside any call")
        begins, ends = self._spans()
        k = int(np.searchsorted(begins, i))
        return self._make_call(i, int(ends[k]))

    def call_tree(self) -> list[Call]:
        """Top-level calls, each with ``children`` filled recursively."""
        calls = self.calls()
        by_begin = {c.begin: c for c in calls}
        roots = []
        for c in calls:
            (by_begin[c.parent].children if c.parent in by_begin else roots).append(c)
        return roots

    # ------------------------------------------------------------------ search
    def filter(
        self, kind: EventKind | Iterable[EventKind] | None = None, **criteria: Any
    ) -> np.ndarray:
        """Indexes of matching events; see ``kvlab.trace.search.filter_events`` for criteria."""
        return filter_events(self, kind, **criteria)

    def find(
        self, kind: EventKind | Iterable[EventKind], start: int = 0, **criteria: Any
    ) -> int | None:
        """Index of the first event at or after ``start`` of ``kind`` (and criteria), or None."""
        found = filter_events(self, kind, start=start, **criteria)
        return int(found[0]) if len(found) else None

    def find_prev(
        self, kind: EventKind | Iterable[EventKind], before: int, **criteria: Any
    ) -> int | None:
        """Index of the last event before ``before`` of ``kind`` (and criteria), or None."""
        found = filter_events(self, kind, stop=before, **criteria)
        return int(found[-1]) if len(found) else None

    # ------------------------------------------------------------------ replay
    def state_at(self, i: int) -> KVState:
        """The state right after event ``i`` (``i = -1``: the initial state).

        Uses the nearest checkpoint at or before ``i`` (created on the way), or continues from
        the last state asked for, so stepping forward is O(1) per event.

        Raises:
            TypeError: If ``i`` is not an int.
            IndexError: If ``i`` is not in [-1, len(self)).
            ReplayError: If the trace does not replay (damaged).
        """
        if not _is_int(i):
            raise TypeError(f"state_at needs an int event index in [-1, {len(self)}), got {i!r}")
        if not -1 <= i < len(self):
            raise IndexError(f"state_at({i}): need -1 <= i < {len(self)}")
        return self._state_after(int(i) + 1).copy()

    def final_state(self) -> KVState:
        """The state after the last event."""
        return self.state_at(len(self) - 1)

    def _state_after(self, pos: int) -> KVState:
        keys, step = self._checkpoint_keys, self.checkpoint_interval
        base = keys[bisect.bisect_right(keys, pos) - 1]
        cursor = self._cursor
        if cursor is not None and base <= cursor[0] <= pos:
            at, state = cursor
        else:
            at, state = base, self._checkpoints[base].copy()
        self._cursor = None  # NOTE: the state is mutated below; drop it if replay fails
        nxt = (at // step + 1) * step
        while nxt <= pos:
            replay_into(state, self.cols, at, nxt)
            at = nxt
            if at not in self._checkpoints:
                self._checkpoints[at] = state.copy()
                bisect.insort(keys, at)
            nxt += step
        replay_into(state, self.cols, at, pos)
        self._cursor = (pos, state)
        return state

    def check_replay(self, check: Any = None) -> KVState:
        """Replay every event with precondition checks (slow); return the final state.

        Args:
            check: Optional ``callable(state, i)`` run after each event (e.g. invariants).

        Raises:
            ReplayError: At the first event that does not fit, naming its index.
        """
        state = self.initial_state.copy()
        for i in range(len(self)):
            try:
                apply_event(state, *self.row(i))
            except ReplayError as exc:
                raise ReplayError(f"event #{i}: {exc}") from exc
            if check is not None:
                check(state, i)
        return state

    def in_transit(self, i: int) -> set[int]:
        """Blocks mid-way through one BlockPool operation right after event ``i``.

        vLLM's loops leave a block briefly neither queued nor referenced: get_new_blocks
        unlinks its blocks (POPLEFT_N) and then counts them one by one (GET_NEW_BLOCKS, with
        evictions between); touch unlinks each free hit (REMOVE) just before counting it
        (TOUCH); free_blocks lowers every ref_cnt (FREE_BLOCKS) before linking them
        (APPEND_N). ``check_invariants`` accepts the blocks returned here.
        """
        out: set[int] = set()
        counted: set[int] = set()
        j = self._index(i)
        while j >= 0:
            kind = int(self.cols.kind[j])
            if kind in (K.GET_NEW_BLOCKS, K.TOUCH):
                counted.update(self.payload(j))
            elif kind in (K.POPLEFT, K.REMOVE):
                block_id = int(self.cols.a[j])
                if block_id not in counted:
                    out.add(block_id)
            elif kind == K.POPLEFT_N:
                out.update(b for b in self.payload(j) if b not in counted)
                break
            elif kind == K.FREE_BLOCKS:
                out.update(self.payload(j))
                break
            elif kind != K.BLOCK_REMOVED:
                break
            j -= 1
        return out

    # ------------------------------------------------------------------ size and files
    def nbytes(self) -> dict[str, int]:
        """Bytes held: event columns, payload, tables, and the total (excludes checkpoints)."""
        cols = self.cols.nbytes
        payload = self.cols.payload.nbytes
        tables = self.tables.nbytes
        return {
            "columns": cols - payload,
            "payload": payload,
            "tables": tables,
            "total": cols + tables,
        }

    @property
    def bytes_per_event(self) -> float:
        """In-memory bytes per stored event (columns + payload + tables)."""
        return self.nbytes()["total"] / max(len(self), 1)

    def save(self, path: str | PathLike[str]) -> int:
        """Write the trace to ``path`` (format: kvlab.trace.fileformat); return bytes written."""
        from kvlab.trace.fileformat import save_trace

        return save_trace(self, path)
