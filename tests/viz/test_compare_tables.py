"""Comparison tables: one column per cache, the best value of a row marked."""

from __future__ import annotations

import pytest

from kvlab.compare import Workload, WorkloadRequest, compare
from kvlab.viz.compare_tables import render_comparison_table, render_request_table
from kvlab.viz.terminal import to_text

PREEMPT = Workload("p", [WorkloadRequest("r0", (1, 2, 3, 4), 3, 0, (10, 11, 12)),
                         WorkloadRequest("r1", (5, 6, 7, 8), 3, 0, (20, 21, 22))])  # fmt: skip


def _row(text: str, label: str) -> list[str]:
    line = next(ln for ln in text.splitlines() if label in ln)
    return [c.strip() for c in line.split("│")[2:-1]]


def test_comparison_table_rows() -> None:
    c = compare(PREEMPT, pool_tokens=8, block_size=2)
    text = to_text(render_comparison_table(c), width=120)
    assert "vllm" in text and "nano-vllm" in text and "radix" in text
    assert _row(text, "evicted (tokens)") == ["6", "6", "10"]
    assert _row(text, "recomputed after preemption") == ["2", "2", "4"]
    assert _row(text, "hit on re-admission") == ["2", "2", "0"]
    assert _row(text, "hit rate") == ["0.0%", "0.0%", "0.0%"]
    assert "2 requests, 8 prompt tokens · pool 8 tokens" in " ".join(text.split())


def test_best_value_is_highlighted() -> None:
    c = compare(PREEMPT, pool_tokens=8, block_size=2)
    table = render_comparison_table(c)
    evicted = [col._cells[2] for col in table.columns[1:]]  # row 2: evicted (tokens)
    assert [cell.style for cell in evicted] == ["bold #16a34a", "bold #16a34a", ""]


def test_request_table() -> None:
    c = compare(PREEMPT, pool_tokens=8, block_size=2)
    text = to_text(render_request_table(c), width=120)
    assert _row(text, "r1") == ["4", "0 / 1p", "0 / 1p", "0 / 1p"]
    cut = render_request_table(c, max_rows=1)
    assert cut.caption == "1 more requests not shown"
    with pytest.raises(ValueError):
        render_request_table(c, max_rows=0)
