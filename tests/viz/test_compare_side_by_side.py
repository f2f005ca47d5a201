"""Two caches at the same driver step, side by side."""

from __future__ import annotations

import pytest

from kvlab.compare import Workload, WorkloadRequest, compare
from kvlab.viz.compare_side_by_side import event_index_at_step, render_side_by_side
from kvlab.viz.terminal import to_text

PREEMPT = Workload("p", [WorkloadRequest("r0", (1, 2, 3, 4), 3, 0, (10, 11, 12)),
                         WorkloadRequest("r1", (5, 6, 7, 8), 3, 0, (20, 21, 22))])  # fmt: skip


def test_two_caches_at_step_1() -> None:
    c = compare(PREEMPT, pool_tokens=8, block_size=2, record=True)
    text = to_text(render_side_by_side(c, 1, policies=["vllm", "radix"]), width=200)
    assert "vllm · step 1" in text and "radix · step 1" in text and "nano-vllm" not in text
    # after step 1: vLLM holds r0's 3 blocks, block 3 (r1's [5 6]) is cached and free;
    # the radix tree lost r1's prompt and holds r0's (locked).
    assert "5 blocks: 1 null, 3 in_use, 1 evictable" in text
    assert "radix tree · 1 nodes · 4 tokens (evictable 0, protected 4)" in text
    assert "used 6 · cached 6 · running 1 · waiting 1" in text
    assert "used 5 · cached 4 · running 1 · waiting 1" in text


def test_step_index_and_errors() -> None:
    c = compare(PREEMPT, pool_tokens=8, block_size=2, record=True)
    trace = c.runs["nano-vllm"].trace
    i = event_index_at_step(trace, 0)
    assert trace.step_of(i) == 0 and trace.step_of(i + 1) == 1
    rec = c.runs["radix"].trace
    j = event_index_at_step(rec, 2)
    assert rec.events[j].step == 2 and rec.events[j + 1].step == 3
    with pytest.raises(KeyError, match="were not run"):
        render_side_by_side(c, 0, policies=["lru"])
    plain = compare(PREEMPT, pool_tokens=8, block_size=2)
    with pytest.raises(TypeError, match="record=True"):
        render_side_by_side(plain, 0)
