"""The exit quiz: ten questions, listed in the lesson plan, each checked right and wrong."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from kvlab.course import answer_key, check, exercises
from kvlab.course.quiz import QUESTIONS

LESSON_PLAN = Path(__file__).resolve().parents[2] / "docs" / "how-to" / "teach-a-class.md"


def test_the_quiz_has_ten_questions_all_in_the_lesson_plan() -> None:
    ids = [q.id for q in QUESTIONS]
    assert ids == [f"quiz.{k}" for k in range(1, 11)]
    assert [k for k in exercises() if k.startswith("quiz.")] == sorted(ids)
    listed = re.findall(r"^\s*(\d+)\. \(`(quiz\.\d+)`\)", LESSON_PLAN.read_text(), re.MULTILINE)
    assert [(int(n), i) for n, i in listed] == [(k, f"quiz.{k}") for k in range(1, 11)]


@pytest.mark.parametrize(
    ("quiz_id", "right", "wrong"),
    [
        ("quiz.1", 17, 16), ("quiz.2", 16, 19), ("quiz.3", [3, 2, 1], [1, 2, 3]),
        ("quiz.4", 28, 0), ("quiz.5", 4, 1), ("quiz.6", 0, 1), ("quiz.7", 0, 3),
        ("quiz.8", 11468, 10937), ("quiz.9", 4, 1),
        ("quiz.10", [4, 5, 6, 7, 8, 9, 3, 2], [1, 2, 3, 4, 5, 6, 7, 8]),
    ],
)  # fmt: skip
def test_each_question_checks_a_right_and_a_wrong_answer(quiz_id: str, right, wrong) -> None:
    """The expected values here were worked out by hand from vLLM's rules (the notebooks show
    each); the keys themselves are computed by kvlab, so this fails if kvlab drifts."""
    assert answer_key(quiz_id) == right
    assert check(quiz_id, right, quiet=True).right
    assert not check(quiz_id, wrong, quiet=True).right
