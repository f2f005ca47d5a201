"""Lab allocate_slots_layout: the reference passes; each catalogued mistake is recognised by its divergence."""
from __future__ import annotations

import pytest

from buggy_allocate_slots_layout import BUGS
from kvlab.core import KVCacheManager
from kvlab.labs import check
from kvlab.labs.solutions import reference


@pytest.mark.parametrize("impl", [reference("allocate_slots_layout"), KVCacheManager, KVCacheManager.allocate_slots],
                         ids=["reference", "kvlab", "function"])
def test_correct_allocations_pass_every_scenario(impl) -> None:
    result = check("allocate_slots_layout", impl, seed=0)
    assert result.passed, str(result)
    assert result.scenarios_passed == result.scenarios_total


WHERE = {
    "caches_drafts": ("vLLM 0.22.1 · full · 0", 7, "block_hash"),
    "no_lookahead": ("vLLM 0.22.1 · full · 0", 7, "return value"),
    "no_admission_gate": ("vLLM 0.22.1 · mixed:full4+sw8 · 18", 50, "return value"),
    "caches_delayed": ("vLLM 0.22.1 · full+sw · 12", 28, "block_hash"),
    "ignores_external": ("vLLM 0.22.1 · full · 5", 30, "return value"),
    "not_atomic": ("vLLM 0.22.1 · full · 4", 47, "free queue"),
    "remove_after_check": ("vLLM 0.22.1 · full+sw · 12", 59, "return value"),
    "hits_not_counted": ("vLLM 0.22.1 · full+sw · 26", 15, "return value"),
}
HINTS = {
    "caches_drafts": "draft tokens are never cached", "no_lookahead": "lookahead tokens need slots too",
    "no_admission_gate": "the admission gate: full_sequence_must_fit",
    "caches_delayed": "KV from elsewhere is cached when it has arrived",
    "ignores_external": "connector tokens are computed tokens", "not_atomic": "a failure changes nothing",
    "remove_after_check": "out-of-window blocks go back first",
    "hits_not_counted": "an evictable hit takes a free block too",
}


@pytest.mark.parametrize("name", sorted(BUGS))
def test_each_mistake_gets_its_hint_at_its_divergence(name: str) -> None:
    result = check("allocate_slots_layout", BUGS[name], seed=0)
    assert result.misconception == f"allocate_slots_layout.{name}", str(result)
    div = result.divergence
    assert (div.scenario, div.step, div.field) == WHERE[name] and div.op == "allocate_slots"
    assert result.hint.startswith(HINTS[name]) and "(notebook " in result.hint
