""""Explain why" items: a rubric of points a full answer names, checked on the learner's words.

An explain item's key is a model answer assembled from facts kvlab computes (block ids, queue
orders, hit lengths), so it follows the code; ``check`` judges a learner's text by the rubric:
each point is a set of alternative phrasings (English or Chinese, case-insensitive regular
expressions), and the answer is right when every point is named. This is a coarse, keyword-level
judge meant for self-study; instructors grade with the rubric itself (printed in
teach-a-class.md), and the checker says which points an answer misses.

Examples:
    >>> r = Rubric((("tail first", (r"revers", r"tail")), ("lazy", (r"lazy", r"惰性"))))
    >>> r.missing("free appends in reverse; eviction is lazy")
    []
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from kvlab.course.check import Exercise

__all__ = ["Rubric", "explain_item"]


@dataclass(frozen=True)
class Rubric:
    """Points a full answer names.

    Attributes:
        points: ``(label, patterns)`` pairs: the point's one-line label (shown to the learner
            and the grader) and regular expressions, any of which names it.
    """

    points: tuple[tuple[str, tuple[str, ...]], ...]

    def missing(self, text: Any) -> list[str]:
        """Labels of the points ``text`` does not name (all of them for a non-string)."""
        if not isinstance(text, str):
            return [label for label, _ in self.points]
        return [label for label, patterns in self.points
                if not any(re.search(p, text, re.IGNORECASE) for p in patterns)]  # fmt: skip

    def compare(self, expected: str, answer: Any) -> bool:
        """``Exercise.compare``: right when the answer names every point."""
        return not self.missing(answer)

    def describe(self) -> str:
        """The rubric as one line: "(1) ...; (2) ..."."""
        return "; ".join(f"({k}) {label}" for k, (label, _) in enumerate(self.points, 1))


def explain_item(id: str, question: str, model_answer: Callable[[], str], rubric: Rubric,
                 mistakes: tuple[tuple[str, str], ...]) -> Exercise:  # fmt: skip
    """An Exercise judged by ``rubric``; its key is the model answer (built from computed facts).

    Raises:
        ValueError: The model answer misses a point of its own rubric, or a listed mistake
            names every point (it would be judged right).
    """
    answer = model_answer()
    if rubric.missing(answer):
        raise ValueError(f"{id}: the model answer misses {rubric.missing(answer)}")
    for wrong, _hint in mistakes:
        if not rubric.missing(wrong):
            raise ValueError(f"{id}: the mistake {wrong!r} names every rubric point")
    return Exercise(id=id, question=question, solve=model_answer, compare=rubric.compare,
                    hint="a full answer names: " + rubric.describe(),
                    explain="Model answer (from kvlab's run): " + answer, mistakes=mistakes)  # fmt: skip
