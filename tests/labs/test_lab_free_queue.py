"""Lab free_queue: the reference passes; each catalogued mistake fails with its own hint and divergence."""
from __future__ import annotations

import pytest

import buggy_free_queue as bug
from kvlab.core import FreeKVCacheBlockQueue
from kvlab.labs import check, lab, remove_scaling
from kvlab.labs.solutions import reference


@pytest.mark.parametrize("impl", [reference("free_queue"), FreeKVCacheBlockQueue,
                                  type("Sub", (FreeKVCacheBlockQueue,), {}), bug.DequeQueue],
                         ids=["reference", "kvlab", "kvlab-subclass", "deque"])
def test_correct_queues_pass_every_scenario(impl) -> None:
    result = check("free_queue", impl, seed=7)
    assert result.passed, str(result)
    assert result.scenarios_passed == result.scenarios_total == len(lab("free_queue").scenarios(0))
    assert result.divergence is None and result.hint is None


CASES = [
    # (implementation, misconception, divergence: (scenario, step, call, field), hint fragment)
    (bug.EmptyPopleftReturnsNone, "empty_popleft", ("vLLM 0.22.1 · queue · 0", 37, "popleft()", "return value"),
     "an empty queue: vLLM's popleft raises ValueError"),
    (bug.AppendAtHead, "append_at_head", ("vLLM 0.22.1 · queue · 0", 14, "append_n([2, 4, 3])", "free queue"),
     "LRU order: a freed block joins the tail"),
    (bug.AppendNReversed, "append_n_reversed", ("vLLM 0.22.1 · queue · 0", 13, "append_n([0, 1])", "free queue"),
     "append_n keeps the order it is given"),
    (bug.LowestIdFirst, "lowest_id_first", ("vLLM 0.22.1 · queue · 0", 3, "append(1)", "free queue"),
     "the order is the policy, not block ids or timestamps"),
    (bug.PopsFromTail, "pops_from_tail", ("vLLM 0.22.1 · queue · 1", 2, "popleft_n(3)", "return value"),
     "new blocks come from the head"),
    (bug.PopleftNReversed, "popleft_n_order", ("vLLM 0.22.1 · queue · 1", 2, "popleft_n(3)", "return value"),
     "popleft_n returns the blocks head first"),
    (bug.RemoveKeepsStaleLink, "lost_blocks", ("vLLM 0.22.1 · queue · 0", 9, "remove(4)", "free queue"),
     "a doubly linked list updates both neighbours"),
    (bug.AppendNForgetsCount, "count_out_of_sync", ("vLLM 0.22.1 · queue · 0", 13, "append_n([0, 1])", "num_free_blocks"),
     "num_free_blocks counts the queue"),
]


@pytest.mark.parametrize("impl, misconception, where, hint", CASES, ids=[c[1] for c in CASES])
def test_each_mistake_gets_its_hint_at_its_divergence(impl, misconception, where, hint) -> None:
    result = check("free_queue", impl, seed=7)
    assert not result.passed and result.status == "diverged"
    assert result.misconception == f"free_queue.{misconception}"
    div = result.divergence
    assert (div.scenario, div.step, div.call, div.field) == where
    assert div.source == "vLLM 0.22.1"
    assert result.hint.startswith(hint) and "(notebook " in result.hint
    assert f"operation {where[1]}: {where[2]}" in str(result)


def test_the_append_at_head_divergence_shows_both_queues() -> None:
    div = check("free_queue", bug.AppendAtHead, seed=7).divergence
    assert div.want == [0, 1, 2, 4, 3] and div.got == [2, 4, 3, 0, 1]
    assert div.state_before["free queue"] == [0, 1]
    assert div.history[-1] == "append_n([0, 1]) -> None"


def test_remove_scaling_reports_an_unwritten_class_plainly() -> None:
    class Unwritten:
        def __init__(self, blocks):
            raise NotImplementedError("__init__")

    scaling = remove_scaling(Unwritten, sizes=(10, 100))
    assert not scaling.yours_us
    assert str(scaling) == ("not implemented yet: __init__ still raises NotImplementedError; "
                            "write it, then run this cell again")
    scaling = remove_scaling(reference("free_queue"), sizes=(100, 1000), repeats=5)
    assert len(scaling.yours_us) == len(scaling.vllm_us) == 2
    assert "pool size" in str(scaling)
