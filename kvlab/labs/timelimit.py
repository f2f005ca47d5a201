"""Run a learner's code with a time limit, in a worker thread, catching everything it raises.

A lab runs code the learner wrote: it may raise anything, or loop forever. Each scenario runs
in a daemon thread; when the limit passes, :class:`ScenarioTimeout` is raised *inside* that
thread (CPython's ``PyThreadState_SetAsyncExc``, the mechanism behind KeyboardInterrupt), which
stops any pure-Python loop at its next bytecode. The kernel, pytest or the grader keeps running;
the scenario is reported as "did not finish within N s".

Examples:
    >>> run_limited(lambda: 6 * 7, limit_s=1.0).value
    42
    >>> run_limited(lambda: 1 / 0, limit_s=1.0).error.__class__.__name__
    'ZeroDivisionError'
"""

from __future__ import annotations

import contextvars
import ctypes
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

__all__ = ["Outcome", "ScenarioTimeout", "run_limited"]

_GRACE_S = 2.0
"""How long a timed-out thread gets to unwind after the exception is raised in it (seconds)."""


class ScenarioTimeout(Exception):
    """Raised inside a scenario's thread when its time limit has passed."""


@dataclass
class Outcome:
    """What running one scenario gave.

    Attributes:
        value: The function's return value (None if it raised or timed out).
        error: The exception it raised (a ScenarioTimeout when it ran out of time), or None.
        timed_out: True when the time limit stopped it.
        stuck: True when it did not even stop after the timeout was raised in it (a C call
            that never returns, or code that swallows every exception); its thread is left
            running as a daemon.
    """

    value: Any = None
    error: BaseException | None = None
    timed_out: bool = False
    stuck: bool = False


def _raise_in(thread: threading.Thread, exc_type: type[BaseException]) -> None:
    ident = thread.ident
    if ident is None:
        return
    ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(ident), ctypes.py_object(exc_type))


def run_limited(fn: Callable[[], Any], limit_s: float) -> Outcome:
    """Call ``fn()`` in a daemon thread, stopping it after ``limit_s`` seconds.

    The thread runs in a copy of the caller's context (``contextvars``), so the current
    language and other context settings hold inside it.

    Args:
        fn: The work (no arguments).
        limit_s: Time limit (seconds), > 0.

    Returns:
        An :class:`Outcome`; never raises what ``fn`` raises.

    Raises:
        ValueError: If ``limit_s`` is not positive.
    """
    if not limit_s > 0:
        raise ValueError(f"limit_s must be > 0 seconds, got {limit_s!r}")
    outcome = Outcome()
    context = contextvars.copy_context()

    def target() -> None:
        try:
            outcome.value = context.run(fn)
        except ScenarioTimeout as exc:
            outcome.error, outcome.timed_out = exc, True
        except BaseException as exc:  # noqa: BLE001 - a learner's code may raise anything
            outcome.error = exc

    thread = threading.Thread(target=target, name="kvlab-lab-scenario", daemon=True)
    thread.start()
    try:
        thread.join(limit_s)
    except KeyboardInterrupt:  # the learner interrupted the kernel: stop the scenario too
        _raise_in(thread, ScenarioTimeout)
        raise
    if thread.is_alive():
        # A learner's bare ``except:`` may swallow one exception: insist a few times.
        for _ in range(10):
            _raise_in(thread, ScenarioTimeout)
            thread.join(_GRACE_S / 10)
            if not thread.is_alive():
                break
        outcome.timed_out = True
        if thread.is_alive():
            outcome.stuck = True
        if not isinstance(outcome.error, ScenarioTimeout):
            outcome.error = ScenarioTimeout(f"did not finish within {limit_s:g} s")
        outcome.value = None
    return outcome
