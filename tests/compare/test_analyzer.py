"""Analyzer summaries and series, and the SVG line plot."""

from __future__ import annotations

import xml.etree.ElementTree as ET

import numpy as np
import pytest

from kvlab.compare.analyzer import SERIES, compare, series, summarize
from kvlab.compare.svg_plot import line_plot_svg, nice_ticks
from kvlab.compare.workloads import Workload, WorkloadRequest

SVG = "{http://www.w3.org/2000/svg}"

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


def test_to_svg_plots_one_line_per_policy(tmp_path) -> None:
    c = compare(PREEMPT, pool_tokens=8, block_size=2)
    path = tmp_path / "used.svg"
    svg = c.to_svg("num_used_tokens", path=str(path))
    assert path.read_text() == svg
    root = ET.fromstring(svg)
    lines = root.findall(f"{SVG}polyline")
    assert [ln.find(f"{SVG}title").text for ln in lines] == ["vllm", "nano-vllm", "radix"]
    points = [[tuple(map(float, p.split(","))) for p in ln.get("points").split()] for ln in lines]
    assert [len(p) for p in points] == [5, 5, 5]
    # y = 8 is the top tick: the first point of every line is on the plot's top edge (y=32)
    assert {p[0][1] for p in points} == {32.0}


def test_nice_ticks_and_plot_errors() -> None:
    assert nice_ticks(8) == [0, 2, 4, 6, 8]
    assert nice_ticks(9) == [0, 2, 4, 6, 8, 10]
    assert nice_ticks(0) == [0.0, 1.0]
    assert nice_ticks(1234)[-1] >= 1234
    with pytest.raises(ValueError):
        nice_ticks(-1)
    with pytest.raises(ValueError, match="non-empty"):
        line_plot_svg({})
    with pytest.raises(ValueError, match="finite"):
        line_plot_svg({"a": [1, float("nan")]})
    svg = line_plot_svg({"a<b": np.array([3, 1]).tolist()}, title="x & y")
    assert "a&lt;b" in svg and "x &amp; y" in svg
    ET.fromstring(svg)
