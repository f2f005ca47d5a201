"""Counts the docs state about the course are generated (docs/hooks.py::fill_counts), never typed."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location("kvlab_docs_hooks", REPO / "docs" / "hooks.py")


def _hooks():
    module = importlib.util.module_from_spec(_spec)
    _spec.loader.exec_module(module)
    return module


PAGES = sorted((REPO / "docs").rglob("*.md"))
WORDS = r"\b(?:two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|thirteen)\s+(?:course\s+)?notebooks\b"


def test_counts_are_the_notebooks_there_are() -> None:
    hooks = _hooks()
    counts = hooks.course_counts()
    assert counts["notebooks"] == len(list((REPO / "notebooks").glob("[0-9][0-9]_*.ipynb"))) >= 13
    page = "<!-- kvlab:count notebooks -->10<!-- /kvlab:count --> notebooks, <!-- kvlab:count labs -->7<!-- /kvlab:count --> labs"
    assert hooks.fill_counts(page) == (
        f"<!-- kvlab:count notebooks -->{counts['notebooks']}<!-- /kvlab:count --> notebooks, "
        f"<!-- kvlab:count labs -->{counts['labs']}<!-- /kvlab:count --> labs"
    )


def test_committed_counts_are_current_and_no_page_spells_one_out() -> None:
    hooks = _hooks()
    marked = []
    for path in PAGES:
        text = path.read_text(encoding="utf-8")
        marked += [path.name for _ in hooks.COUNT.finditer(text)]
        assert hooks.fill_counts(text) == text, f"{path}: a kvlab:count marker holds a stale number"
        assert not re.search(WORDS, text, re.IGNORECASE), f"{path}: say the count with a kvlab:count marker"
    assert {"index.md", "index.zh.md"} <= set(marked)


def test_no_count_marker_starts_a_line() -> None:
    """Markdown reads a line that starts with ``<!--`` as a raw HTML block: the count would leave
    its paragraph (teach-a-class once rendered "opens the</p> 13 course notebooks")."""
    for path in PAGES:
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
            assert not line.lstrip().startswith("<!-- kvlab:count"), f"{path}:{number}"
