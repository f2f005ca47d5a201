"""cli_compare: the `kvlab compare` report, its files, and workload loading."""

from __future__ import annotations

import json

import pytest

from kvlab.compare import compare, load_workload, to_jsonl
from kvlab.compare.cli import PLOTTED_SERIES, cli_compare
from kvlab.viz.terminal import to_text


def test_report_matches_the_analyzer(tmp_path) -> None:
    out = cli_compare(
        "system-prompt",
        pool_tokens=512,
        block_size=8,
        num_requests=6,
        per_request=True,
        svg_dir=tmp_path / "svg",
        json_path=tmp_path / "s.json",
    )
    text = to_text(out, width=140)
    expected = compare(load_workload("system-prompt", 6), 512, 8)
    hits = [f"{s.hit_tokens:,}" for s in expected.summaries()]
    line = next(ln for ln in text.splitlines() if "prefix-cache hit (tokens)" in ln)
    assert [c.strip() for c in line.split("│")[2:-1]] == hits
    assert "per request" in text and "sys-5" in text
    svgs = sorted(p.name for p in (tmp_path / "svg").iterdir())
    assert len(svgs) == len(PLOTTED_SERIES) and "cumulative_hit_tokens.svg" in svgs
    data = json.loads((tmp_path / "s.json").read_text())
    assert [s["hit_tokens"] for s in data["summaries"]] == [
        s.hit_tokens for s in expected.summaries()
    ]
    assert len(data["requests"]) == 6
    assert f"wrote {tmp_path / 's.json'}" in text


def test_workloads_by_name_and_by_file(tmp_path) -> None:
    assert len(load_workload("multi-turn", num_requests=2).requests) == 2 * 4
    assert load_workload("rag", seed=1).requests != load_workload("rag", seed=2).requests
    path = tmp_path / "w.jsonl"
    to_jsonl(load_workload("few-shot", num_requests=3), path)
    assert [r.request_id for r in load_workload(str(path)).requests] == [
        "shot-0",
        "shot-1",
        "shot-2",
    ]
    with pytest.raises(ValueError, match="unknown workload 'nope'"):
        load_workload("nope")
    with pytest.raises(ValueError, match="unknown cache policy"):
        cli_compare("rag", pool_tokens=512, policies=["vllm", "lru"])
