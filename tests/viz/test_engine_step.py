"""The engine step map (kvlab.viz.engine_step): from a recorded scheduler run, stage by stage."""

from __future__ import annotations

import pytest

from kvlab.figures import engine_step_record
from kvlab.i18n import use_language
from kvlab.viz import engine_step, engine_step_dot, render_engine_step, to_text


def test_each_stage_shows_the_recorded_values() -> None:
    step = engine_step_record()
    text = to_text(render_engine_step(step), width=120)
    for line in ("Scheduler.schedule (step 2)", "request r: 1 new token", "computed before: 8 tokens (hit 0)",
                 "allocate_slots(num_computed_tokens=8, num_new_tokens=1)", "new blocks (popleft_n): [5]",
                 "row: [1, 2, 5]", "positions [8] -> slots [20]", "writes K/V at slots [20]",
                 "reads blocks [1, 2, 5] through the row"):  # fmt: skip
        assert line in text, line
    dot = engine_step_dot(step)
    assert dot.startswith("digraph engine_step {") and "s0 -> s1;" in dot and "s2 -> s3;" in dot
    assert "reads blocks [1, 2, 5] through the row" in dot
    with use_language("zh"):
        assert "引擎的一步 · 请求 r" in to_text(render_engine_step(step), width=120)
        assert "经由这一行读取块 [1, 2, 5]" in engine_step_dot(step)


def test_bad_input_names_what_is_wrong() -> None:
    from _viz_traces import admit, make_manager, make_request, seeded_hashes

    from kvlab.trace import Recorder

    with seeded_hashes():
        manager = make_manager(8)
        recorder = Recorder().attach(manager)
        recorder.mark_step(0)
        assert admit(manager, make_request("r", list(range(6))))
    trace = recorder.trace()
    assert engine_step(trace, 0, "r", [1, 2], [5], [9]).new_block_ids == (1, 2)
    with pytest.raises(ValueError, match="2 positions but 1 slots"):
        engine_step(trace, 0, "r", [1, 2], [4, 5], [9])
    with pytest.raises(ValueError, match="request 'r' was not allocated in step 3; pick a step"):
        engine_step(trace, 3, "r", [1, 2], [5], [9])
