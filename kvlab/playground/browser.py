"""The playground page's entry point in Pyodide: scenario JSON in, the player's state JSON out.

``playground.js`` calls ``run_json(scenario_json, lang)`` after each Run. It parses and runs the
scenario on kvlab.core with an ``EventRecorder`` and answers one JSON object:

* ``{"ok": true, "player": {...}, "notes": [...], "num_events": n, "num_steps": s,
  "block_hashes": [hex, ...]}``: ``player`` is the trace player's state
  (``kvlab.viz.export.player_html``'s, less the labels the page adds): ``trace_data``
  (``kvlab-trace/1``, which keeps 4 bytes of each hash), ``views``, ``predict``, ``quiz`` ...;
  ``block_hashes`` are the trace's hashes in full, by hash index;
* ``{"ok": false, "error": "..."}`` for a scenario kvlab refuses: the very message that
  ``kvlab.playground.run_scenario`` raises in CPython (``ScenarioError``, or kvlab.core's own
  ValueError / TypeError);
* ``{"ok": false, "error": "...", "detail": "<traceback>"}`` for anything else (a bug).

Examples:
    >>> import json
    >>> out = json.loads(run_json('{"block_size": 0}', "en"))
    >>> out["error"]
    'block_size must be a positive int, got 0'
"""

from __future__ import annotations

import json
import traceback
from typing import Any

from kvlab.i18n import _, use_language
from kvlab.playground.encode import encode_lite_trace
from kvlab.playground.events import EventRecorder, LiteTrace
from kvlab.playground.quiz import quiz_dicts
from kvlab.playground.run import run_scenario
from kvlab.playground.scenario import ScenarioError, parse_scenario
from kvlab.trace.events import EventKind

__all__ = ["PLAYER_DEFAULTS", "default_views", "player_state", "run_json"]

PLAYER_DEFAULTS: dict[str, Any] = {
    "index": -1,
    "playing": False,
    "speed": 4.0,
    "play_mode": "over",
    "requests": [],
    "jump_kind": "CALL_BEGIN",
    "max_queue": 32,
    "checkpoint_interval": 1024,
}
"""The player's settings (``kvlab.viz.export``'s defaults; views and predict set per run)."""

_BASE_VIEWS = ("pool", "free_queue", "block_table", "hash_chain", "events")


def default_views(trace: LiteTrace) -> list[str]:
    """``kvlab.viz.export.default_views``: the fixed-point panel joins when the trace has turns."""
    views = list(_BASE_VIEWS)
    if EventKind.FIXED_POINT_ITERATED in trace.kind:
        views.insert(views.index("hash_chain"), "fixed_point")
    return views


def player_state(trace: LiteTrace, lang: str, predict: list[str]) -> dict[str, Any]:
    """The player's state for ``trace`` (labels excepted), questions in ``lang``."""
    with use_language(lang):
        quiz = quiz_dicts(trace, predict) if predict else []
    return {
        **PLAYER_DEFAULTS,
        "views": default_views(trace),
        "trace_data": encode_lite_trace(trace),
        "num_events": len(trace),
        "predict": list(predict),
        "quiz": quiz,
        "lang": lang,
    }


def run_json(text: str, lang: str = "en") -> str:
    """Run the scenario ``text`` (JSON) and answer the page (see the module docstring)."""
    try:
        data = json.loads(text)
    except ValueError as exc:
        return json.dumps({"ok": False, "error": f"the scenario is not valid JSON: {exc}"})
    try:
        scenario = parse_scenario(data)
        recorder = EventRecorder()
        with use_language(lang):
            result = run_scenario(scenario, recorder)
        trace = recorder.lite_trace()
        player = player_state(trace, lang, scenario.predict)
    except (ScenarioError, ValueError, TypeError) as exc:
        return json.dumps({"ok": False, "error": str(exc)})
    except Exception as exc:  # noqa: BLE001 - a bug: say so and show where
        with use_language(lang):
            error = _(
                "kvlab hit an internal error ({error}); please report it with the share link."
            ).format(error=f"{type(exc).__name__}: {exc}")
        return json.dumps({"ok": False, "error": error, "detail": traceback.format_exc()})
    return json.dumps(
        {
            "ok": True,
            "player": player,
            "notes": result.notes,
            "num_events": len(trace),
            "num_steps": result.num_steps,
            "block_hashes": [h.hex() for h in trace.hashes],
        },
        separators=(",", ":"),
    )
