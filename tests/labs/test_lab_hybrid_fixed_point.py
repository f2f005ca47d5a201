"""Lab hybrid_fixed_point: the reference passes; each catalogued mistake is recognised by its divergence."""
from __future__ import annotations

import pytest

from buggy_hybrid_fixed_point import BUGS
from kvlab.core import HybridKVCacheCoordinator
from kvlab.labs import check, lab
from kvlab.labs.solutions import reference


@pytest.mark.parametrize("impl", [reference("hybrid_fixed_point"), HybridKVCacheCoordinator,
                                  HybridKVCacheCoordinator.find_longest_cache_hit],
                         ids=["reference", "kvlab", "function"])
def test_correct_fixed_points_pass_every_scenario(impl) -> None:
    result = check("hybrid_fixed_point", impl, seed=0)
    assert result.passed, str(result)
    assert result.scenarios_passed == result.scenarios_total == len(lab("hybrid_fixed_point").scenarios(0))


WHERE = {
    "independent_min": ("vLLM 0.22.1 · full+sw · 12", 25, "get_computed_blocks('r3')", "return value"),
    "one_round": ("vLLM 0.22.1 · full+2sw · 13", 30, "get_computed_blocks('r1')", "return value"),
    "full_not_cut": ("vLLM 0.22.1 · full+sw · 11", 12, "get_computed_blocks('r1')", "return value"),
    "hashes_per_block_size": ("vLLM 0.22.1 · mixed:full8+sw4 · 15", 39, "get_computed_blocks('r3')", "return value"),
    "eagle_extra": ("vLLM 0.22.1 · mixed:full8+sw4 · 16", 51, "get_computed_blocks('r5')", "return value"),
    "touches_on_lookup": ("vLLM 0.22.1 · full+sw · 10", 16, "get_computed_blocks('r1')", "free queue"),
}
HINTS = {
    "independent_min": "the groups agree on one candidate, step by step",
    "one_round": "repeat until no group shortens the candidate",
    "full_not_cut": "cut the full-attention hit to the final length",
    "hashes_per_block_size": "each group looks up hashes at its own block size",
    "eagle_extra": "an EAGLE group searches one block further", "touches_on_lookup": "the lookup takes no reference",
}


@pytest.mark.parametrize("name", sorted(BUGS))
def test_each_mistake_gets_its_hint_at_its_divergence(name: str) -> None:
    result = check("hybrid_fixed_point", BUGS[name], seed=0)
    assert result.misconception == f"hybrid_fixed_point.{name}", str(result)
    div = result.divergence
    assert (div.scenario, div.step, div.call, div.field) == WHERE[name]
    assert result.hint.startswith(HINTS[name]) and "(notebook " in result.hint
