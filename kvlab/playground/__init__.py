"""kvlab.playground: edit a scenario, run kvlab.core on it, watch the trace, in the browser.

The playground page (``kvlab playground``, and the site's Playground page) runs the very same
kvlab.core under Pyodide: a scenario (``scenario``) is run by ``run_scenario`` (``run``) with a
pure-Python recorder (``events``) whose trace is encoded for the trace player (``encode``,
``chains``, ``quiz`` and ``quiz_decisions``). In CPython the same scenario runs with ``kvlab.trace.Recorder``.

This package's modules import only the standard library, kvlab.core and the numpy-free parts
of kvlab.trace, kvlab.i18n and kvlab.viz (the predict questions: ``kvlab.viz.predict_common``,
``kvlab.viz.predict_cache_questions``, ``kvlab.viz.predict_questions``), so the browser can
import them; ``build`` and ``cli`` (writing the page) are CPython only and are not imported here.

Examples:
    >>> from kvlab.playground import PRESETS, parse_scenario, run_scenario
    >>> result = run_scenario(parse_scenario(PRESETS["nb03"].scenario))
    >>> result.manager.get_block_ids("b")
    ([10, 11, 12, 14, 13],)
"""

from kvlab.playground.presets import PRESETS, Preset
from kvlab.playground.run import RunResult, build_manager, run_scenario
from kvlab.playground.scenario import (
    DEFAULTS,
    LIMITS,
    Scenario,
    ScenarioError,
    parse_scenario,
    token_ids,
    word_ids,
)

__all__ = [
    "DEFAULTS",
    "LIMITS",
    "PRESETS",
    "Preset",
    "RunResult",
    "Scenario",
    "ScenarioError",
    "build_manager",
    "parse_scenario",
    "run_scenario",
    "token_ids",
    "word_ids",
]
