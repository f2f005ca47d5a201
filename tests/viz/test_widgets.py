"""TracePlayer: synced state and stepping, without a browser."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest

from kvlab.trace import EventKind, Trace

anywidget = pytest.importorskip("anywidget")
traitlets = pytest.importorskip("traitlets")

from kvlab.viz import TracePlayer
from kvlab.viz.encode import FORMAT


def test_player_syncs_a_compact_trace(shared: Trace) -> None:
    player = TracePlayer(shared)
    state = player.get_state()
    assert state["index"] == -1 and state["num_events"] == len(shared)
    assert state["trace_data"]["format"] == FORMAT
    assert set(state["trace_data"]["columns"]) >= {"kind", "payload", "offsets"}
    assert state["views"] == ["pool", "free_queue", "block_table", "hash_chain", "events"]
    assert "export default" in player._esm and "kvlab-player" in player._css
    for name in ("index", "playing", "speed", "views", "requests", "jump_kind", "trace_data"):
        assert player.trait_metadata(name, "sync") is True and player.traits()[name].help


def test_stepping_moves_the_synced_index(shared: Trace) -> None:
    player = TracePlayer(shared)
    assert [player.step_over(), player.step_over(), player.step_into()] == [0, 3, 4]
    assert player.get_state("index") == {"index": 4}
    a_alloc = shared.calls("allocate_slots", request="a")[0]
    assert a_alloc.begin == 4
    assert player.step_out() == a_alloc.end and player.back_over() == 3 and player.back() == 2
    evicted = shared.find(EventKind.BLOCK_REMOVED)
    step_3 = shared.find(EventKind.STEP, step=3)
    assert player.next_kind("BLOCK_REMOVED") == evicted
    assert player.prev_kind(EventKind.STEP) == step_3
    player.jump_kind = "LOOKED_UP"
    c_lookup = shared.calls("get_computed_blocks", request="c")[0]
    assert player.next_kind() == c_lookup.begin + 1  # c's lookup after the STEP of step 3
    assert player.seek(-1) == -1


def test_state_follows_the_cursor(shared: Trace) -> None:
    last = len(shared) - 1
    player = TracePlayer(shared, index=last)
    assert (
        player.state.free_queue_order()
        == shared.state_at(last).free_queue_order()
        == [3, 9, 8, 7, 6, 5]
    )
    assert player.event.kind is EventKind.CALL_END
    player.seek(-1)
    assert player.event is None and player.state.free_queue_order() == list(range(1, 10))


def test_every_view_is_selectable_and_drawn_by_the_js(hybrid: Trace, shared: Trace) -> None:
    from kvlab.viz.widgets import DEFAULT_VIEWS, VIEWS

    player = TracePlayer(hybrid)  # fixed-point turns in the trace: their panel is on unasked
    assert player.views == ["pool", "free_queue", "block_table", "fixed_point", "hash_chain", "events"]
    assert TracePlayer(shared).views == list(DEFAULT_VIEWS)  # no hybrid lookups: no panel
    # views asked for: kept, plus the fixed-point panel on a hybrid trace unless turned off
    assert TracePlayer(hybrid, views=["pool"]).views == ["pool", "fixed_point"]
    assert TracePlayer(hybrid, views=["pool"], fixed_point=False).views == ["pool"]
    assert TracePlayer(shared, views=["pool"]).views == ["pool"]
    player.views = ["fixed_point", "allocate_slots", "slot_mapping"]
    assert player.get_state("views") == {"views": ["fixed_point", "allocate_slots", "slot_mapping"]}
    panels = re.search(
        r"const panels = Object.fromEntries\(\[(.*?)\]", player._esm, re.DOTALL
    ).group(1)
    assert re.findall(r'"(\w+)"', panels) == list(VIEWS)
    for name in ("fixed_point", "allocate_slots", "slot_mapping"):
        assert f'views.has("{name}")' in player._esm


def test_play_and_pause_only_set_traits(shared: Trace) -> None:
    player = TracePlayer(shared)
    player.play(speed=8)
    assert (player.playing, player.speed) == (True, 8.0)
    player.pause()
    assert player.playing is False


@pytest.mark.parametrize(
    ("name", "value", "match"),
    [
        ("index", -2, "index must be in"),
        ("speed", 0.0, "speed must be in"),
        ("views", ["pool", "pool"], "views must be distinct"),
        ("views", ["pool", "chart"], "views must be distinct names"),
        ("requests", ["zz"], "unknown request id"),
        ("jump_kind", "EVICTED", "jump_kind must be an EventKind name"),
        ("max_queue", 1, "max_queue must be >= 2"),
        ("checkpoint_interval", 4, "checkpoint_interval must be >= 16"),
        ("play_mode", "sideways", "play_mode"),
    ],
)
def test_bad_values_raise_and_change_nothing(
    shared: Trace, name: str, value: object, match: str
) -> None:
    player = TracePlayer(shared, index=5)
    before = player.get_state()
    with pytest.raises(traitlets.TraitError, match=match):
        setattr(player, name, value)
    assert player.get_state() == before


def test_an_index_past_the_end_is_refused(shared: Trace) -> None:
    player = TracePlayer(shared, index=5)
    before = player.get_state()
    with pytest.raises(traitlets.TraitError, match=rf"index must be in \[-1, {len(shared)}\)"):
        player.index = len(shared)
    assert player.get_state() == before


def test_num_events_is_read_only(shared: Trace) -> None:
    with pytest.raises(traitlets.TraitError):
        TracePlayer(shared).num_events = 3


def test_import_kvlab_viz_works_without_anywidget() -> None:
    code = (
        "import sys; sys.modules['anywidget'] = None; sys.modules['ipywidgets'] = None\n"
        "import kvlab.viz as v\n"
        "assert 'TracePlayer' in v.__all__ and 'anywidget' not in [m for m in sys.modules if sys.modules[m]]\n"
        "try:\n    v.TracePlayer\nexcept ImportError as e:\n    print('ok', 'kvlab[lab]' in str(e))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], check=False, capture_output=True, text=True, timeout=60
    )
    assert out.stdout.strip() == "ok True", out.stderr
