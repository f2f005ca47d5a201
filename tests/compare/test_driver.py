"""The common driver on the three caches: hand-checked small scenarios, and agreement where
theory says the caches must agree (full-block shared prefixes, no eviction)."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kvlab.compare.driver import POLICIES, make_policy, run_workload
from kvlab.compare.workloads import Workload, WorkloadRequest


def req(rid: str, prompt, max_tokens: int, arrival: int, outputs, depends_on=None):
    return WorkloadRequest(rid, tuple(prompt), max_tokens, arrival, tuple(outputs), depends_on)


def outcome(run) -> list[tuple]:
    return [
        (r.first_hit_tokens, r.raw_hit_tokens, r.admit_step, r.finish_step)
        for r in run.requests.values()
    ]


def test_the_last_prompt_token_rule_of_each_engine() -> None:
    """r1 extends r0's prompt mid-block; r2 is exactly r0's first two blocks (block_size 4).

    vLLM caps its lookup at num_tokens - 1 and rounds down to a block: r1 hits 8, r2 only 4.
    nano-vllm counts every hit block (r2: 8 of 8 tokens) and the driver recomputes the last
    token: 7. The radix tree matches token by token: r1 10 (r0's 10 prompt tokens), r2 7.
    """
    w = Workload("h", [
        req("r0", range(1, 11), 2, 0, (90, 91)),
        req("r1", (*range(1, 11), 77), 1, 3, (92,)),
        req("r2", range(1, 9), 1, 3, (93,)),
    ])  # fmt: skip
    expected = {
        "vllm": [(0, 0, 0, 1), (8, 8, 3, 3), (4, 4, 3, 3)],
        "nano-vllm": [(0, 0, 0, 1), (8, 8, 3, 3), (7, 8, 3, 3)],
        "radix": [(0, 0, 0, 1), (10, 10, 3, 3), (7, 7, 3, 3)],
    }
    for name, want in expected.items():
        assert outcome(run_workload(w, name, pool_tokens=64, block_size=4)) == want, name


def test_nano_can_allocate_waits_for_blocks_it_would_hit() -> None:
    """r1 shares r0's two blocks; 5 blocks in all, r0 holds 3: vLLM and the radix cache admit r1
    at once, nano-vllm asks for 3 free blocks and waits until r0 has finished."""
    w = Workload("n", [req("r0", (1, 2, 3, 4), 3, 0, (10, 11, 12)),
                       req("r1", (1, 2, 3, 4, 5), 1, 1, (13,))])  # fmt: skip
    expected = {
        "vllm": [(0, 0, 0, 2), (4, 4, 1, 1)],
        "nano-vllm": [(0, 0, 0, 2), (4, 4, 3, 3)],
        "radix": [(0, 0, 0, 2), (4, 4, 1, 1)],
    }
    for name, want in expected.items():
        assert outcome(run_workload(w, name, pool_tokens=10, block_size=2)) == want, name


PREEMPT = Workload("p", [req("r0", (1, 2, 3, 4), 3, 0, (10, 11, 12)),
                         req("r1", (5, 6, 7, 8), 3, 0, (20, 21, 22))])  # fmt: skip


@pytest.mark.parametrize(
    ("name", "readmit_hit", "recomputed", "evicted"),
    [
        # step 1: r0 needs a block, r1 (newest) is preempted; r0 takes r1's tail block (2
        # tokens evicted). Step 3: r1 comes back, hits [5 6], evicts 2 more blocks (4 tokens).
        ("vllm", 2, 2, [0, 2, 2, 6, 6]),
        ("nano-vllm", 2, 2, [0, 2, 2, 6, 6]),
        # the radix cache unlocks r1's prompt at preemption; r0's one-slot decode evicts that
        # whole leaf (4 tokens); r1 comes back to an empty match and evicts r0's 6 tokens.
        ("radix", 0, 4, [0, 4, 4, 10, 10]),
    ],
)
def test_preemption_by_recompute(name: str, readmit_hit: int, recomputed: int, evicted) -> None:
    run = run_workload(PREEMPT, name, pool_tokens=8, block_size=2)
    r0, r1 = run.requests["r0"], run.requests["r1"]
    assert (r0.num_preemptions, r0.finish_step, r0.computed_tokens) == (0, 2, 6)
    assert (r1.num_preemptions, r1.readmit_hit_tokens, r1.recomputed_tokens) == (
        1, readmit_hit, recomputed)  # fmt: skip
    # prefill 4, preempted before its first decode, re-prefill 5 - hit, one decode
    assert r1.finish_step == 4 and r1.computed_tokens == 4 + (5 - readmit_hit) + 1
    assert [s.evicted_tokens for s in run.steps] == evicted
    assert [s.num_preempted for s in run.steps] == [0, 1, 0, 0, 0]
    assert [(s.num_running, s.num_waiting) for s in run.steps] == [
        (2, 0), (1, 1), (0, 1), (1, 0), (0, 0)]  # fmt: skip
    assert run.steps[0].num_used_tokens == 8 and run.steps[-1].num_used_tokens == 0
    assert run.steps[-1].recomputed_tokens == recomputed


def test_dependencies_rejection_and_max_num_seqs() -> None:
    w = Workload("d", [
        req("big", range(100, 140), 1, 0, (1,)),  # 40 tokens > the 16-token pool
        req("a", (1, 2, 3), 2, 0, (4, 5)),
        req("b", (1, 2, 3, 4, 5, 6), 1, 0, (7,), depends_on="a"),
        req("c", (9, 9), 1, 0, (8,)),
    ])  # fmt: skip
    for name in POLICIES:
        run = run_workload(w, name, pool_tokens=16, block_size=2, max_num_seqs=1)
        big, a, b, c = run.requests.values()
        assert big.rejected and big.admit_step is None and big.finish_step is None
        assert (a.admit_step, a.finish_step) == (0, 1)  # alone: max_num_seqs=1
        assert c.admit_step == 2 and b.admit_step == 3  # b arrives the step after a finished
        assert c.finish_step == 2 and b.finish_step == 3


def test_bad_arguments() -> None:
    w = Workload("x", [req("a", (1,), 1, 0, (2,))])
    with pytest.raises(ValueError, match="unknown cache policy 'lru'"):
        run_workload(w, "lru")
    with pytest.raises(ValueError, match="max_num_seqs"):
        run_workload(w, "vllm", max_num_seqs=0)
    with pytest.raises(ValueError, match="pool_tokens"):
        make_policy("radix", 0, 4)
    with pytest.raises(ValueError, match="duplicate request ids"):
        Workload("x", [req("a", (1,), 1, 0, (2,)), req("a", (1,), 1, 0, (2,))])
    with pytest.raises(ValueError, match="depends on unknown"):
        Workload("x", [req("a", (1,), 1, 0, (2,), depends_on="zz")])
    with pytest.raises(ValueError, match="output_token_ids"):
        WorkloadRequest("a", (1,), 2, 0, (5,))


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    block_size=st.sampled_from([2, 4, 8]),
    num_shared_blocks=st.integers(1, 4),
    suffixes=st.lists(st.integers(1, 12), min_size=2, max_size=5),
    max_tokens=st.integers(1, 4),
    gap=st.integers(1, 3),
)
def test_caches_agree_on_full_block_shared_prefixes(
    block_size: int, num_shared_blocks: int, suffixes: list[int], max_tokens: int, gap: int
) -> None:
    """Every request = the same k full blocks + a suffix of its own (first token unique), pool
    large enough that nothing is evicted: every later request hits exactly k blocks in all three
    caches (the radix tree can match mid-block, but the suffixes share nothing)."""
    shared = tuple(range(1, num_shared_blocks * block_size + 1))
    requests = [
        req(
            f"r{i}",
            shared + tuple(1000 * (i + 1) + j for j in range(n)),
            max_tokens,
            i * gap,
            tuple(5000 * (i + 1) + j for j in range(max_tokens)),
        )
        for i, n in enumerate(suffixes)
    ]
    w = Workload("agree", requests)
    want = [0] + [len(shared)] * (len(requests) - 1)
    for name in POLICIES:
        run = run_workload(w, name, pool_tokens=1024, block_size=block_size)
        assert [r.first_hit_tokens for r in run.requests.values()] == want, name
        assert run.steps[-1].evicted_tokens == 0 and not any(s.num_preempted for s in run.steps)


def test_recorded_runs_replay_to_the_live_caches() -> None:
    from kvlab.compare.workloads import multi_turn_chat
    from kvlab.nanovllm import nano_state
    from kvlab.trace import KVState, check_invariants
    from kvlab.viz.compare_side_by_side import event_index_at_step

    w = multi_turn_chat(num_conversations=3, num_turns=2, system_len=12, user_len=5, max_tokens=6)
    live = {
        "vllm": lambda p: KVState.from_manager(p.manager),
        "nano-vllm": lambda p: nano_state(p.manager),
        "radix": lambda p: p.cache.snapshot(),
    }
    for name, snapshot in live.items():
        policy = make_policy(name, pool_tokens=48, block_size=4, record=True)
        run = run_workload(w, policy)
        assert run.steps[-1].evicted_tokens > 0, "the pool should be tight enough to evict"
        final = run.trace.state_at(len(run.trace) - 1)
        assert final == snapshot(policy), name
        if name != "radix":
            for step in range(len(run.steps)):
                index = event_index_at_step(run.trace, step)
                check_invariants(run.trace.state_at(index), exact_ref_cnt=True)
