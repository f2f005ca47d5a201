"""ColumnStore: growth keeps rows, views never change, step runs merge."""

from __future__ import annotations

import numpy as np

from kvlab.trace.columns import COLUMN_DTYPES, Columns, ColumnStore


def _chunk(k: int, start: int) -> tuple[dict[str, np.ndarray], np.ndarray, np.ndarray]:
    cols = {name: np.arange(start, start + k) % 100 for name in COLUMN_DTYPES}
    lengths = np.arange(k) % 3
    payload = np.arange(int(lengths.sum())) + 1000 * start
    return cols, lengths, payload


def test_growth_keeps_rows_and_offsets() -> None:
    store = ColumnStore(capacity=2)
    for start in (0, 3, 8):
        store.append_chunk(*_chunk(5 if start else 3, start))
    cols = store.columns()
    assert len(cols) == 13
    assert cols.kind.tolist() == [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12]
    assert cols.offsets[0] == 0 and cols.offsets[-1] == len(cols.payload)
    assert np.all(np.diff(cols.offsets.astype(np.int64)) >= 0)
    # payload of row 4 (second chunk, its row 1): one int, the chunk's first payload int
    assert cols.payload[cols.offsets[4] : cols.offsets[5]].tolist() == [3000]


def test_views_are_read_only_and_stable_across_growth() -> None:
    store = ColumnStore(capacity=2)
    store.append_chunk(*_chunk(2, 0))
    view = store.columns()
    store.append_chunk(*_chunk(50, 2))  # forces reallocation
    assert len(view) == 2 and view.kind.tolist() == [0, 1]
    assert not view.a.flags.writeable


def test_step_runs_merge() -> None:
    store = ColumnStore()
    store.set_step(0, 0)
    store.set_step(3, 2)
    store.set_step(3, 0)  # changed back before any event: run dropped
    store.set_step(5, 4)
    store.set_step(7, 4)  # same step: no new run
    cols = store.columns()
    assert cols.step_seq.tolist() == [0, 5] and cols.step_val.tolist() == [0, 4]


def test_empty_columns_and_nbytes() -> None:
    empty = Columns.empty()
    assert len(empty) == 0 and empty.offsets.tolist() == [0]
    store = ColumnStore(capacity=4)
    store.append_chunk(*_chunk(4, 0))
    assert store.columns().nbytes < store.allocated_nbytes
    assert (
        sum(a.dtype.itemsize for a in store.columns().arrays().values() if a.ndim and len(a) == 4)
        == 16
    )
