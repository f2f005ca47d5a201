"""top_prefixes, explain_request, record_vllm and their whatif flags: exact cases, bad input."""

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from kvlab.cli import main
from kvlab.trace import load_trace
from kvlab.traffic import (
    explain_request,
    prepare_blocks,
    read_mooncake,
    read_mooncake_lines,
    record_vllm,
    top_prefixes,
)

EXCERPT = Path(__file__).parents[1] / "data" / "mooncake" / "conversation_excerpt.jsonl"


def _line(ts, n, ids):
    return json.dumps({"timestamp": ts, "input_length": n, "output_length": 1, "hash_ids": ids})


SHARED = [_line(0, 1536, [0, 1, 2]), _line(1, 2048, [0, 1, 2, 3]), _line(2, 1536, [0, 1, 4]),
          _line(3, 1024, [0, 5])]  # fmt: skip
EVICTED = [_line(0, 1024, [0, 1]), _line(1, 1024, [5, 6]), _line(2, 600, [0, 7])]


def test_top_prefixes_are_maximal_chains():
    b = prepare_blocks(read_mooncake_lines(SHARED), 512)
    got = [(p.num_blocks, p.num_tokens, p.num_requests, p.reuse_count, p.first_request)
           for p in top_prefixes(b, 5)]
    # block 0: all 4 requests; blocks 0-1: 3 of them; blocks 0-2: 2; nothing longer is shared
    assert got == [(1, 512, 4, 3, 0), (2, 1024, 3, 2, 0), (3, 1536, 2, 1, 0)]
    assert [p.num_blocks for p in top_prefixes(b, 2)] == [1, 2]
    with pytest.raises(ValueError, match="k must be an int >= 1"):
        top_prefixes(b, 0)


def test_top_prefixes_match_a_direct_count_on_the_excerpt():
    b = prepare_blocks(read_mooncake(EXCERPT), 512)
    for p in top_prefixes(b, 5):
        holders = [i for i, keys in enumerate(b.keys) if p.key in keys]
        assert len(holders) == p.num_requests and holders[0] == p.first_request
        assert all(b.keys[i].index(p.key) == p.num_blocks - 1 for i in holders)


def test_explain_names_the_request_that_evicted():
    b = prepare_blocks(read_mooncake_lines(EVICTED), 512)
    e = explain_request(b, 1024, 2)  # a pool of 2 blocks: mc-1 evicted mc-0's blocks
    assert (e.request_id, e.hit_tokens, e.rejected, e.reason) == ("mc-2", 0, False, "miss")
    assert e.explanation.deciding_miss.block_index == 0
    assert e.explanation.eviction.call.request == "mc-1" and e.explanation.eviction.step == 1
    assert explain_request(b, 4096, 2).reason == "complete"
    assert explain_request(b, 4096, 2).hit_tokens == 512
    assert str(e).startswith("request 2 (mc-2): hit 0 of 600 prompt tokens\n")
    with pytest.raises(ValueError, match=r"request index 3 outside the traffic; allowed: 0..2"):
        explain_request(b, 1024, 3)
    with pytest.raises(ValueError, match="below one block"):
        explain_request(b, 100, 0)


def test_rejected_request_says_so():
    b = prepare_blocks(read_mooncake_lines([_line(0, 1100, [0, 1, 2])]), 512)
    e = explain_request(b, 1024, 0)
    assert e.reason == "rejected" and "it needs 3 blocks, the pool has 2" in str(e)


def test_record_vllm_one_step_per_request():
    b = prepare_blocks(read_mooncake_lines(EVICTED), 512)
    res = record_vllm(b, 1024)
    calls = res.trace.calls("get_computed_blocks")
    assert [(c.request, c.step) for c in calls] == [("mc-0", 0), ("mc-1", 1), ("mc-2", 2)]
    # mc-1 evicts mc-0's 2 blocks, mc-2 (2 blocks: 600 tokens) evicts mc-1's 2
    assert res.per_request_hit_tokens == [0, 0, 0] and res.evicted_blocks == 4


def _trace(tmp_path, lines):
    p = tmp_path / "t.jsonl"
    p.write_text("\n".join(lines) + "\n")
    return str(p)


def test_whatif_explain_top_save(tmp_path):
    t, saved = _trace(tmp_path, EVICTED), tmp_path / "run.kvtrace"
    res = CliRunner().invoke(main, ["whatif", t, "--capacity-tokens", "1024,4096",
                                    "--top-prefixes", "3", "--trace-at", "1024",
                                    "--explain", "2", "--save", str(saved)])
    assert res.exit_code == 0, res.output
    assert "request 2 (mc-2): hit 0 of 600 prompt tokens" in res.output
    assert "allocate_slots of request mc-1" in res.output
    assert "most reused prefixes" in res.output
    tr = load_trace(saved)
    assert [c.request for c in tr.calls("get_computed_blocks")] == ["mc-0", "mc-1", "mc-2"]
    assert tr.config["num_gpu_blocks"] == 3  # NOTE: 2 usable blocks + the null block


def test_whatif_insight_flags_refused_before_any_work(tmp_path):
    t, out, saved = _trace(tmp_path, EVICTED), tmp_path / "r.json", tmp_path / "s.kvtrace"
    for extra, text in ((["--explain", "1"], "need --trace-at"),
                        (["--save", str(saved)], "need --trace-at"),
                        (["--trace-at", "1024"], "--trace-at needs --explain"),
                        (["--trace-at", "100", "--save", str(saved)], "below one block"),
                        (["--trace-at", "1024", "--explain", "3"], "allowed: 0..2"),
                        (["--top-prefixes", "0"], "--top-prefixes")):
        res = CliRunner().invoke(main, ["whatif", t, "--capacity-tokens", "1024", "--json",
                                        str(out), *extra])
        assert res.exit_code == 2 and text in res.output, (extra, res.output)
    assert not out.exists() and not saved.exists()
