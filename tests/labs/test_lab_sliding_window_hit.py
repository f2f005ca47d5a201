"""Lab sliding_window_hit: the reference passes; each catalogued mistake is recognised by its divergence."""
from __future__ import annotations

import pytest

from buggy_sliding_window_hit import BUGS
from kvlab.core import SlidingWindowManager
from kvlab.labs import check, lab
from kvlab.labs.solutions import reference


@pytest.mark.parametrize("impl", [reference("sliding_window_hit"), SlidingWindowManager], ids=["reference", "kvlab"])
def test_correct_windows_pass_every_scenario(impl) -> None:
    result = check("sliding_window_hit", impl, seed=0)
    assert result.passed, str(result)
    assert result.scenarios_passed == result.scenarios_total == len(lab("sliding_window_hit").scenarios(0))


WHERE = {
    "window_off_by_one": ("vLLM 0.22.1 · sw · 9", 16, "get_computed_blocks", "return value"),
    "skipped_off_by_one": ("vLLM 0.22.1 · sw · 8", 44, "allocate_slots", "free queue"),
    "left_to_right": ("vLLM 0.22.1 · sw · 8", 69, "get_computed_blocks", "return value"),
    "no_null_padding": ("vLLM 0.22.1 · sw · 8", 69, "get_computed_blocks", "return value"),
    "no_reset_on_miss": ("vLLM 0.22.1 · sw · 24", 35, "get_computed_blocks", "return value"),
    "no_eagle_extra": ("vLLM 0.22.1 · sw · 8", 52, "get_computed_blocks", "return value"),
    "remove_forward": ("vLLM 0.22.1 · sw · 8", 15, "allocate_slots", "free queue"),
    "touches_on_lookup": ("vLLM 0.22.1 · sw · 7", 9, "get_computed_blocks", "free queue"),
}
HINTS = {
    "window_off_by_one": "the next token is inside its own window", "skipped_off_by_one": "which tokens a window skips",
    "left_to_right": "a window's hit is searched right to left", "no_null_padding": "skipped positions hold the null block",
    "no_reset_on_miss": "the window's blocks are contiguous", "no_eagle_extra": "EAGLE needs one more block in the window",
    "remove_forward": "skipped blocks are freed from the window's edge backwards",
    "touches_on_lookup": "the lookup takes no reference",
}


@pytest.mark.parametrize("name", sorted(BUGS))
def test_each_mistake_gets_its_hint_at_its_divergence(name: str) -> None:
    result = check("sliding_window_hit", BUGS[name], seed=0)
    assert result.misconception == f"sliding_window_hit.{name}", str(result)
    div = result.divergence
    assert (div.scenario, div.step, div.op, div.field) == WHERE[name]
    assert result.hint.startswith(HINTS[name]) and "(notebook " in result.hint


def test_a_class_outside_the_manager_family_is_refused_plainly() -> None:
    class Alone:
        find_longest_cache_hit = get_num_skipped_tokens = remove_skipped_blocks = staticmethod(lambda *a: None)

    result = check("sliding_window_hit", Alone)
    assert result.status == "invalid"
    assert result.message == "SlidingWindowManager must subclass SingleTypeKVCacheManager (as in the skeleton)"
