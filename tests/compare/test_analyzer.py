"""Analyzer summaries and series (the plots: test_plot.py)."""

from __future__ import annotations

import pytest

from kvlab.compare.analyzer import SERIES, compare, series, summarize
from kvlab.compare.workloads import Workload, WorkloadRequest

PREEMPT = Workload("p", [WorkloadRequest("r0", (1, 2, 3, 4), 3, 0, (10, 11, 12)),
                         WorkloadRequest("r1", (5, 6, 7, 8), 3, 0, (20, 21, 22))])  # fmt: skip


def test_summaries_of_the_preemption_scenario() -> None:
    c = compare(PREEMPT, pool_tokens=8, block_size=2)
    got = {s.policy: s for s in c.summaries()}
    v, r = got["vllm"], got["radix"]
    # hand-checked in test_driver.test_preemption_by_recompute
    assert (v.evicted_tokens, v.recomputed_tokens, v.num_preemptions, v.readmit_hit_tokens) == (
        6, 2, 1, 2)  # fmt: skip
    assert (r.evicted_tokens, r.recomputed_tokens, r.readmit_hit_tokens) == (10, 4, 0)
    assert v.prompt_tokens == 8 and v.hit_tokens == 0 and v.hit_rate == 0.0
    assert v.num_steps == 5 and v.num_finished == 2 and v.num_rejected == 0
    assert v.peak_used_tokens == 8 and v.peak_cached_tokens == 8
    assert v.computed_tokens == 6 + 8 and r.computed_tokens == 6 + 10
    assert got["nano-vllm"].as_dict()["evicted_tokens"] == 6
    assert summarize(c.runs["vllm"]) == v


def test_series_and_request_rows() -> None:
    c = compare(PREEMPT, pool_tokens=8, block_size=2)
    used = c.series("num_used_tokens")
    assert used["vllm"].tolist() == [8, 6, 0, 6, 0] and used["radix"].tolist() == [8, 5, 0, 5, 0]
    assert series(c.runs["vllm"], "hit_tokens", cumulative=True).tolist() == [0, 0, 0, 2, 2]
    assert set(SERIES) >= {"num_used_tokens", "evicted_tokens", "hit_tokens"}
    with pytest.raises(KeyError, match="unknown series"):
        c.series("nope")
    rows = c.request_rows()
    assert rows[1]["request_id"] == "r1" and rows[1]["radix.recomputed_tokens"] == 4
    assert rows[1]["vllm.num_preemptions"] == 1 and rows[0]["vllm.finish_step"] == 2
    with pytest.raises(KeyError, match="was not run"):
        c.summary("lru")
