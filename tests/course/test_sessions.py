"""The three sessions: 90 minutes each, every objective tested, keys computed, the plan in the docs."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from kvlab.course import answer_key, check, exercise, exercises
from kvlab.course.rubric import Rubric
from kvlab.course.sessions import SESSIONS, session

DOCS = Path(__file__).resolve().parents[2] / "docs" / "how-to"


@pytest.mark.parametrize("s", SESSIONS, ids=lambda s: f"session{s.number}")
def test_a_session_is_ninety_contiguous_minutes(s) -> None:
    slots = [(b.start, b.end) for b in s.timetable]
    assert slots[0][0] == 0 and slots[-1][1] == 90
    assert all(a[1] == b[0] and a[0] < a[1] for a, b in zip(slots, slots[1:]))
    assert {o for b in s.timetable for o in b.objectives} == {o.id for o in s.objectives}


@pytest.mark.parametrize("s", SESSIONS, ids=lambda s: f"session{s.number}")
def test_every_objective_is_tested_by_the_exit_quiz(s) -> None:
    known = exercises()
    assert len(s.pretest) == 5 and all(i in known for i in s.pretest + s.exit_quiz)
    tested = [i for o in s.objectives for i in o.items]
    assert all(o.items for o in s.objectives)
    assert sorted(tested) == sorted(s.exit_quiz)  # each exit item serves exactly one objective
    assert s.explain_items and set(s.explain_items) <= set(s.exit_quiz)
    assert s.state_items and set(s.state_items) <= set(s.exit_quiz)
    for item in s.explain_items:
        assert isinstance(exercise(item).compare.__self__, Rubric)
    for item in s.state_items:  # a state the learner builds: a list of ids, or of statuses
        assert isinstance(answer_key(item), list) and len(answer_key(item)) >= 2


def test_explain_items_name_what_a_partial_answer_misses() -> None:
    ex = exercise("exit1.2")
    rubric = ex.compare.__self__
    model = answer_key("exit1.2")
    assert check("exit1.2", model, quiet=True).right
    partial = "free() appends a request's blocks in reverse, so the tail goes first."
    assert rubric.missing(partial) == [label for label, _ in rubric.points][1:]
    result = check("exit1.2", partial, quiet=True)
    assert not result.right and "(3) eviction is lazy" in result.message
    chinese = "free() 按倒序把块放回队尾；提示词开头的块最可能被共享，所以留得最久；驱逐是惰性的。"
    assert check("exit1.2", chinese, quiet=True).right


def test_pretests_are_parallel_forms_not_copies() -> None:
    for s in SESSIONS:
        exit_keys = [repr(answer_key(i)) for i in s.exit_quiz]
        assert not any(repr(answer_key(i)) in exit_keys and exercise(i).question in
                       [exercise(e).question for e in s.exit_quiz] for i in s.pretest)  # fmt: skip


def test_the_lesson_plan_lists_every_item_and_objective() -> None:
    for name in ("teach-a-class.md", "teach-a-class.zh.md"):
        text = (DOCS / name).read_text(encoding="utf-8")
        for s in SESSIONS:
            for item in s.pretest + s.exit_quiz:
                assert re.search(rf"`{re.escape(item)}`", text), (name, item)
            for lab in s.labs:
                assert f"`{lab}`" in text, (name, lab)
        english = name == "teach-a-class.md"
        for s in SESSIONS if english else ():
            assert f"## Session {s.number} (90 minutes): {s.title}" in text
            for o in s.objectives:
                assert f"**{o.id}**" in text and o.text in text, o.id
            for b in s.timetable:
                assert f"| {b.start}-{b.end} |" in text, (s.number, b.start)


def test_bad_session_numbers_are_refused() -> None:
    assert session(2).number == 2
    with pytest.raises(ValueError, match=r"no session 4; the sessions are \[1, 2, 3\]"):
        session(4)
