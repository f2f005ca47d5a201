"""kvlab.course: the checker API, and every registered exercise with a right and a wrong answer."""

from __future__ import annotations

import sys

import pytest

from kvlab.course import CheckResult, Exercise, answer_key, check, exercise, exercises, register

check_module = sys.modules["kvlab.course.check"]  # the module (the package exports the function)

EXERCISES = exercises()


def test_check_prints_right_or_wrong_with_the_hint(capsys: pytest.CaptureFixture[str]) -> None:
    ex = Exercise(
        id="test.1", question="n blocks of 16 tokens hold how many tokens?",
        solve=lambda num_blocks=3: num_blocks * 16, hint="multiply by block_size",
        explain="16 tokens a block.", mistakes=((47, "count the last block whole"),),
    )  # fmt: skip
    register(ex)
    try:
        right = check("test.1", 48)
        assert right and isinstance(right, CheckResult) and right.right
        assert capsys.readouterr().out == "✓ test.1: right. 16 tokens a block.\n"
        wrong = check("test.1", 50)
        assert not wrong and "Hint: multiply by block_size" in capsys.readouterr().out
        assert "count the last block whole" in check("test.1", 47).message
        capsys.readouterr()
        assert check("test.1", 320, num_blocks=20).right  # the key follows the invited value
        capsys.readouterr()
        assert check("test.1", 48.0, quiet=True).right and capsys.readouterr().out == ""
        assert answer_key("test.1", num_blocks=2) == 32
        with pytest.raises(TypeError):
            check("test.1", 1, nope=2)
        with pytest.raises(ValueError, match="already registered"):
            register(Exercise(id="test.1", question="", solve=int, hint=""))
    finally:
        del check_module._REGISTRY["test.1"]


def test_unknown_id_names_the_known_ones() -> None:
    with pytest.raises(KeyError, match="no exercise 'nope'; known: "):
        exercise("nope")


def test_booleans_and_lists_compare_strictly() -> None:
    same = check_module._same
    assert same([1, 2.0], [1, 2]) and not same([1, 2], [2, 1]) and not same(True, 1)
    assert same({"a": [1]}, {"a": [1]}) and not same({"a": 1}, {"b": 1})


@pytest.mark.parametrize("exercise_id", list(EXERCISES))
def test_every_exercise_accepts_its_key_and_refuses_its_mistakes(exercise_id: str) -> None:
    ex = EXERCISES[exercise_id]
    key = ex.solve()
    assert check(exercise_id, key, quiet=True).right
    assert ex.mistakes, f"{exercise_id} names no likely wrong answer to test"
    for wrong, hint in ex.mistakes:
        result = check(exercise_id, wrong, quiet=True)
        assert not result.right and hint in result.message
