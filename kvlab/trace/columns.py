"""Columnar event storage: the numpy columns of a trace and the growable store behind a recorder.

One row per event (see ``kvlab.trace.events`` for what each column means per kind)::

    kind u8 | depth u8 | group i16 | request i32 | a i32 | b i32 | offsets u32 (n + 1)
    payload int32 (flat; event i owns payload[offsets[i]:offsets[i + 1]])
    step runs: step_seq int64 / step_val int32 (step_val[j] holds from event step_seq[j] on)

That is 20 bytes per event plus its payload; ``seq``, ``step`` and ``parent`` are derived.
"""

from __future__ import annotations

from dataclasses import dataclass, fields

import numpy as np

__all__ = ["COLUMN_DTYPES", "ColumnStore", "Columns"]

COLUMN_DTYPES: dict[str, np.dtype] = {
    "kind": np.dtype(np.uint8),
    "depth": np.dtype(np.uint8),
    "group": np.dtype(np.int16),
    "request": np.dtype(np.int32),
    "a": np.dtype(np.int32),
    "b": np.dtype(np.int32),
}
"""Per-event columns and their dtypes (offsets, payload and step runs are separate)."""

OFFSET_DTYPE = np.dtype(np.uint32)
PAYLOAD_DTYPE = np.dtype(np.int32)


@dataclass
class Columns:
    """The arrays of a trace (read-only views or loaded arrays).

    Attributes:
        kind, depth, group, request, a, b: [num_events] per-event columns.
        offsets: uint32 [num_events + 1] payload offsets.
        payload: int32 [offsets[-1]] flat payload.
        step_seq: int64 [num_runs] first event of each step run (step_seq[0] == 0).
        step_val: int32 [num_runs] the step of that run.
    """

    kind: np.ndarray
    depth: np.ndarray
    group: np.ndarray
    request: np.ndarray
    a: np.ndarray
    b: np.ndarray
    offsets: np.ndarray
    payload: np.ndarray
    step_seq: np.ndarray
    step_val: np.ndarray

    def __len__(self) -> int:
        return len(self.kind)

    @property
    def nbytes(self) -> int:
        """Bytes held by all arrays."""
        return int(sum(getattr(self, f.name).nbytes for f in fields(self)))

    def arrays(self) -> dict[str, np.ndarray]:
        """All arrays by name."""
        return {f.name: getattr(self, f.name) for f in fields(self)}

    @classmethod
    def empty(cls) -> Columns:
        """A trace with no events (step 0 from event 0)."""
        cols = {name: np.zeros(0, dtype=dt) for name, dt in COLUMN_DTYPES.items()}
        return cls(
            **cols,
            offsets=np.zeros(1, dtype=OFFSET_DTYPE),
            payload=np.zeros(0, dtype=PAYLOAD_DTYPE),
            step_seq=np.zeros(1, dtype=np.int64),
            step_val=np.zeros(1, dtype=np.int32),
        )


class ColumnStore:
    """Growable columns (capacity grows 1.5x), appended to in chunks by the recorder.

    NOTE: views handed out by ``columns()`` cover rows [0, n); later chunks only write rows
    >= n (or into a new, larger buffer), so a view never changes under its reader.
    """

    def __init__(self, capacity: int = 1 << 14) -> None:
        self.n = 0
        self.p = 0
        self._cols = {name: np.zeros(capacity, dtype=dt) for name, dt in COLUMN_DTYPES.items()}
        self._offsets = np.zeros(capacity + 1, dtype=OFFSET_DTYPE)
        self._payload = np.zeros(capacity * 2, dtype=PAYLOAD_DTYPE)
        self.step_seq: list[int] = [0]
        self.step_val: list[int] = [0]

    def _grow_rows(self, need: int) -> None:
        cap = len(self._cols["kind"])
        if need <= cap:
            return
        new_cap = max(need, cap + cap // 2)  # NOTE: 1.5x keeps spare capacity small
        for name, arr in self._cols.items():
            grown = np.zeros(new_cap, dtype=arr.dtype)
            grown[: self.n] = arr[: self.n]
            self._cols[name] = grown
        offsets = np.zeros(new_cap + 1, dtype=OFFSET_DTYPE)
        offsets[: self.n + 1] = self._offsets[: self.n + 1]
        self._offsets = offsets

    def _grow_payload(self, need: int) -> None:
        if need <= len(self._payload):
            return
        if need > np.iinfo(OFFSET_DTYPE).max:
            raise OverflowError(f"trace payload would exceed {np.iinfo(OFFSET_DTYPE).max} ints")
        grown = np.zeros(max(need, len(self._payload) * 3 // 2), dtype=PAYLOAD_DTYPE)
        grown[: self.p] = self._payload[: self.p]
        self._payload = grown

    def append_chunk(
        self, cols: dict[str, np.ndarray], lengths: np.ndarray, payload: np.ndarray
    ) -> None:
        """Append ``len(lengths)`` rows.

        Args:
            cols: One array per COLUMN_DTYPES name, each [k] (cast to the column dtype).
            lengths: int64 [k] payload length of each row.
            payload: The rows' payloads concatenated, [lengths.sum()].
        """
        k = len(lengths)
        n, p = self.n, self.p
        self._grow_rows(n + k)
        self._grow_payload(p + len(payload))
        for name, arr in cols.items():
            self._cols[name][n : n + k] = arr
        ends = np.cumsum(lengths) + p
        self._offsets[n + 1 : n + k + 1] = ends
        self._payload[p : p + len(payload)] = payload
        self.n, self.p = n + k, p + len(payload)

    def set_step(self, seq: int, step: int) -> None:
        """From event ``seq`` on, events belong to ``step``."""
        if self.step_seq[-1] == seq:
            self.step_val[-1] = step
            if len(self.step_val) > 1 and self.step_val[-2] == step:
                self.step_seq.pop()
                self.step_val.pop()
        elif self.step_val[-1] != step:
            self.step_seq.append(seq)
            self.step_val.append(step)

    def columns(self) -> Columns:
        """Read-only views of rows [0, n) (no copy of the event columns)."""
        views = {name: _ro(arr[: self.n]) for name, arr in self._cols.items()}
        return Columns(
            **views,
            offsets=_ro(self._offsets[: self.n + 1]),
            payload=_ro(self._payload[: self.p]),
            step_seq=np.array(self.step_seq, dtype=np.int64),
            step_val=np.array(self.step_val, dtype=np.int32),
        )

    @property
    def allocated_nbytes(self) -> int:
        """Bytes allocated including spare capacity."""
        return int(
            sum(a.nbytes for a in self._cols.values()) + self._offsets.nbytes + self._payload.nbytes
        )


def _ro(arr: np.ndarray) -> np.ndarray:
    view = arr.view()
    view.flags.writeable = False
    return view
