"""The presets reproduce the course's scenarios: the values their notebooks assert.

Each preset runs through ``run_scenario`` with ``kvlab.trace.Recorder``; the block ids, hits,
evictions, free-queue orders and fixed-point turns checked here are the ones notebooks 03, 04,
06, 07 and 08 assert (see the notebook named in each test).
"""

from __future__ import annotations

import pytest

from kvlab.playground import PRESETS, parse_scenario, run_scenario
from kvlab.playground.presets import DEFAULT_PRESET
from kvlab.trace import EventKind, Recorder
from kvlab.viz import PREDICT_KINDS, fixed_point_rows, quiz_points


def _run(name: str):
    rec = Recorder()
    result = run_scenario(parse_scenario(PRESETS[name].scenario), rec)
    return result, rec.trace()


def test_every_preset_runs_and_names_its_notebook() -> None:
    assert DEFAULT_PRESET in PRESETS
    for name, preset in PRESETS.items():
        result, trace = _run(name)
        assert len(trace) > 0 and result.notes == [], name
        if preset.notebook:
            assert name == f"nb{preset.notebook[:2]}"


def test_nb03_eviction_order() -> None:
    """notebooks/03_the_lru_free_queue.ipynb: x 1-9, a 10-14; b gets [10, 11, 12, 14, 13]."""
    result, trace = _run("nb03")
    calls = {c.request: c for c in trace.calls("allocate_slots")}
    assert trace.state_at(calls["x"].end).req_to_blocks[0][0] == list(range(1, 10))
    free_x = trace.calls("free", request="x")[0]
    assert trace.state_at(trace.calls("free", request="a")[0].end).free_queue_order() == [
        14,
        13,
        12,
        11,
        10,
    ]
    assert trace.state_at(free_x.end).free_queue_order() == list(range(14, 0, -1))
    b = calls["b"]
    removed = [int(i) for i in trace.filter(EventKind.BLOCK_REMOVED, start=b.begin, stop=b.end)]
    assert [trace[i].fields["block_id"] for i in removed] == [14, 13]
    assert trace.state_at(b.end).free_queue_order() == list(range(9, 0, -1))
    assert result.manager.get_block_ids("b") == ([10, 11, 12, 14, 13],)
    hit_c = trace.calls("get_computed_blocks", request="c")[0].result["num_new_computed_tokens"]
    assert hit_c == 12  # exercise 03.1
    quiz = [(q.kind, q.values[q.answer]) for q in quiz_points(trace, ("popleft", "evict"))]
    assert quiz[:4] == [
        ("popleft", list(range(1, 10))),
        ("popleft", list(range(10, 15))),
        ("popleft", [14, 13]),
        ("evict", 14),
    ]  # the notebook's quiz


def test_nb04_chained_hashes() -> None:
    """notebooks/04_block_hashes_and_prefix_caching.ipynb: hits 12, 8, 8, 0 in blocks 1-3."""
    result, trace = _run("nb04")
    assert result.manager.get_block_ids("a") == ([1, 2, 3, 4],)
    looks = trace.calls("get_computed_blocks")
    assert [c.result["num_new_computed_tokens"] for c in looks] == [12, 8, 8, 0]
    a_hashes = [b.block_hash for b in result.manager.block_pool.blocks[1:4]]
    assert all(h is not None for h in a_hashes)  # 3 full blocks cached, the 4th partial one not


def test_nb06_the_window() -> None:
    """notebooks/06_sliding_window_and_chunked_local.ipynb: [1, 2, 3] -> [0, 0, 0, 4, 5, 6];
    3 nulled blocks; after evict 1, b hits 20 tokens in [0, 0, 0, 4, 5]."""
    result, trace = _run("nb06")
    allocs = trace.calls("allocate_slots", request="a")
    history = [trace.state_at(c.end).req_to_blocks[0][0] for c in allocs]
    assert (
        history[0] == [1, 2, 3] and history[1] == [0, 2, 3, 4] and history[-1] == [0, 0, 0, 4, 5, 6]
    )
    assert len(trace.filter(EventKind.REQ_BLOCKS_NULLED)) == 3
    lookup = trace.calls("get_computed_blocks", request="b")[0]
    assert lookup.result["num_new_computed_tokens"] == 20


def test_nb07_the_fixed_point() -> None:
    """notebooks/07_hybrid_models_fixed_point.ipynb: window-12 block 3 is block 16; b hits 12
    tokens after two iterations (20, 20, 12 then 12, 12, 12)."""
    result, trace = _run("nb07")
    assert "evict 16" in PRESETS["nb07"].scenario["calls"]
    prefill = trace.calls("allocate_slots", request="a")[0]
    assert trace.state_at(prefill.end).req_to_blocks[2][0][3] == 16  # a's window-12 block 3
    call = trace.calls("get_computed_blocks", request="b")[0]
    assert call.result["num_new_computed_tokens"] == 12
    rows = fixed_point_rows(trace, call)
    assert [(r.iteration, r.hit_length_out, r.shortened) for r in rows] == [
        (0, 20, False),
        (0, 20, False),
        (0, 12, True),
        (1, 12, False),
        (1, 12, False),
        (1, 12, False),
    ]


def test_nb08_preemption() -> None:
    """notebooks/08_the_scheduler.ipynb: chat-3 preempted at step 4; its free returns
    [17, 3, 2, 1]; looked up at steps 3, 5, 6, 7."""
    result, trace = _run("nb08")
    free_call = next(c for c in trace.calls("free") if c.request == "chat-3")
    freed = next(
        trace[i]
        for i in range(free_call.begin + 1, free_call.end)
        if trace[i].kind == EventKind.FREE_BLOCKS
    )
    assert freed.fields["block_ids"] == [17, 3, 2, 1]
    assert trace.state_at(free_call.end).free_queue_order() == [17]
    assert free_call.step == 4
    assert [c.step for c in trace.calls("get_computed_blocks", request="chat-3")] == [3, 5, 6, 7]


def test_every_preset_asks_each_of_its_predict_kinds() -> None:
    """A learner who opens a preset meets a question of every kind it turns on, and the presets
    together turn on all of PREDICT_KINDS."""
    for name, preset in PRESETS.items():
        kinds = preset.scenario.get("predict", [])
        _, trace = _run(name)
        assert {q.kind for q in quiz_points(trace, kinds)} == set(kinds), name
    assert {k for p in PRESETS.values() for k in p.scenario.get("predict", [])} == set(
        PREDICT_KINDS
    )


def test_the_window_fixed_point_and_preempt_presets_ask_the_notebooks_answers() -> None:
    """nb06: a's decodes null logical blocks 0, 1, 2 (one each, at 12, 15 and 19 tokens);
    nb07: b's turns accept 20, 20, 12 then 12, 12, 12; nb08: chat-3 preempts itself."""

    def answers(name):
        _, trace = _run(name)
        return [q.values[q.answer] for q in quiz_points(trace, PRESETS[name].scenario["predict"])]

    assert answers("nb06") == [[0], [], [], [1], [], [], [], [2], [], []]
    assert answers("nb07") == [20, 20, 12, 12, 12, 12]
    assert answers("nb08") == ["chat-3"]


@pytest.mark.parametrize("name", ["shared"])
def test_the_default_preset_shares_a_prefix(name: str) -> None:
    _, trace = _run(name)
    hits = [c.result["num_new_computed_tokens"] for c in trace.calls("get_computed_blocks")]
    assert hits[0] == 0 and hits[-1] > 0
