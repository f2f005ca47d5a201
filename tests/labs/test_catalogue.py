"""Every lab's catalogue: at least five mistakes, each pointing at a real section of a real notebook,
in English and in Chinese."""
from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from kvlab.i18n import _, use_language
from kvlab.labs import LABS, lab

NOTEBOOKS = Path(__file__).resolve().parents[2] / "notebooks"


def _headings(path: Path) -> set[str]:
    nb = json.loads(path.read_text(encoding="utf-8"))
    text = "\n".join("".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "markdown")
    return {m.strip() for m in re.findall(r"^#{1,6} (.+)$", text, re.M)}


@pytest.mark.parametrize("name", LABS)
def test_each_lab_has_at_least_five_distinct_mistakes(name: str) -> None:
    entries = lab(name).catalogue
    assert len(entries) >= 5
    ids = [e.id for e in entries]
    assert len(set(ids)) == len(ids) and all(i.startswith(f"{name}.") for i in ids)


@pytest.mark.parametrize("name", LABS)
def test_hints_name_a_section_that_exists_in_both_languages(name: str) -> None:
    for entry in lab(name).catalogue:
        assert entry.section in _headings(NOTEBOOKS / f"{entry.notebook}.ipynb"), entry.id
        with use_language("zh"):
            assert _(entry.section) in _headings(NOTEBOOKS / "zh" / f"{entry.notebook}.ipynb"), entry.id
            assert _(entry.concept) != entry.concept and _(entry.hint) != entry.hint, entry.id


def test_every_lab_says_what_to_read_first_and_has_a_title_in_both_languages() -> None:
    for name in LABS:
        info = lab(name)
        assert info.after and all((NOTEBOOKS / f"{nb}.ipynb").is_file() for nb in info.after)
        with use_language("zh"):
            assert _(info.title) != info.title
