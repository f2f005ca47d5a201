"""Lab block_pool: the reference passes; each catalogued mistake fails with its own hint and divergence."""
from __future__ import annotations

import pytest

import buggy_block_pool as bug
from kvlab.core import BlockPool
from kvlab.labs import check, lab
from kvlab.labs.solutions import reference


@pytest.mark.parametrize("impl", [reference("block_pool"), BlockPool, type("Sub", (BlockPool,), {})],
                         ids=["reference", "kvlab", "kvlab-subclass"])
def test_correct_pools_pass_every_scenario(impl) -> None:
    result = check("block_pool", impl, seed=0)
    assert result.passed, str(result)
    assert result.scenarios_passed == result.scenarios_total == len(lab("block_pool").scenarios(0))


CASES = [
    (bug.EagerEviction, "eager_eviction", ("vLLM 0.22.1 · full · 0", 13, "finish('r0')", "block_hash"),
     "lazy eviction: a freed block stays cached"),
    (bug.TouchKeepsQueued, "touch_keeps_queued", ("vLLM 0.22.1 · full · 0", 38, "allocate_slots", "free queue"),
     "a hit takes a free block out of the free queue"),
    (bug.FreeAppendsHeld, "free_appends_held", ("vLLM 0.22.1 · full · 1", 52, "preempt('r3')", "free queue"),
     "only blocks that reach ref_cnt 0 are free"),
    (bug.FreeReversesAgain, "free_order", ("vLLM 0.22.1 · full · 0", 13, "finish('r0')", "free queue"),
     "free_blocks keeps the order it is given"),
    (bug.NoLazyEviction, "no_lazy_eviction", ("vLLM 0.22.1 · full · 0", 83, "allocate_slots", "block_hash"),
     "a reused block is evicted when it is popped"),
    (bug.ForgetsMapOnEviction, "no_lazy_eviction", ("vLLM 0.22.1 · full · 0", 75, "evict_blocks([6, 11, 16])",
                                                     "cached map"), "a reused block is evicted when it is popped"),
    (bug.Dedupes, "dedupes", ("vLLM 0.22.1 · full · 0", 21, "allocate_slots", "block_hash"),
     "identical full blocks are not merged"),
    (bug.RecachesFromZero, "recaches", ("vLLM 0.22.1 · full · 0", 38, "allocate_slots", "exception"),
     "only the new full blocks are cached"),
    (bug.NoRemovedEvent, "events", ("vLLM 0.22.1 · full · 0", 75, "evict_blocks([6, 11, 16])", "events"),
     "vLLM's KV events"),
    (bug.NullBlockQueued, "null_block_queued", ("randomized · full+sw · 1", 13, "preempt('r0')", "exception"),
     "the null block is never free"),
]


@pytest.mark.parametrize("impl, misconception, where, hint", CASES, ids=[c[0].__name__ for c in CASES])
def test_each_mistake_gets_its_hint_at_its_divergence(impl, misconception, where, hint) -> None:
    result = check("block_pool", impl, seed=0)
    assert not result.passed
    assert result.misconception == f"block_pool.{misconception}", str(result)
    div = result.divergence
    assert (div.scenario, div.step, div.call.split("(")[0] if "(" not in where[2] else div.call, div.field) == where
    assert result.hint.startswith(hint) and "(notebook 0" in result.hint


def test_eager_eviction_shows_the_hashes_vllm_keeps() -> None:
    div = check("block_pool", bug.EagerEviction, seed=0).divergence
    kept = [b for b, (w, g) in enumerate(zip(div.want, div.got)) if w is not None and g is None]
    assert kept and all(b in div.want_state["free queue"] for b in kept)
    assert {"block_hash", "cached map", "events"} <= set(div.fields)
