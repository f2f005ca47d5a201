"""The lean radix tree (kvlab.traffic.radix) against kvlab.sglang's faithful RadixCache."""

import random
from pathlib import Path
from types import SimpleNamespace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kvlab.traffic import prepare_blocks, read_mooncake, read_mooncake_lines, replay_sequence, sweep
from kvlab.traffic.radix import RadixPrefixCache, radix_curve
from kvlab.traffic.replay import make_radix_cache, serve_radix_one
from kvlab.traffic.synthetic import random_mooncake_lines

DATA = Path(__file__).parents[1] / "data" / "mooncake"
CAPS = [10**4, 10**5, 10**6, 3 * 10**6, 10**7, 5 * 10**7, 10**9]


def _lean_tree(sim):
    """node_id -> (parent id, key, time) of every node but the root."""
    out, stack = {}, [sim.root]
    while stack:
        node = stack.pop()
        for c in node.children.values():
            out[c.node_id] = (node.node_id, tuple(c.key), c.time)
            stack.append(c)
    return out


def _faithful_tree(cache):
    return {n.node_id: (n.parent.node_id, tuple(n.key), n.last_access_time) for n in cache.nodes()}


def _shape_and_order(tree):
    """The nodes (ids, parents, keys) and the rank of each node's access time (ties kept)."""
    times = sorted({t for _, _, t in tree.values()})
    return ({i: (p, k) for i, (p, k, _) in tree.items()},
            {i: times.index(t) for i, (_, _, t) in tree.items()})  # fmt: skip


def _lockstep(requests, num_blocks, block_size, check_tree=True):
    """Serve (keys, num_tokens) pairs through both trees; compare every request's outcome."""
    cache, pool = make_radix_cache(num_blocks)
    sim = RadixPrefixCache(num_blocks, block_size)
    outcomes = []
    for i, (keys, n) in enumerate(requests):
        got = serve_radix_one(cache, pool, SimpleNamespace(request_id=f"r{i}",
                              num_prompt_tokens=n), keys, block_size)  # fmt: skip
        before = sim.num_evicted_blocks
        hit = sim.serve(keys, n)
        mine = None if hit == -1 else (hit, sim.num_evicted_blocks - before)
        assert mine == got, (i, keys, n)
        if check_tree:
            assert _shape_and_order(_lean_tree(sim)) == _shape_and_order(_faithful_tree(cache)), i
        outcomes.append(got)
    assert sim.num_pages == num_blocks - pool.available_size()
    return outcomes


def test_counted_by_hand_whole_leaf_eviction_split_and_refusal():
    # A: pages [1 2 3] + a partial page. B shares page 1: the match splits A's node into
    # [1] and [2 3] and B's [4] hangs under [1]. C needs 3 pages with 2 free: the shortfall
    # is 1, but the least recently used leaf is [2 3] (A's tail, older than B's [4]), evicted
    # whole (2 pages). D has 7 pages for a 6-page pool: refused.
    sim = RadixPrefixCache(num_blocks=6, block_size=4)
    assert sim.serve([1, 2, 3], 13) == 0
    assert sim.serve([1, 4], 9) == 4
    assert sorted(tuple(n[1]) for n in _lean_tree(sim).values()) == [(1,), (2, 3), (4,)]
    assert sim.num_pages == 4 and sim.num_evicted_blocks == 0
    assert sim.serve([9, 9], 9) == 0
    assert sim.num_evicted_blocks == 2
    assert sorted(tuple(n[1]) for n in _lean_tree(sim).values()) == [(1,), (4,), (9, 9)]
    assert sim.serve([1, 4, 5, 6, 7, 8], 25) == -1
    assert sim.peak == 7  # NOTE: C needed 3 pages beside the tree's 4 (before evicting)
    assert _lockstep([([1, 2, 3], 13), ([1, 4], 9), ([9, 9], 9), ([1, 4, 5, 6, 7, 8], 25)],
                     6, 4) == [(0, 0), (4, 0), (0, 2), None]  # fmt: skip


@pytest.mark.parametrize("name", ["conversation_excerpt.jsonl", "synthetic_excerpt.jsonl"])
def test_lean_equals_faithful_on_mooncake_excerpts_at_seven_capacities(name):
    b = prepare_blocks(read_mooncake(DATA / name), 512)
    points = radix_curve(b, CAPS)
    evicting = 0
    for cap, point in zip(CAPS, points, strict=True):
        want = replay_sequence(b, "radix", cap, faithful=True)
        lean = replay_sequence(b, "radix", cap)
        for got in (point, lean):
            assert got.per_request_hit_tokens == want.per_request_hit_tokens, cap
            assert (got.evicted_blocks, got.rejected) == (want.evicted_blocks, want.rejected)
        assert (lean.hit_tokens, lean.prompt_tokens) == (want.hit_tokens, want.prompt_tokens)
        assert (point.hit_tokens, point.prompt_tokens) == (want.hit_tokens, want.prompt_tokens)
        evicting += want.evicted_blocks > 0
    assert evicting >= 3 and points[0].rejected > 0  # NOTE: the check reaches evictions/refusals
    # every request's evicted pages too, at the smallest pools
    for cap in CAPS[:3]:
        _lockstep(list(zip(b.keys, (r.num_prompt_tokens for r in b.requests), strict=True)),
                  cap // 512, 512, check_tree=False)  # fmt: skip


@pytest.mark.parametrize("seed", range(12))
def test_lean_equals_faithful_on_random_mooncake_traces(seed):
    rng = random.Random(seed)
    bs = [16, 64, 512][seed % 3]
    b = prepare_blocks(read_mooncake_lines(random_mooncake_lines(rng, 40)), bs)
    caps = sorted({rng.randint(1, 60) * bs for _ in range(5)} | {bs, 10**6})
    for cap, point in zip(caps, radix_curve(b, caps), strict=True):
        want = replay_sequence(b, "radix", cap, faithful=True)
        assert point.per_request_hit_tokens == want.per_request_hit_tokens, cap
        assert (point.evicted_blocks, point.rejected) == (want.evicted_blocks, want.rejected)
    for cap in caps[:3]:
        _lockstep(list(zip(b.keys, (r.num_prompt_tokens for r in b.requests), strict=True)),
                  cap // bs, bs)  # fmt: skip


@st.composite
def _traffic(draw):
    """Requests over a tiny alphabet (splits anywhere), often extending an earlier one."""
    bs = draw(st.sampled_from([1, 2, 16]))
    seen, out = [], []
    for _ in range(draw(st.integers(1, 30))):
        base = []
        if seen and draw(st.booleans()):
            doc = draw(st.sampled_from(seen))
            base = doc[: draw(st.integers(0, len(doc)))]
        keys = base + draw(st.lists(st.integers(0, 2), max_size=6))
        seen.append(keys)
        n = max(1, len(keys) * bs + draw(st.sampled_from([0, 0, 1, bs - 1])))
        out.append((keys[: n // bs], n))
    return bs, draw(st.integers(1, 10)), out


@settings(max_examples=300, deadline=None)
@given(_traffic())
def test_lean_tree_is_the_faithful_tree_after_every_request(traffic):
    bs, num_blocks, requests = traffic
    _lockstep(requests, num_blocks, bs)


def test_stale_heap_entries_are_dropped_with_the_same_decisions(monkeypatch):
    monkeypatch.setattr(RadixPrefixCache, "heap_slack", 0)
    rng = random.Random(7)
    b = prepare_blocks(read_mooncake_lines(random_mooncake_lines(rng, 60)), 64)
    requests = list(zip(b.keys, (r.num_prompt_tokens for r in b.requests), strict=True))
    _lockstep(requests, 30, 64)
    sim = RadixPrefixCache(10**6, 64)
    for keys, n in requests:
        sim.serve(keys, n)
        assert len(sim._heap) <= 2 * len(_lean_tree(sim))


def test_curve_order_duplicates_and_the_capacities_answered_without_a_replay():
    rng = random.Random(3)
    b = prepare_blocks(read_mooncake_lines(random_mooncake_lines(rng, 40)), 64)
    big = radix_curve(b, [10**6])[0]
    assert big.evicted_blocks == 0 and big.rejected == 0
    sim = RadixPrefixCache(10**6 // 64, 64)
    for keys, req in zip(b.keys, b.requests, strict=True):
        sim.serve(keys, req.num_prompt_tokens)
    caps = [sim.peak * 64, 64, 10**6, sim.peak * 64 - 64, 64]
    points = radix_curve(b, caps)
    assert [p.num_blocks for p in points] == [sim.peak, 1, 10**6 // 64, sim.peak - 1, 1]
    assert points[0].per_request_hit_tokens == big.per_request_hit_tokens
    assert points[1] is not points[4] and points[1] == points[4]
    for cap, point in zip(caps, points, strict=True):
        want = replay_sequence(b, "radix", cap, faithful=True)
        assert point.per_request_hit_tokens == want.per_request_hit_tokens, cap
        assert (point.evicted_blocks, point.rejected) == (want.evicted_blocks, want.rejected)
    assert points[3].evicted_blocks > 0  # NOTE: one page below the peak must evict


def test_bad_sizes_are_refused_with_what_is_allowed():
    with pytest.raises(ValueError, match="num_blocks must be an int >= 1, got 0"):
        RadixPrefixCache(0, 16)
    with pytest.raises(ValueError, match="block_size must be an int >= 1, got True"):
        RadixPrefixCache(4, True)
    b = prepare_blocks(read_mooncake_lines(random_mooncake_lines(random.Random(1), 5)), 64)
    msg = r"capacity 63 tokens is below one block \(64 tokens\); allowed: >= 64"
    with pytest.raises(ValueError, match=msg):
        radix_curve(b, [64, 63])


def test_keys_as_tuples_or_ranges_decide_as_lists():
    as_lists, as_tuples = RadixPrefixCache(8, 2), RadixPrefixCache(8, 2)
    requests = [([1, 2, 3], 7), ([1, 2, 3], 7), ([1, 2], 5), ([1, 5, 6, 7], 9)]
    want = [as_lists.serve(k, n) for k, n in requests]
    assert want == [0, 6, 4, 2]
    assert [as_tuples.serve(tuple(k), n) for k, n in requests] == want
    assert as_tuples.serve(range(1, 3), 5) == as_lists.serve([1, 2], 5) == 4


def test_max_model_len_refuses_long_prompts_before_the_tree_as_the_vllm_curve_does():
    rng = random.Random(11)
    lines = random_mooncake_lines(rng, 60)
    b = prepare_blocks(read_mooncake_lines(lines), 64)
    lengths = sorted(r.num_prompt_tokens for r in b.requests)
    mml = lengths[len(lengths) // 2]
    long = [r.num_prompt_tokens > mml for r in b.requests]
    assert 0 < sum(long) < len(long)
    kept = [(k, r.num_prompt_tokens) for k, r, x in zip(b.keys, b.requests, long, strict=True) if not x]
    for cap in (64 * 8, 64 * 40, 10**6):
        point = radix_curve(b, [cap], max_model_len=mml)[0]
        outcomes = iter(_lockstep(kept, cap // 64, 64, check_tree=False))  # the tree never sees them
        want = [0 if x else (o[0] if (o := next(outcomes)) else 0) for x in long]
        assert point.per_request_hit_tokens == want, cap
        faithful_refused = sum(o is None for o in _lockstep(kept, cap // 64, 64, check_tree=False))
        assert point.rejected == sum(long) + faithful_refused, cap
    rows = sweep(read_mooncake_lines(lines), ["vllm", "radix"], [10**6], [64], max_model_len=mml)
    rejected = {r.cache: r.rejected for r in rows}
    assert rejected["radix"] == rejected["vllm"] == sum(long)  # a pool of 10**6 refuses nothing else
    with pytest.raises(ValueError, match=r"max_model_len must be a whole number of tokens >= 1 \(or None\), got 0"):
        radix_curve(b, [10**6], max_model_len=0)
