"""Lab nano_block_manager: the reference passes; each catalogued mistake is recognised by its divergence."""
from __future__ import annotations

import pytest

from buggy_nano_block_manager import BUGS
from kvlab.compare import NanoBlockManager
from kvlab.labs import check, lab
from kvlab.labs.solutions import reference


@pytest.mark.parametrize("impl", [reference("nano_block_manager"), NanoBlockManager], ids=["reference", "kvlab"])
def test_correct_managers_pass_every_scenario(impl) -> None:
    result = check("nano_block_manager", impl, seed=0)
    assert result.passed, str(result)
    assert result.scenarios_passed == result.scenarios_total == len(lab("nano_block_manager").scenarios(0))
    assert result.message == "every decision matches nano-vllm's"


WHERE = {
    "no_token_check": (94, "allocate('s35')", "return value"),
    "keeps_cached_count": (39, "deallocate('s9')", "num_cached_tokens"),
    "can_allocate_counts_hits": (103, "can_allocate('s47')", "return value"),
    "deallocate_head_first": (28, "deallocate('s2')", "free_block_ids"),
    "unchained_append": (10, "may_append('s2')", "block hash"),
    "no_reactivation": (41, "allocate('s22')", "free_block_ids"),
}
HINTS = {
    "no_token_check": "nano-vllm checks the tokens of a hit", "keeps_cached_count": "a deallocated sequence starts over",
    "can_allocate_counts_hits": "can_allocate asks for every block",
    "deallocate_head_first": "deallocate frees the last block first",
    "unchained_append": "a block filled by decoding is hashed in its chain",
    "no_reactivation": "a hit on a freed block takes it back",
}


@pytest.mark.parametrize("name", sorted(BUGS))
def test_each_mistake_gets_its_hint_at_its_divergence(name: str) -> None:
    result = check("nano_block_manager", BUGS[name], seed=0)
    assert result.misconception == f"nano_block_manager.{name}", str(result)
    div = result.divergence
    assert (div.scenario, div.step, div.call, div.field) == ("randomized · nano · 0", *WHERE[name])
    assert div.source == "nano-vllm" and "nano-vllm (kvlab's re-implementation):" in str(result)
    assert result.hint.startswith(HINTS[name]) and "(notebook 04, section “" in result.hint
