"""The Chinese notebooks (notebooks/zh/): English code, Chinese prose, translations up to date.

Code has one source of truth, the English notebook: a Chinese notebook's code cells are the
English ones verbatim (plus one language cell), so every assert of the course checks the
Chinese side too. Each Chinese markdown cell records the hash of the English source it was
translated from; when the English prose changes, the test names the cell to retranslate.
Keeping them in step: tests/notebooks/zh_sync.py. Their execution (stored outputs == fresh
outputs) is tested with the English notebooks in test_notebooks.py.
"""

from __future__ import annotations

import re
import unicodedata
import warnings
from pathlib import Path

import pytest

nbformat = pytest.importorskip("nbformat")

from _nbrun import NOTEBOOK_DIR, notebook_paths, solution_sources
from zh_sync import (
    LANG_CELL_ID,
    LANG_CELL_SOURCE,
    ZH_DIR,
    en_path,
    en_sha256,
    has_chinese,
    mark_translated,
    stale_cells,
    sync,
    zh_notebook_paths,
)

ZH_NOTEBOOKS = zh_notebook_paths()
ZH_IDS = [p.stem for p in ZH_NOTEBOOKS]
HOW = "run tests/notebooks/zh_sync.py {n}, then tests/notebooks/run_notebooks.py zh/{n}"


def _read(path: Path) -> nbformat.NotebookNode:
    return nbformat.read(path, as_version=4)


def _pair(path: Path) -> tuple[nbformat.NotebookNode, nbformat.NotebookNode]:
    return _read(en_path(path)), _read(path)


def test_every_zh_notebook_has_its_english_notebook_and_untranslated_ones_are_listed() -> None:
    english = {p.name for p in notebook_paths()}
    assert ZH_NOTEBOOKS, "notebooks/zh/ holds the Chinese course"
    assert [p.name for p in ZH_NOTEBOOKS if p.name not in english] == []
    assert sorted(p.name for p in ZH_DIR.iterdir() if p.suffix == ".ipynb") == [p.name for p in ZH_NOTEBOOKS]
    missing = sorted(english - {p.name for p in ZH_NOTEBOOKS})
    if missing:
        warnings.warn(f"not yet translated into Chinese: {', '.join(missing)}", UserWarning, stacklevel=1)


@pytest.mark.parametrize("path", ZH_NOTEBOOKS, ids=ZH_IDS)
def test_code_cells_are_the_english_code_cells(path: Path) -> None:
    """Same cells, same ids, same order; code verbatim; the one extra cell sets the language."""
    en, zh = _pair(path)
    n = path.name[:2]
    assert [c.id for c in zh.cells] == [en.cells[0].id, LANG_CELL_ID, *[c.id for c in en.cells[1:]]], HOW.format(n=n)
    lang = zh.cells[1]
    assert lang.cell_type == "code" and lang.source == LANG_CELL_SOURCE
    mine = [c for c in zh.cells if c.id != LANG_CELL_ID]
    assert [c.cell_type for c in mine] == [c.cell_type for c in en.cells]
    for theirs, ours in zip(en.cells, mine, strict=True):
        if theirs.cell_type == "code":
            assert ours.source == theirs.source, (
                f"{path.name} cell {ours.id} is not the English code: {HOW.format(n=n)}"
            )
    assert zh.metadata.kernelspec == en.metadata.kernelspec


@pytest.mark.parametrize("path", ZH_NOTEBOOKS, ids=ZH_IDS)
def test_every_markdown_cell_is_translated_from_the_current_english(path: Path) -> None:
    en, zh = _pair(path)
    stale = stale_cells(en, zh)
    assert stale == [], (
        f"{path.name}: markdown cells {stale} are untranslated or the English changed since "
        f"their translation: run tests/notebooks/zh_sync.py {path.name[:2]} (it prints the English), "
        f"translate, then zh_sync.py --translated {path.name[:2]} <ids>"
    )


_PYTHON_BLOCK = re.compile(r"```python\n(.*?)```", re.S)
_FORMULA = re.compile(r"\$\$?[^$]+\$\$?")


@pytest.mark.parametrize("path", ZH_NOTEBOOKS, ids=ZH_IDS)
def test_prose_keeps_the_code_blocks_numbers_and_headings(path: Path) -> None:
    """Python blocks in the prose (the exercises' check calls and solutions, which the solutions
    run executes) are the English ones verbatim; the title keeps its number; the last cell is
    the exercises."""
    en, zh = _pair(path)
    zh_md = {c.id: c.source for c in zh.cells if c.cell_type == "markdown"}
    for cell in (c for c in en.cells if c.cell_type == "markdown"):
        assert _PYTHON_BLOCK.findall(zh_md[cell.id]) == _PYTHON_BLOCK.findall(cell.source), cell.id
        assert _FORMULA.findall(zh_md[cell.id]) == _FORMULA.findall(cell.source), cell.id
        assert zh_md[cell.id].count("<details>") == cell.source.count("<details>"), cell.id
    assert solution_sources(zh) == solution_sources(en)  # what the English run executes and judges
    number = int(path.name[:2])
    assert zh.cells[0].source.startswith(f"# {number}. ") and "**你将看到什么。**" in zh.cells[0].source
    assert "## 练习" in zh.cells[-1].source


_HEADING = re.compile(r"^(#{1,6}) ", re.M)


@pytest.mark.parametrize("path", ZH_NOTEBOOKS, ids=ZH_IDS)
def test_headings_match_the_english_one_for_one(path: Path) -> None:
    """Same heading levels in every cell: the Chinese site gives each heading the English
    notebook's anchor (docs/hooks.py::english_anchors), so links to sections work in both."""
    en, zh = _pair(path)
    zh_md = {c.id: c.source for c in zh.cells if c.cell_type == "markdown"}
    for cell in (c for c in en.cells if c.cell_type == "markdown"):
        assert _HEADING.findall(zh_md[cell.id]) == _HEADING.findall(cell.source), cell.id


_HALF_WIDTH_AFTER_HAN = re.compile(r"[\u4e00-\u9fff][,;:?!](?=\s|$)|[\u4e00-\u9fff]\. ")


@pytest.mark.parametrize("path", ZH_NOTEBOOKS, ids=ZH_IDS)
def test_chinese_sentences_use_full_width_punctuation(path: Path) -> None:
    zh = _read(path)
    for cell in (c for c in zh.cells if c.cell_type == "markdown"):
        prose = re.sub(r"```.*?```|`[^`]*`|\$[^$]*\$", "", cell.source, flags=re.S)
        assert _HALF_WIDTH_AFTER_HAN.findall(prose) == [], f"{path.name} {cell.id}"


def _is_punct(ch: str) -> bool:
    return unicodedata.category(ch).startswith("P")


def _broken_bold(text: str) -> list[str]:
    """``**…**`` spans that CommonMark does not render as bold: a closing ``**`` after
    punctuation must be followed by a space or punctuation (``**注意：**后文`` is not bold; write
    ``**注意**：后文``), and an opening one before punctuation must follow a space or punctuation."""
    bad = []
    for paragraph in re.split(r"\n\s*\n", text):
        marks = [m.start() for m in re.finditer(r"\*\*", paragraph)]
        for k, at in enumerate(marks):
            before = paragraph[at - 1] if at > 0 else " "
            after = paragraph[at + 2] if at + 2 < len(paragraph) else " "
            free = lambda ch: ch.isspace() or _is_punct(ch)  # noqa: E731
            if k % 2 == 1 and _is_punct(before) and not free(after):
                bad.append(paragraph[max(0, at - 12):at + 6])
            if k % 2 == 0 and _is_punct(after) and not free(before):
                bad.append(paragraph[max(0, at - 6):at + 12])
    return bad


@pytest.mark.parametrize("path", ZH_NOTEBOOKS, ids=ZH_IDS)
def test_bold_text_renders(path: Path) -> None:
    zh = _read(path)
    for cell in (c for c in zh.cells if c.cell_type == "markdown"):
        prose = re.sub(r"```.*?```|`[^`]*`", "``", cell.source, flags=re.S)
        assert _broken_bold(prose) == [], f"{path.name} {cell.id}"


def test_the_bold_check_knows_commonmark() -> None:
    assert _broken_bold("**纠正：**学习笔记") == ["**纠正：**学习笔记"]
    assert _broken_bold("**纠正**：学习笔记，**你将看到什么。** 一个 **29 个**（见下）") == []
    assert _broken_bold("一个**（注）**") != []


# The sync tool itself, on small notebooks.


def _nb(*cells: tuple[str, str, str]) -> nbformat.NotebookNode:
    made = []
    for cid, kind, source in cells:
        cell = nbformat.v4.new_markdown_cell(source) if kind == "md" else nbformat.v4.new_code_cell(source)
        cell.id = cid
        made.append(cell)
    return nbformat.v4.new_notebook(cells=made, metadata={"kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"}})


def test_sync_copies_code_keeps_chinese_and_flags_changed_english() -> None:
    en = _nb(("c00", "md", "# 1. Title"), ("c01", "code", "x = 1"), ("c02", "md", "Two blocks."))
    zh = sync(en, None)
    assert [c.id for c in zh.cells] == ["c00", LANG_CELL_ID, "c01", "c02"]
    assert stale_cells(en, zh) == ["c00", "c02"]  # new cells carry the English text
    zh.cells[0].source, zh.cells[3].source = "# 1. 标题", "两个块。"
    with pytest.raises(ValueError, match="'c01' is not a markdown cell"):
        mark_translated(en, zh, ["c00", "c01"])
    assert "kvlab" not in zh.cells[0].metadata  # a refused call changes nothing
    mark_translated(en, zh, ["c00", "c02"])
    assert stale_cells(en, zh) == []
    assert zh.cells[3].metadata["kvlab"]["en_sha256"] == en_sha256("Two blocks.")

    en.cells[1].source = "x = 2"  # English code changed: the zh copy follows
    en.cells[2].source = "Three blocks."  # English prose changed: the translation is stale
    en.cells.append(nbformat.v4.new_markdown_cell("## Exercises"))
    en.cells[-1].id = "c03"
    again = sync(en, zh)
    assert [c.source for c in again.cells if c.cell_type == "code"][1] == "x = 2"
    assert again.cells[3].source == "两个块。"  # kept, but flagged
    assert stale_cells(en, again) == ["c02", "c03"]
    assert zh.cells[2].source == "x = 1"  # sync returns a new notebook


def test_a_cell_without_chinese_cannot_be_marked_translated() -> None:
    en = _nb(("c00", "md", "# 1. Title"))
    zh = sync(en, None)
    with pytest.raises(ValueError, match="no Chinese text"):
        mark_translated(en, zh, ["c00"])
    assert has_chinese("两个块") and not has_chinese("block_id 12")
    assert ZH_DIR == NOTEBOOK_DIR / "zh"
