"""Lab radix_cache: the reference passes; each catalogued mistake is recognised by its divergence;
the shipped recordings are kvlab.sglang's and the lab's life cycle is kvlab.sglang's."""
from __future__ import annotations

import pytest

from buggy_radix_cache import BUGS
from kvlab.labs import check, lab
from kvlab.labs.radix import RADIX_SOURCE, RadixSide, load_radix_recordings, record_radix_ops
from kvlab.labs.radix_model import radix_model
from kvlab.labs.solutions import reference
from kvlab.labs.engine import replay


def test_reference_passes_every_scenario() -> None:
    result = check("radix_cache", reference("radix_cache"), seed=0)
    assert result.passed, str(result)
    assert result.scenarios_passed == result.scenarios_total == len(lab("radix_cache").scenarios(0)) == 12
    assert result.message == "every decision matches SGLang 0.5.23's"


def test_kvlab_sglang_radix_cache_passes_the_page_size_1_scenarios_only() -> None:
    from kvlab.sglang import RadixCache

    result = check("radix_cache", RadixCache, seed=0)
    assert result.scenarios_passed == 8  # the 6 recorded + 2 randomized with page size 1
    assert result.divergence.scenario == "randomized · page_size 2 · 1"
    assert result.divergence.field == "exception" and "page_size" in result.divergence.error


def test_shipped_recordings_are_kvlab_sglangs_decisions() -> None:
    import record_radix_fixtures

    shipped = load_radix_recordings()
    fresh = record_radix_fixtures.recordings()
    assert [r.source for r in shipped] == [RADIX_SOURCE] * 6
    assert [(r.config, [(s.op, s.args, s.want, s.state) for s in r.steps]) for r in shipped] == \
        [(r.config, [(s.op, s.args, s.want, s.state) for s in r.steps]) for r in fresh]
    ops = {s.op for r in shipped for s in r.steps}
    assert ops == {"match_prefix", "insert", "inc_lock_ref", "dec_lock_ref", "evict", "alloc", "free"}


@pytest.mark.parametrize("seed", range(4))
def test_paged_model_equals_kvlab_sglang_on_page_size_1(seed: int) -> None:
    cfg = {"pool_tokens": 10 + 3 * seed, "page_size": 1}
    rec = record_radix_ops(RadixSide(cfg), seed, 150)
    assert sum(s.op == "evict" for s in rec.steps) >= 5
    assert replay(rec, lambda: RadixSide(cfg, radix_model()), "radix_cache", "model") is None


def test_life_cycle_is_kvlab_sglangs() -> None:
    """The lab's tree calls leave the tree, the pool and the sizes as kvlab.sglang's own
    checkpoint_kv_cache / release_kv_cache do, request by request (admit, prefill, finish)."""
    from kvlab.sglang import Req, RadixCache, TokenToKVPoolAllocator, checkpoint_kv_cache, release_kv_cache
    from kvlab.sglang.mem_cache.common import evict_from_tree_cache
    from kvlab.labs.radix import tree_state

    prompts = [[1, 2, 3, 4, 5], [1, 2, 3, 9], [1, 2, 7, 7, 7, 7], [4, 4, 4], [1, 2, 3, 4, 6, 6]]
    tree = RadixCache(TokenToKVPoolAllocator(10))
    side = RadixSide({"pool_tokens": 10, "page_size": 1})
    for i, p in enumerate(prompts):
        value, node = tree.match_prefix(p[:-1])
        tree.inc_lock_ref(node)
        evict_from_tree_cache(tree, len(p) - len(value))
        req = Req(f"r{i}", p, [], value + tree.token_to_kv_pool_allocator.alloc(len(p) - len(value)),
                  len(value), node)
        checkpoint_kv_cache(req, tree, up_to=len(p))
        release_kv_cache(req, tree, checkpoint=True)

        got, path = side.call("match_prefix", [p[:-1]])
        side.call("inc_lock_ref", [path])
        short = len(p) - len(got) - side.tree.token_to_kv_pool_allocator.available_size()
        if short > 0:
            side.call("evict", [short])
        kv, last = got + side.call("alloc", [len(p) - len(got)]), path
        for _ in ("after the prefill", "at finish"):  # checkpoint: insert, free duplicates, match, move the lock
            prefix_len = side.call("insert", [p, kv])
            if kv[len(got) : prefix_len]:
                side.call("free", [kv[len(got) : prefix_len]])
            kv, new = side.call("match_prefix", [p])
            side.call("dec_lock_ref", [last])
            side.call("inc_lock_ref", [new])
            got, last = kv, new
        side.call("dec_lock_ref", [last])  # release: the tree owns every slot now
        assert side.state() == tree_state(tree), i


WHERE = {
    "no_split_on_match": ("SGLang 0.5.23 (kvlab.sglang) · 0", 30, "match_prefix([3, 1, 2, 3, 1, 1, 3])", "return value"),
    "split_mid_page": ("randomized · page_size 2 · 1", 137, "match_prefix([1, 3, 3, 3, 1, 3, 2, 1])", "return value"),
    "split_drops_lock": ("SGLang 0.5.23 (kvlab.sglang) · 1", 221, "match_prefix([0, 1, 1, 1, 1, 3])", "lock_ref"),
    "no_touch_on_match": ("SGLang 0.5.23 (kvlab.sglang) · 0", 4, "match_prefix([3])", "last_access_time"),
    "evict_by_creation": ("SGLang 0.5.23 (kvlab.sglang) · 0", 32, "evict(4)", "return value"),
    "ignores_lock_ref": ("SGLang 0.5.23 (kvlab.sglang) · 0", 72, "evict(1)", "return value"),
    "no_cascade": ("SGLang 0.5.23 (kvlab.sglang) · 0", 32, "evict(4)", "return value"),
    "lock_node_only": ("SGLang 0.5.23 (kvlab.sglang) · 0", 13, "inc_lock_ref([3, 1, 3])", "return value"),
}
HINTS = {
    "no_split_on_match": "a match may end inside an edge", "split_mid_page": "edges are cut at page boundaries",
    "split_drops_lock": "a split node inherits the lock", "no_touch_on_match": "a match is an access",
    "evict_by_creation": "eviction is least recently used, not oldest",
    "ignores_lock_ref": "locked leaves are never evicted",
    "no_cascade": "a parent left without children becomes a leaf", "lock_node_only": "a lock covers the whole path",
}


@pytest.mark.parametrize("name", sorted(BUGS))
def test_each_mistake_gets_its_hint_at_its_divergence(name: str) -> None:
    result = check("radix_cache", BUGS[name], seed=0)
    assert result.misconception == f"radix_cache.{name}", str(result)
    div = result.divergence
    assert (div.scenario, div.step, div.call, div.field) == WHERE[name]
    assert result.hint.startswith(HINTS[name]) and "(notebook 12, section “" in result.hint
    who = "SGLang 0.5.23 (kvlab.sglang):" if div.source == RADIX_SOURCE else "kvlab's reference:"
    assert who in str(result)
