"""Lab full_attention_hit: the reference passes; each catalogued mistake is recognised by its divergence."""
from __future__ import annotations

import pytest

from buggy_full_attention_hit import BUGS
from kvlab.core import FullAttentionManager
from kvlab.labs import check, lab
from kvlab.labs.solutions import reference


@pytest.mark.parametrize("impl", [reference("full_attention_hit"), FullAttentionManager,
                                  FullAttentionManager.find_longest_cache_hit.__func__],
                         ids=["reference", "kvlab", "function"])
def test_correct_lookups_pass_every_scenario(impl) -> None:
    result = check("full_attention_hit", impl, seed=0)
    assert result.passed, str(result)
    assert result.scenarios_passed == result.scenarios_total == len(lab("full_attention_hit").scenarios(0))


WHERE = {
    "touches_on_lookup": ("vLLM 0.22.1 · full · 0", 37, "get_computed_blocks('r3')", "free queue"),
    "continues_past_miss": ("vLLM 0.22.1 · mixed:full8+sw4 · 15", 88, "get_computed_blocks('r3')", "return value"),
    "no_eagle_drop": ("vLLM 0.22.1 · full · 0", 16, "get_computed_blocks('r1')", "return value"),
    "eagle_always": ("vLLM 0.22.1 · full · 2", 11, "get_computed_blocks('r2')", "return value"),
    "ceil_max_length": ("vLLM 0.22.1 · full · 2", 65, "get_computed_blocks('r9')", "return value"),
    "one_list_per_group": ("vLLM 0.22.1 · full · 0", 1, "get_computed_blocks('r0')", "exception"),
}
HINTS = {
    "touches_on_lookup": "the lookup takes no reference", "continues_past_miss": "the first miss ends the hit",
    "no_eagle_drop": "EAGLE gives the last matched block back", "eagle_always": "EAGLE gives the last matched block back",
    "ceil_max_length": "a hit is whole blocks within max_length", "one_list_per_group": "one list of blocks per group",
}


@pytest.mark.parametrize("name", sorted(BUGS))
def test_each_mistake_gets_its_hint_at_its_divergence(name: str) -> None:
    result = check("full_attention_hit", BUGS[name], seed=0)
    assert result.misconception == f"full_attention_hit.{name}", str(result)
    div = result.divergence
    assert (div.scenario, div.step, div.call, div.field) == WHERE[name]
    assert result.hint.startswith(HINTS[name])


def test_no_eagle_drop_reports_one_block_too_many() -> None:
    div = check("full_attention_hit", BUGS["no_eagle_drop"], seed=0).divergence
    assert div.config["use_eagle"] is True
    (want_n, want_ids), (got_n, got_ids) = div.want, div.got
    assert got_ids[0][:-1] == want_ids[0] and got_n - want_n == div.config["groups"][0]["bs"]
