"""kvlab.course.rubric: explain items judged by the points they name; bad rubrics refused at import."""

from __future__ import annotations

import pytest

from kvlab.course.rubric import Rubric, explain_item

RUBRIC = Rubric((("tail first", (r"revers", r"倒序")), ("lazy", (r"lazy", r"惰性"))))


def test_missing_names_the_points_not_named() -> None:
    assert RUBRIC.missing("Blocks go back in REVERSE; eviction is lazy.") == []
    assert RUBRIC.missing("倒序追加") == ["lazy"]
    assert RUBRIC.missing(42) == ["tail first", "lazy"]
    assert RUBRIC.describe() == "(1) tail first; (2) lazy"


def test_an_item_whose_model_answer_or_mistake_contradicts_its_rubric_is_refused() -> None:
    with pytest.raises(ValueError, match=r"x\.1: the model answer misses \['lazy'\]"):
        explain_item("x.1", "why?", lambda: "reverse only", RUBRIC, ())
    with pytest.raises(ValueError, match="names every rubric point"):
        explain_item("x.2", "why?", lambda: "reverse, lazy", RUBRIC, (("reverse and lazy", "h"),))
    item = explain_item("x.3", "why?", lambda: "reverse, lazy", RUBRIC, (("by timestamp", "no timestamps"),))
    assert item.compare(item.solve(), "lazy, in reverse") and not item.compare(item.solve(), "by timestamp")
    assert item.hint == "a full answer names: (1) tail first; (2) lazy"
