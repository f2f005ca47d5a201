"""Recorder: the KVRecorder implementation that turns core's hook calls into a Trace.

Every hook does one ``list.append`` of a small tuple ``(kind, group, request, a, b, payload)``;
nothing else happens on the hot path. Every ``chunk_size`` events (checked at call brackets
and step marks only) the buffer is columnarised in one go: request ids and hashes are interned
into tables, call args packed, nesting depth derived, and the rows appended to numpy columns
(``kvlab.trace.columns``). ``trace()`` flushes and returns a Trace over views of the columns.

Examples:
    >>> from kvlab.trace.state import KVState
    >>> rec = Recorder(initial_state=KVState.fresh(8))
    >>> rec.begin_call("free", "r0", ()); rec.free_blocks([3]); rec.end_call("free", ())
    >>> [e.kind.name for e in rec.trace()]
    ['CALL_BEGIN', 'FREE_BLOCKS', 'CALL_END']
"""

from __future__ import annotations

from typing import Any

from kvlab.trace.chunking import columnarise
from kvlab.trace.columns import ColumnStore
from kvlab.trace.hooks import _BEGIN, _EMPTY, _END, HookBuffer
from kvlab.trace.hooks import is_int as _is_int
from kvlab.trace.metadata import manager_config
from kvlab.trace.state import KVState
from kvlab.trace.tables import InternTables
from kvlab.trace.trace import Trace

__all__ = ["Recorder"]


class Recorder(HookBuffer):
    """Records every hook of ``kvlab.core.recorder.KVRecorder`` as an event.

    Args:
        initial_state: The state before the first event (``attach`` sets it from the manager;
            hand-built streams pass ``KVState.fresh(n)``).
        config: Trace metadata (``attach`` fills it from the manager).
        chunk_size: Events buffered before columnarising (events).
        checkpoint_interval: Passed to every Trace (events between replay checkpoints).

    Attributes:
        step: The scheduler step stamped on events from now on (settable; see mark_step).
        manager: The attached KVCacheManager, or None.
        rejected: One message per call whose args/result held a non-integer and were left
            out of the trace (the call itself and every state event are still recorded).
            Integers of any size are stored losslessly (``kvlab.trace.events.pack_wide``).
    """

    def __init__(
        self,
        initial_state: KVState | None = None,
        config: dict[str, Any] | None = None,
        chunk_size: int = 8192,
        checkpoint_interval: int = 4096,
    ) -> None:
        sizes = (("chunk_size", chunk_size), ("checkpoint_interval", checkpoint_interval))
        for name, value in sizes:
            if isinstance(value, bool) or not _is_int(value) or value < 1:
                raise ValueError(f"{name} must be an int >= 1 (events), got {value!r}")
        super().__init__()
        self._chunk_size = chunk_size
        self._checkpoint_interval = checkpoint_interval
        self._store = ColumnStore()
        self._tables = InternTables()
        self._depth = 0
        self._error: BaseException | None = None
        self.rejected: list[str] = []
        self.manager: Any = None
        self.config: dict[str, Any] = dict(config or {})
        self.initial_state = initial_state
        if initial_state is not None:
            self._adopt_state(initial_state)

    # ------------------------------------------------------------------ lifecycle
    def attach(self, kv_cache_manager: Any) -> Recorder:
        """Snapshot the manager as the trace's initial state, then start recording it.

        Args:
            kv_cache_manager: A ``kvlab.core.kv_cache_manager.KVCacheManager``.

        Returns:
            self.

        Raises:
            RuntimeError: If this recorder already recorded events or is attached, or the
                manager already has a recorder.
            TypeError: If the object has no ``set_recorder``.
        """
        if self.manager is not None or len(self) > 0:
            raise RuntimeError(
                "attach() needs a fresh Recorder (this one is attached or has events)"
            )
        if not hasattr(kv_cache_manager, "set_recorder"):
            raise TypeError(f"{type(kv_cache_manager).__name__} has no set_recorder()")
        if getattr(kv_cache_manager, "recorder", None) is not None:
            raise RuntimeError("the manager already has a recorder; detach it first")
        self.initial_state = KVState.from_manager(kv_cache_manager, self._tables)
        self.initial_state.num_free_blocks = None
        self.config = {**manager_config(kv_cache_manager), **self.config}
        coordinator = getattr(kv_cache_manager, "coordinator", None)  # None for a bare BlockPool
        for group, mgr in enumerate(getattr(coordinator, "single_type_managers", ())):
            self._req_keys.update((r, group) for r in mgr.req_to_blocks)
        kv_cache_manager.set_recorder(self)
        self.manager = kv_cache_manager
        return self

    def detach(self) -> None:
        """Stop recording (``set_recorder(None)`` on the manager); events stay available."""
        if self.manager is not None:
            self.manager.set_recorder(None)
            self.manager = None

    def _adopt_state(self, state: KVState) -> None:
        if isinstance(state.tables, InternTables):
            self._tables = state.tables
        else:
            raise TypeError("initial_state must use InternTables (KVState.fresh or from_manager)")
        self.config.setdefault("num_gpu_blocks", state.num_blocks)
        self.config.setdefault("num_groups", state.num_groups)
        self.config.setdefault("null_block_id", state.null_block_id)

    def __len__(self) -> int:
        """Events recorded so far."""
        return self._store.n + len(self._buf)

    # ------------------------------------------------------------------ HookBuffer hooks
    def _on_step(self, step: int) -> None:
        self._store.set_step(len(self), step)

    # ------------------------------------------------------------------ columnarisation
    def _maybe_flush(self) -> None:
        # NOTE: hooks must never raise into core: a failure is kept and raised by trace().
        if len(self._buf) < self._chunk_size or self._error is not None:
            return
        try:
            self._flush()
        except Exception as exc:  # noqa: BLE001 - deferred to trace()
            self._error = exc

    def _flush(self) -> None:
        if not self._buf:
            return
        args = (self._buf, self._side, self._tables, self._call_names, self._depth)
        try:
            chunk = columnarise(*args)
        except (TypeError, ValueError, OverflowError):
            # NOTE: columnarise left buf and side untouched; drop the call args it could not
            # store (non-integers) and retry. Ints of any size never fail (stored WIDE).
            if not self._reject_bad_call_values():
                raise
            chunk = columnarise(*args)
        self._store.append_chunk(chunk.cols, chunk.lengths, chunk.payload)
        self._depth = chunk.depth_after
        self._buf.clear()
        self._side.clear()

    def _reject_bad_call_values(self) -> bool:
        """Empty the args/result of CALL rows holding a non-integer; True if any was found."""
        found = False
        for i, row in enumerate(self._buf):
            if row[0] not in (_BEGIN, _END) or all(map(_is_int, row[5])):
                continue
            kind, call_id = row[0], row[1]
            name = self._call_names[call_id] if 0 <= call_id < len(self._call_names) else call_id
            what = "args" if kind == _BEGIN else "result"
            self.rejected.append(
                f"event #{self._store.n + i}: {name} {what} {tuple(row[5])!r} not recorded "
                "(allowed: integers)"
            )
            self._buf[i] = (kind, call_id, row[2], 0, 0, _EMPTY)
            found = True
        return found

    # ------------------------------------------------------------------ output
    def trace(self) -> Trace:
        """Flush and return the trace recorded so far (shares the column buffers).

        Raises:
            RuntimeError: If no initial state is known (neither attach() nor initial_state).
            OverflowError: If a state event held a value that does not fit its column (core
                never reports one; call args of any size are stored, see ``rejected``).
        """
        if self.initial_state is None:
            raise RuntimeError("no initial state: call attach(manager) or pass initial_state")
        if self._error is not None:
            raise self._error
        self._flush()
        call_names = list(self._call_names)
        return Trace(
            self._store.columns(),
            self._tables.freeze(),
            self.initial_state,
            config=dict(self.config),
            call_names=call_names,
            checkpoint_interval=self._checkpoint_interval,
        )

    @property
    def allocated_nbytes(self) -> int:
        """Bytes the recorder's column buffers hold, spare capacity included."""
        return self._store.allocated_nbytes
