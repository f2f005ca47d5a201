"""Checked exercises: ``check("04.1", answer)`` says right or wrong, with a hint.

Every exercise of the course registers an :class:`Exercise` whose answer key is a function
that *computes* the answer by running kvlab (never a typed constant), so the key cannot drift
from the code it teaches. Modules of :mod:`kvlab.course` register their exercises at import
time; :func:`check` imports every submodule of the package on first use, so a new module
(``kvlab/course/quiz.py``, ``kvlab/course/nb12.py``, ...) needs no edit here.

Examples:
    >>> from kvlab.course import check
    >>> check("01.1", 7).right        # doctest: +SKIP
    ✗ 01.1: not yet. Hint: ...
    False
"""

from __future__ import annotations

import importlib
import math
import pkgutil
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

__all__ = ["CheckResult", "Exercise", "answer_key", "check", "exercise", "exercises", "register"]

_REGISTRY: dict[str, "Exercise"] = {}
_LOADED = False
_SKIP_MODULES = {"check"}


def _same(expected: Any, answer: Any) -> bool:
    """Default comparison: equal, floats with a relative tolerance of 1e-6, sequences item by item."""
    if isinstance(expected, bool) or isinstance(answer, bool):
        return type(expected) is type(answer) and expected == answer
    if isinstance(expected, (int, float)) and isinstance(answer, (int, float)):
        return math.isclose(expected, answer, rel_tol=1e-6, abs_tol=1e-9)
    if isinstance(expected, (list, tuple)) and isinstance(answer, (list, tuple)):
        return len(expected) == len(answer) and all(map(_same, expected, answer))
    if isinstance(expected, dict) and isinstance(answer, dict):
        return expected.keys() == answer.keys() and all(_same(v, answer[k]) for k, v in expected.items())
    return expected == answer


@dataclass(frozen=True)
class Exercise:
    """One checked exercise.

    Attributes:
        id: ``"NN.k"``: notebook number and exercise number (``"04.1"``), or ``"quiz.k"``.
        question: What is asked, in one sentence (units named: tokens, blocks, bytes).
        solve: Computes the answer key by running kvlab. Called with the keyword arguments
            given to :func:`check` (e.g. ``num_blocks=200`` for an exercise that invites any
            value), so one exercise can be checked for every value its text invites.
        hint: What to look at when the answer is wrong (never the answer itself).
        compare: ``compare(expected, answer) -> bool``; default: equality (floats to 1e-6,
            lists item by item).
        explain: One or two sentences shown with a right answer: why it is right.
        mistakes: ``(wrong_answer, hint)`` pairs for the likely wrong answers (with the default
            parameters): a learner who gives one gets its own hint. The tests check each is
            indeed judged wrong; every exercise names at least one.
    """

    id: str
    question: str
    solve: Callable[..., Any]
    hint: str
    compare: Callable[[Any, Any], bool] = _same
    explain: str = ""
    mistakes: tuple[tuple[Any, str], ...] = ()


@dataclass(frozen=True)
class CheckResult:
    """The verdict of :func:`check`; truthy when right.

    Attributes:
        id: The exercise checked.
        right: Whether the answer equals the computed key.
        answer: The learner's answer.
        message: What was printed (right/wrong and the hint or the explanation).
        params: The keyword arguments the key was computed with.
    """

    id: str
    right: bool
    answer: Any
    message: str
    params: dict = field(default_factory=dict)

    def __bool__(self) -> bool:
        return self.right

    def __repr__(self) -> str:
        return f"CheckResult(id={self.id!r}, right={self.right})"


def register(ex: Exercise) -> Exercise:
    """Add an exercise to the registry (at import time of a kvlab.course module).

    Raises:
        ValueError: ``ex.id`` is already registered (two modules claimed the same id).
    """
    if ex.id in _REGISTRY and _REGISTRY[ex.id] is not ex:
        raise ValueError(f"exercise {ex.id!r} is already registered; pick another id")
    _REGISTRY[ex.id] = ex
    return ex


def _load_all() -> None:
    global _LOADED
    if _LOADED:
        return
    import kvlab.course as pkg

    for info in pkgutil.iter_modules(pkg.__path__):
        if info.name not in _SKIP_MODULES and not info.name.startswith("_"):
            importlib.import_module(f"kvlab.course.{info.name}")
    _LOADED = True


def exercises() -> dict[str, Exercise]:
    """Every registered exercise, by id, in id order."""
    _load_all()
    return dict(sorted(_REGISTRY.items()))


def exercise(exercise_id: str) -> Exercise:
    """The exercise called ``exercise_id``.

    Raises:
        KeyError: No such exercise; the message lists the known ids.
    """
    known = exercises()
    if exercise_id not in known:
        raise KeyError(f"no exercise {exercise_id!r}; known: {', '.join(known)}")
    return known[exercise_id]


def answer_key(exercise_id: str, **params: Any) -> Any:
    """The computed answer of an exercise (for instructors and tests), for ``params``."""
    return exercise(exercise_id).solve(**params)


def check(exercise_id: str, answer: Any, *, quiet: bool = False, **params: Any) -> CheckResult:
    """Check an answer against the key computed by running kvlab; print right/wrong and a hint.

    Args:
        exercise_id: ``"NN.k"`` as printed in the notebook's Exercises cell.
        answer: The learner's answer (a number, a list of block ids, ...).
        quiet: Do not print (the result still carries the message).
        **params: The values the exercise invites the learner to vary (e.g. ``num_blocks=200``);
            the key is computed for them.

    Returns:
        A :class:`CheckResult`, truthy when right.

    Raises:
        KeyError: Unknown ``exercise_id``.
        TypeError: ``params`` names a value the exercise does not take.
    """
    ex = exercise(exercise_id)
    expected = ex.solve(**params)
    right = bool(ex.compare(expected, answer))
    if right:
        message = f"✓ {ex.id}: right." + (f" {ex.explain}" if ex.explain else "")
    else:
        hint = ex.hint
        if not params:
            hint = next((h for wrong, h in ex.mistakes if _same(wrong, answer)), hint)
        message = f"✗ {ex.id}: not yet ({answer!r}). Hint: {hint}"
    if not quiet:
        print(message)
    return CheckResult(ex.id, right, answer, message, dict(params))
