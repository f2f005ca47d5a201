"""The browser's recording path equals CPython's, without a browser.

For the presets and 120 random scenarios, the scenario is run twice on kvlab.core: with
``kvlab.trace.Recorder`` (numpy) and with the playground's ``EventRecorder`` (lists). What the
trace player receives must be the same, byte for byte: ``kvlab.viz.encode_trace(trace)`` ==
``kvlab.playground.encode.encode_lite_trace(lite)`` (every column, the interned hashes and
requests, the initial state, the hash tree, the config), and the predict mode's questions
``quiz_points`` == ``quiz_dicts`` for all six kinds (PREDICT_KINDS) together, each alone and
hit with fixed_point, in English and Chinese; together these scenarios ask every kind. Also the
player defaults and views.
tests/playground/test_browser.py then checks that Pyodide produces this same output.
"""

from __future__ import annotations

import json
from collections import Counter

import pytest
from _scenarios import random_scenario, scenarios

from kvlab.i18n import use_language
from kvlab.playground import parse_scenario, run_scenario
from kvlab.playground.browser import PLAYER_DEFAULTS, default_views
from kvlab.playground.encode import encode_lite_trace, narrowest
from kvlab.playground.events import EventRecorder
from kvlab.playground.quiz import PREDICT_KINDS, quiz_dicts
from kvlab.trace import Recorder
from kvlab.viz import export
from kvlab.viz.encode import encode_trace
from kvlab.viz.encode import narrowest as np_narrowest
from kvlab.viz.predict import quiz_points


def _both(data):
    scenario = parse_scenario(data)
    rec, lite_rec = Recorder(), EventRecorder()
    run_scenario(scenario, rec)
    run_scenario(scenario, lite_rec)
    return rec.trace(), lite_rec.lite_trace()


def _json(value):
    return json.loads(json.dumps(value, sort_keys=True))


@pytest.mark.parametrize(
    ("name", "data"), scenarios(0) + [(f"random-{s}", random_scenario(s)) for s in range(120)]
)
def test_lite_trace_encodes_like_encode_trace(name, data) -> None:
    trace, lite = _both(data)
    assert len(trace) == len(lite)
    assert _json(encode_lite_trace(lite)) == _json(encode_trace(trace))
    for lang in ("en", "zh"):
        with use_language(lang):
            for kinds in (PREDICT_KINDS, *((k,) for k in PREDICT_KINDS), ("hit", "fixed_point")):
                expected = [p.to_dict() for p in quiz_points(trace, kinds)]
                assert _json(quiz_dicts(lite, kinds)) == _json(expected), (kinds, lang)
    assert default_views(lite) == export.default_views(trace)


def test_a_run_reaches_every_event_kind() -> None:
    """The scenarios above are not trivially equal: together they hold every event kind that
    KVCacheManager calls can record (BlockPool only pops single blocks before a recorder can
    be attached, the null block, and never appends one by one) and ask every predict kind."""
    kinds, asked = set(), Counter()
    for _, data in scenarios(0) + [(None, random_scenario(s)) for s in range(120)]:
        lite = _both(data)[1]
        kinds.update(lite.kind)
        asked.update(q["kind"] for k in PREDICT_KINDS for q in quiz_dicts(lite, (k,)))
    from kvlab.trace import EventKind

    assert kinds == {int(k) for k in EventKind} - {EventKind.POPLEFT, EventKind.APPEND}
    # Every predict kind is asked, so the quiz comparison above is not vacuous for any of them.
    assert set(asked) == set(PREDICT_KINDS) and min(asked.values()) >= 3, asked


def test_player_defaults_are_export_html_defaults() -> None:
    expected = {k: v for k, v in export._DEFAULTS.items() if k not in ("views", "predict")}
    assert PLAYER_DEFAULTS == expected


@pytest.mark.parametrize(
    "values",
    [[], [0], [-1, 127], [-129], [255], [40000], [-(2**31)], [2**31 - 1], [0, 65535], [70000]],
)
def test_narrowest_matches_numpy(values) -> None:
    for dtype in ("<i4", "<u4*"):
        if dtype.startswith("<u") and values and min(values) < 0:
            continue
        assert narrowest(values, dtype) == np_narrowest(values, dtype)


def test_chunks_intern_like_the_recorder() -> None:
    """Interning order follows the chunks: small chunks give the same tables as Recorder's."""
    scenario = parse_scenario(random_scenario(7))
    rec, lite_rec = Recorder(chunk_size=5), EventRecorder(chunk_size=5)
    run_scenario(scenario, rec)
    run_scenario(scenario, lite_rec)
    trace, lite = rec.trace(), lite_rec.lite_trace()
    assert _json(encode_lite_trace(lite)) == _json(encode_trace(trace))
    assert lite.hashes == [trace.tables.hash_bytes(i) for i in range(trace.tables.num_hashes)]
