"""Hypothesis state machine: BlockTable row edits vs a plain list-of-lists model.

The model keeps the full table (stale tails included) with vLLM's semantics spelled out in
Python: append writes at the row's count, add resets the count first, clear zeroes the used
prefix, move copies the used prefix, swap exchanges whole rows. Bad edits must raise and leave
the table unchanged. Slot mapping is checked against ``row[pos // bs] * bs + pos % bs``.
"""

from __future__ import annotations

import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule

from kvlab.worker import BlockTable, MultiGroupBlockTable

MAX_REQS = 4
MAX_BLOCKS = 3  # allocator blocks per row
RATIOS = (1, 2, 4)  # block_size // kernel_block_size
BLOCK_SIZE = 8

rows_st = st.integers(-1, MAX_REQS)  # includes out-of-range rows
ids_st = st.lists(st.integers(-1, 300), max_size=MAX_BLOCKS + 1)


class BlockTableMachine(RuleBasedStateMachine):
    @initialize(ratio=st.sampled_from(RATIOS))
    def setup(self, ratio):
        self.ratio = ratio
        self.kernel_block_size = BLOCK_SIZE // ratio
        self.cap = MAX_BLOCKS * ratio
        self.bt = BlockTable(
            BLOCK_SIZE, MAX_REQS, MAX_BLOCKS, 64, kernel_block_size=self.kernel_block_size
        )
        self.table = [[0] * self.cap for _ in range(MAX_REQS)]
        self.counts = [0] * MAX_REQS

    def _kernel_ids(self, ids):
        return [b * self.ratio + k for b in ids for k in range(self.ratio)]

    def _valid(self, *rows):
        return all(0 <= r < MAX_REQS for r in rows)

    def _expect_error(self, fn, *args):
        with pytest.raises((ValueError, TypeError)):
            fn(*args)

    @rule(ids=ids_st, row=rows_st, replace=st.booleans())
    def append_or_add(self, ids, row, replace):
        start = 0 if replace else (self.counts[row] if self._valid(row) else 0)
        ok = (
            self._valid(row)
            and all(b >= 0 for b in ids)
            and start + len(ids) * self.ratio <= self.cap
        )
        fn = self.bt.add_row if replace else self.bt.append_row
        if not ok:
            self._expect_error(fn, ids, row)
            return
        fn(ids, row)
        kernel = self._kernel_ids(ids)
        self.table[row][start : start + len(kernel)] = kernel
        self.counts[row] = start + len(kernel)

    @rule(row=rows_st)
    def clear_row(self, row):
        if not self._valid(row):
            self._expect_error(self.bt.clear_row, row)
            return
        self.bt.clear_row(row)
        self.table[row][: self.counts[row]] = [0] * self.counts[row]
        self.counts[row] = 0

    @rule(src=rows_st, tgt=rows_st)
    def move_row(self, src, tgt):
        if not self._valid(src, tgt):
            self._expect_error(self.bt.move_row, src, tgt)
            return
        self.bt.move_row(src, tgt)
        n = self.counts[src]
        self.table[tgt][:n] = self.table[src][:n]
        self.counts[tgt] = n

    @rule(src=rows_st, tgt=rows_st)
    def swap_row(self, src, tgt):
        if not self._valid(src, tgt):
            self._expect_error(self.bt.swap_row, src, tgt)
            return
        self.bt.swap_row(src, tgt)
        self.table[src], self.table[tgt] = self.table[tgt], self.table[src]
        self.counts[src], self.counts[tgt] = self.counts[tgt], self.counts[src]

    @rule(data=st.data())
    def slot_mapping(self, data):
        filled = [r for r in range(MAX_REQS) if self.counts[r]]
        if not filled:
            return
        tokens = data.draw(
            st.lists(
                st.sampled_from(filled).flatmap(
                    lambda r: st.tuples(
                        st.just(r), st.integers(0, self.counts[r] * self.kernel_block_size - 1)
                    )
                ),
                max_size=12,
            )
        )
        kbs = self.kernel_block_size
        got = self.bt.compute_slot_mapping([t[0] for t in tokens], [t[1] for t in tokens])
        assert got.tolist() == [self.table[r][p // kbs] * kbs + p % kbs for r, p in tokens]

    @invariant()
    def matches_model(self):
        if not hasattr(self, "bt"):
            return
        assert self.bt.block_table.np.tolist() == self.table
        assert self.bt.num_blocks_per_row.tolist() == self.counts


TestBlockTableMachine = BlockTableMachine.TestCase
TestBlockTableMachine.settings = settings(max_examples=60, stateful_step_count=25, deadline=None)


class MultiGroupMachine(RuleBasedStateMachine):
    """Two groups (8-token blocks and 16-token blocks read as 8-token kernel blocks)."""

    def __init__(self):
        super().__init__()
        self.mg = MultiGroupBlockTable(MAX_REQS, 64, 64, False, None, [8, 16], [8, 8], [3, 3])
        self.rows = [[[] for _ in range(MAX_REQS)] for _ in range(2)]

    @rule(ids0=ids_st, ids1=ids_st, row=rows_st, replace=st.booleans())
    def append_or_add(self, ids0, ids1, row, replace):
        fn = self.mg.add_row if replace else self.mg.append_row
        valid = 0 <= row < MAX_REQS
        caps = [self.mg[0].max_num_blocks_per_req, self.mg[1].max_num_blocks_per_req]
        new = [list(ids0), [k for b in ids1 for k in (2 * b, 2 * b + 1)]]
        ok = (
            valid
            and all(b >= 0 for b in ids0 + ids1)
            and all(
                (0 if replace else len(self.rows[g][row])) + len(new[g]) <= caps[g]
                for g in range(2)
            )
        )
        if not ok:
            with pytest.raises((ValueError, TypeError)):
                fn((ids0, ids1), row)
            return
        fn((ids0, ids1), row)
        for g in range(2):
            self.rows[g][row] = new[g] if replace else self.rows[g][row] + new[g]

    @rule(src=st.integers(0, MAX_REQS - 1), tgt=st.integers(0, MAX_REQS - 1))
    def swap_row(self, src, tgt):
        self.mg.swap_row(src, tgt)
        for g in range(2):
            self.rows[g][src], self.rows[g][tgt] = self.rows[g][tgt], self.rows[g][src]

    @invariant()
    def matches_model(self):
        for g in range(2):
            assert [self.mg[g].get_row(r) for r in range(MAX_REQS)] == self.rows[g]


TestMultiGroupMachine = MultiGroupMachine.TestCase
TestMultiGroupMachine.settings = settings(max_examples=40, stateful_step_count=20, deadline=None)
