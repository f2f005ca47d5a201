"""kvlab.traffic.timed: the timed clock through kvlab's Scheduler, counted by hand."""

import json
import math

import pytest
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st

from kvlab.cli import main
from kvlab.traffic import (
    TrafficRequest,
    prepare_blocks,
    read_mooncake_lines,
    replay_sequence,
    sweep,
    sweep_rows,
)
from kvlab.traffic.timed import ServiceModel, replay_timed

ONE_MS = ServiceModel(step_base_ms=1, step_per_token_ms=0)  # every step that runs takes 1 ms


def _req(i, t, prompt, n_out):
    return TrafficRequest(f"r{i}", t, len(prompt), n_out, prompt_token_ids=tuple(prompt))


def test_preemption_counted_by_hand():
    # Block size 4, 4 blocks, budget 8 tokens. A and B arrive together and share block [1-4].
    a = _req(0, 0, [1, 2, 3, 4, 5, 6], 4)  # 6 + 4 - 1 = 9 tokens of KV: 3 blocks
    b = _req(1, 0, [1, 2, 3, 4, 7, 8], 4)
    res = replay_timed(prepare_blocks([a, b], 4), "vllm", 16, service=ONE_MS,
                       max_num_batched_tokens=8)
    # Step 0: A takes blocks 1, 2 (6 tokens; block 1 is cached at allocation), B hits block 1
    # (4 tokens) and takes block 3 for its last 2 tokens: budget 6 + 2 = 8.
    # Steps 1, 2: one decode token each (7, 8 tokens: still 2 blocks each).
    # Step 3: A needs a 3rd block (block 4); B needs one too, none is free -> B, the newest,
    # preempts itself (block 3 goes to the free queue, still cached). A samples its 4th token.
    # Step 4: B resumes with 9 tokens, hits blocks 1 and 3 (8 = num_tokens - 1) and computes 1.
    assert res.preemptions == 1
    assert res.per_request_hit_tokens == [0, 4]
    assert res.hit_tokens == 4 and res.prompt_tokens == 12
    assert res.completion_order == ["r0", "r1"]
    assert res.num_steps == 5 and res.duration_ms == 5
    assert res.queueing_delay_ms == [0, 0]
    assert res.evicted_blocks == 0 and res.rejected == 0
    s = res.prefix_cache_stats  # vLLM counts the resumed lookup apart
    assert (s.requests, s.queries, s.hits) == (2, 12, 4)
    assert (s.preempted_requests, s.preempted_queries, s.preempted_hits) == (1, 9, 8)


def _differ_case():
    x = [1, 2, 3, 4]
    a = _req(0, 0, x + [9], 1)            # caches block X = [1-4]
    b = _req(1, 1, [20, 21, 22, 23, 24], 8)  # 5 + 8 - 1 = 12 tokens of KV: the whole pool
    c = _req(2, 3, x + [30], 1)           # would hit X
    return prepare_blocks([a, b, c], 4)


def test_timed_and_sequence_clocks_differ():
    blocked = _differ_case()
    seq = replay_sequence(blocked, "vllm", 12)
    # Sequence: A, then B (2 blocks, from the never-used block 3 and A's partial block 2),
    # then C hits X.
    assert seq.per_request_hit_tokens == [0, 0, 4] and seq.evicted_blocks == 0
    timed = replay_timed(blocked, "vllm", 12, service=ONE_MS, max_num_batched_tokens=8)
    # Timed: B is still decoding when C arrives at t=3. C hits X but needs a 2nd block and only
    # X's block is free: it waits. At t=5 B's 9th token needs a 3rd block: the LRU pops block 1
    # and evicts X. B finishes at t=9 (its blocks go back cached), C runs at t=9 and misses,
    # evicting two of B's blocks for its own.
    assert timed.per_request_hit_tokens == [0, 0, 0]
    assert timed.evicted_blocks == 3 and timed.preemptions == 0
    assert timed.completion_order == ["r0", "r1", "r2"]
    assert timed.queueing_delay_ms == [0, 0, 6] and timed.duration_ms == 10
    # vLLM's counters: C was looked up at t = 3, 4 (hit X), 5, 6, 7, 8 and 9 (miss).
    s = timed.prefix_cache_stats
    assert (s.requests, s.queries, s.hits) == (9, 5 + 5 + 7 * 5, 4 + 4)


def _spaced(draw_ids):
    """Hash-id requests 1e9 ms apart, one output token each; each ends in a partial block
    of its own (id 10**7 + i)."""
    lines = []
    for i, ids in enumerate(draw_ids):
        n_in = 512 * len(ids) + 1 + (i * 37) % 512
        lines.append(json.dumps({"timestamp": i * 1e9, "input_length": n_in,
                                 "output_length": 1, "hash_ids": ids + [10**7 + i]}))
    return read_mooncake_lines(lines)


prefix_ids = st.lists(st.integers(0, 3), min_size=1, max_size=5).map(
    lambda path: [hash(tuple(path[: k + 1])) % 10**6 for k in range(len(path))])


@settings(max_examples=30, deadline=None)
@given(st.lists(prefix_ids, min_size=1, max_size=12), st.integers(1, 12),
       st.sampled_from([64, 128, 512]))
def test_spaced_arrivals_infinite_budget_equal_the_sequence_clock(ids, num_blocks, bs):
    reqs = _spaced(ids)
    blocked = prepare_blocks(reqs, bs)
    cap = num_blocks * 512
    seq = replay_sequence(blocked, "vllm", cap)
    timed = replay_timed(blocked, "vllm", cap, max_num_batched_tokens=10**6)
    assert timed.per_request_hit_tokens == seq.per_request_hit_tokens
    assert (timed.evicted_blocks, timed.rejected, timed.preemptions) == (
        seq.evicted_blocks, seq.rejected, 0)
    assert timed.hit_rate == seq.hit_rate
    served = [d for d in timed.queueing_delay_ms if not math.isnan(d)]
    assert served == [0] * (len(reqs) - seq.rejected)


def test_too_large_request_is_rejected():
    big = _req(1, 1, list(range(100, 110)), 3)  # 10 + 3 - 1 = 12 tokens > 2 blocks of 4
    res = replay_timed(prepare_blocks([_req(0, 0, [1, 2, 3], 2), big], 4), "vllm", 8,
                       service=ONE_MS)
    assert res.rejected == 1 and res.completion_order == ["r0"]
    assert res.prompt_tokens == 13 and math.isnan(res.queueing_delay_ms[1])


def test_json_row_has_clock_and_timing():
    row = replay_timed(_differ_case(), "vllm", 12, service=ONE_MS).to_dict()
    assert row["clock"] == "timed" and row["preemptions"] == 0
    assert row["step_base_ms"] == 1 and row["max_num_batched_tokens"] == 8192
    assert row["vllm_prefix_cache_stats"]["preempted_requests"] == 0


@pytest.mark.parametrize(
    ("reqs", "kwargs", "msg"),
    [
        ([_req(0, -1, [1], 1)], {}, r"request 0 \(r0\): arrival_ms -1 is not a finite number"),
        ([_req(0, 5, [1], 1), _req(1, 2, [1], 1)], {},
         r"request 1 \(r1\) arrives at 2 ms, before request 0 \(5 ms\).*non-decreasing"),
        ([_req(0, 0, [1], 1)], {"max_num_batched_tokens": 3}, "below one block"),
        ([_req(0, 0, [1], 1)], {"max_num_seqs": 0}, "max_num_seqs must be an int >= 1"),
    ],
)
def test_bad_input_names_what_is_wrong(reqs, kwargs, msg):
    with pytest.raises(ValueError, match=msg):
        replay_timed(prepare_blocks(reqs, 4), "vllm", 16, **kwargs)


@pytest.mark.parametrize("cache", ["nano", "radix", "infinite"])
def test_only_vllm_runs_on_the_timed_clock(cache):
    with pytest.raises(ValueError, match=f"only the 'vllm' cache supports the timed clock.*"
                                         f"{cache!r} on the sequence clock"):
        replay_timed(_differ_case(), cache, 16)


def test_service_model_checks_and_step_time():
    assert ServiceModel(5, 0.01).step_ms(8192) == pytest.approx(86.92)
    assert ServiceModel().step_ms(0) == 0
    with pytest.raises(ValueError, match="step_base_ms must be a finite number >= 0"):
        ServiceModel(step_base_ms=-1)
    with pytest.raises(ValueError, match="both 0"):
        ServiceModel(0, 0)


def _lines_file(tmp_path):
    # Mooncake lines: B shares A's two blocks and arrives while A still decodes.
    lines = [{"timestamp": 0, "input_length": 1024, "output_length": 3, "hash_ids": [0, 1]},
             {"timestamp": 1, "input_length": 1100, "output_length": 2, "hash_ids": [0, 1, 2]}]
    p = tmp_path / "t.jsonl"
    p.write_text("".join(json.dumps(x) + "\n" for x in lines))
    return p


def test_whatif_clock_timed_rows(tmp_path):
    out = tmp_path / "r.json"
    res = CliRunner().invoke(main, ["whatif", str(_lines_file(tmp_path)), "--capacity-tokens",
                                    "1536,4096", "--clock", "timed", "--json", str(out)])
    assert res.exit_code == 0, res.output
    rows = json.loads(out.read_text())["results"]
    assert [(r["cache"], r["clock"], r["capacity_tokens"]) for r in rows] == [
        ("infinite", "sequence", None), ("vllm", "timed", 1536), ("vllm", "timed", 4096)]
    # 1536 tokens = 3 blocks: A's 1024 + 3 - 1 = 1026 tokens of KV take the whole pool, so B
    # (arrived at t=1 during A's first step, 5 + 10.24 ms) waits for A to finish, then hits
    # both of A's blocks. 4096: B is admitted at A's second step, sharing A's blocks.
    assert [r["hit_tokens"] for r in rows] == [1024, 1024, 1024]
    assert rows[1]["preemptions"] == 0 and rows[1]["mean_queueing_delay_ms"] > 0
    assert rows[2]["mean_queueing_delay_ms"] == pytest.approx(0.5 * (5 + 0.01 * 1024 - 1))


def test_whatif_timed_refuses_other_caches(tmp_path):
    out = tmp_path / "r.json"
    t = str(_lines_file(tmp_path))
    for extra, msg in ((["--caches", "vllm,radix"], "only vllm supports the timed clock"),
                       (["--clock", "wall"], "unknown clock 'wall'; allowed: sequence, timed")):
        args = ["whatif", t, "--capacity-tokens", "4096", "--json", str(out)]
        if "--clock" not in extra:
            args += ["--clock", "timed"]
        res = CliRunner().invoke(main, args + extra)
        assert res.exit_code == 2 and msg in res.output, res.output
        assert not out.exists()


def test_sweep_timed_clock():
    rows = sweep_rows(sweep(_differ_case().requests, ["vllm"], [12], [4], clock="timed"))
    assert [(r["cache"], r["clock"], r["hit_tokens"]) for r in rows] == [
        ("infinite", "sequence", 4), ("vllm", "timed", 0)]
    with pytest.raises(ValueError, match="only the 'vllm' cache supports the timed clock"):
        sweep(_differ_case().requests, ["vllm", "nano"], [12], [4], clock="timed")
    with pytest.raises(ValueError, match="unknown clock 'wall'"):
        sweep(_differ_case().requests, ["vllm"], [12], [4], clock="wall")


def _same(a, b):
    assert a.to_dict() == b.to_dict()
    assert a.per_request_hit_tokens == b.per_request_hit_tokens
    assert a.completion_order == b.completion_order
    assert a.num_steps == b.num_steps
    assert [str(d) for d in a.queueing_delay_ms] == [str(d) for d in b.queueing_delay_ms]


@pytest.mark.parametrize(("bs", "cap"), [(512, 10**5), (512, 10**6), (64, 3 * 10**5)])
def test_fast_forward_changes_nothing_on_the_conversation_excerpt(bs, cap):
    from kvlab.traffic import read_mooncake

    reqs = read_mooncake("tests/data/mooncake/conversation_excerpt.jsonl", limit=80)
    b = prepare_blocks(reqs, bs)
    fast = replay_timed(b, "vllm", cap)
    _same(fast, replay_timed(b, "vllm", cap, fast_forward=False))
    assert fast.num_steps > 1000  # decode stretches were there to skip


@settings(max_examples=25, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 40), st.integers(1, 40), st.integers(0, 5),
                          st.integers(1, 30)), min_size=1, max_size=10),
       st.integers(2, 12), st.sampled_from([4, 8]), st.integers(8, 40))
def test_fast_forward_equals_step_by_step(spec, num_blocks, bs, budget):
    reqs, t = [], 0
    for i, (gap, n_in, family, n_out) in enumerate(spec):
        t += gap
        reqs.append(_req(i, t, [family * 1000 + k for k in range(n_in)], n_out))
    blocked = prepare_blocks(reqs, bs)
    kw = {"service": ServiceModel(1, 0.25), "max_num_batched_tokens": budget}
    fast = replay_timed(blocked, "vllm", num_blocks * bs, **kw)
    _same(fast, replay_timed(blocked, "vllm", num_blocks * bs, fast_forward=False, **kw))


def test_module_docstring_example_holds():
    import doctest

    import kvlab.traffic.timed

    result = doctest.testmod(kvlab.traffic.timed)
    assert result.failed == 0 and result.attempted == 5
