"""The `kvlab` command: help, trace show/info on a saved trace, clear errors, and the demo."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from kvlab.cli import main
from kvlab.core import (FullAttentionSpec, KVCacheConfig, KVCacheGroupSpec, KVCacheManager, Request,
                        SamplingParams, get_request_block_hasher, init_none_hash, sha256)
from kvlab.trace import EventKind, KVState, Recorder, load_trace


@pytest.fixture()
def saved_trace(tmp_path: Path) -> Path:
    """Two requests sharing a 2-block prefix on a 6-block pool, both freed: hits and LRU order."""
    init_none_hash(sha256)
    spec = FullAttentionSpec(block_size=4, num_kv_heads=1, head_size=1, dtype="float32")
    mgr = KVCacheManager(KVCacheConfig(num_blocks=6, kv_cache_tensors=[],
                                       kv_cache_groups=[KVCacheGroupSpec(["l0"], spec)]),
                         max_model_len=64, hash_block_size=4)
    rec = Recorder().attach(mgr)
    hasher = get_request_block_hasher(4, sha256)
    reqs = [Request(f"r{i}", list(range(8)) + [20 + i] * 3, SamplingParams(max_tokens=2), None,
                    block_hasher=hasher) for i in range(2)]
    for step, req in enumerate(reqs):
        rec.mark_step(step)
        blocks, hit = mgr.get_computed_blocks(req)
        mgr.allocate_slots(req, req.num_tokens - hit, hit, blocks)
    for req in reqs:
        mgr.free(req)
    path = tmp_path / "two.kvtrace"
    rec.trace().save(path)
    return path


def test_help_lists_the_commands() -> None:
    out = CliRunner().invoke(main, ["--help"])
    assert out.exit_code == 0
    for cmd in ("demo", "generate", "trace"):
        assert cmd in out.output


def test_trace_show_queue_matches_replay(saved_trace: Path) -> None:
    trace = load_trace(saved_trace)
    out = CliRunner().invoke(main, ["trace", "show", str(saved_trace), "--view", "queue"],
                             terminal_width=200)
    assert out.exit_code == 0, out.output
    order = trace.final_state().free_queue_order()
    drawn = [int(tok.rstrip("•")) for tok in out.output.split("HEAD", 1)[1].split("TAIL")[0].split()
             if tok.rstrip("•").isdigit()]
    assert drawn == order


def test_trace_show_every_view_and_info(saved_trace: Path) -> None:
    runner = CliRunner()
    for view in ("all", "pool", "table", "hashes", "events", "calls"):
        out = runner.invoke(main, ["trace", "show", str(saved_trace), "--view", view, "--event", "5"])
        assert out.exit_code == 0, (view, out.output)
    info = runner.invoke(main, ["trace", "info", str(saved_trace)], terminal_width=200)
    assert info.exit_code == 0
    assert "LOOKED_UP" in info.output and "allocate_slots ×2" in info.output


def test_trace_show_errors_are_clear(saved_trace: Path, tmp_path: Path) -> None:
    runner = CliRunner()
    n = len(load_trace(saved_trace))
    out = runner.invoke(main, ["trace", "show", str(saved_trace), "--event", str(n)])
    assert out.exit_code == 2 and f"0..{n - 1}" in out.output
    bogus = tmp_path / "bogus.kvtrace"
    bogus.write_bytes(b"not a trace at all")
    out = runner.invoke(main, ["trace", "show", str(bogus)])
    assert out.exit_code == 1 and "Error" in out.output


@pytest.mark.model
@pytest.mark.slow
def test_demo_quick_end_to_end(tmp_path: Path) -> None:
    out = CliRunner().invoke(main, ["demo", "--quick", "--out", str(tmp_path)], terminal_width=120)
    assert out.exit_code == 0, out.output
    for name in ("demo.kvtrace", "demo.html", "summary.json"):
        assert (tmp_path / name).stat().st_size > 0
    summary = json.loads((tmp_path / "summary.json").read_text())
    reqs = summary["requests"]
    assert summary["counts"]["blocks_evicted"] >= 1
    assert sum(r["preemptions"] for r in reqs) >= 1
    shared = [r for r in reqs if r["act"] == "shared prompt"]
    assert shared[0]["cached_tokens"] == 0 and all(r["cached_tokens"] >= 48 for r in shared[1:])
    trace = load_trace(tmp_path / "demo.kvtrace")
    assert trace.find(EventKind.STEP) is not None
    assert trace.check_replay() == trace.final_state()
    assert isinstance(trace.final_state(), KVState)
    assert "LRU free queue at the end" in out.output and "Hash chains" in out.output


@pytest.mark.model
def test_generate_shows_the_block_table(tmp_path: Path) -> None:
    save = tmp_path / "gen.kvtrace"
    out = CliRunner().invoke(main, ["generate", "The capital of France is", "--no-chat",
                                    "--max-tokens", "2", "--save", str(save)], terminal_width=120)
    assert out.exit_code == 0, out.output
    assert "Paris" in out.output and "block table of req-0" in out.output
    assert load_trace(save).calls("allocate_slots")


def test_compare_runs_three_caches_and_rejects_unknown_workloads() -> None:
    runner = CliRunner()
    out = runner.invoke(main, ["compare", "system-prompt", "--pool-tokens", "2048"], terminal_width=120)
    assert out.exit_code == 0, out.output
    assert "vllm" in out.output and "nano-vllm" in out.output and "radix" in out.output
    bad = runner.invoke(main, ["compare", "bogus"])
    assert bad.exit_code == 2 and "unknown workload 'bogus'" in bad.output


def test_lab_refuses_bad_arguments_clearly(tmp_path: Path) -> None:
    runner = CliRunner()
    out = runner.invoke(main, ["lab", "--port", "0"])
    assert out.exit_code == 2 and "0 is not in the range 1<=x<=65535" in out.output
    out = runner.invoke(main, ["lab", "--notebooks", str(tmp_path / "missing")])
    assert out.exit_code == 2 and "--notebooks" in out.output and "does not exist" in out.output
