"""The Chinese lab notebooks (notebooks/labs/zh/): the English code, Chinese prose, up to date.

Like the course's zh notebooks (tests/notebooks/zh_sync.py): same cells and ids plus the language
cell after the title, code verbatim, each markdown cell translated from the current English
(``metadata.kvlab.en_sha256``), the same headings and diagrams. Their execution is tested with the
English ones (test_lab_notebooks.py): the check cells report in Chinese.
"""
from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

nbformat = pytest.importorskip("nbformat")

from _labnb import LAB_DIR, lab_notebooks  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "notebooks"))
from zh_sync import LANG_CELL_ID, LANG_CELL_SOURCE, stale_cells  # noqa: E402

ZH = lab_notebooks(zh=True)
_FENCE = re.compile(r"```.*?```", re.S)
_HEADING = re.compile(r"^(#{1,6}) ", re.M)
_HALF_WIDTH_AFTER_HAN = re.compile(r"[\u4e00-\u9fff][,;:?!](?=\s|$)|[\u4e00-\u9fff]\. ")


def _pair(path: Path):
    return nbformat.read(LAB_DIR / path.name, as_version=4), nbformat.read(path, as_version=4)


def test_every_lab_notebook_has_its_chinese_twin() -> None:
    assert [p.name for p in ZH] == [p.name for p in lab_notebooks()]


@pytest.mark.parametrize("path", ZH, ids=[p.stem for p in ZH])
def test_code_is_the_english_code_and_prose_is_translated(path: Path) -> None:
    en, zh = _pair(path)
    assert [c.id for c in zh.cells] == [en.cells[0].id, LANG_CELL_ID, *[c.id for c in en.cells[1:]]]
    assert zh.cells[1].source == LANG_CELL_SOURCE and zh.cells[1].metadata["nbgrader"]["locked"]
    mine = [c for c in zh.cells if c.id != LANG_CELL_ID]
    for theirs, ours in zip(en.cells, mine, strict=True):
        assert ours.cell_type == theirs.cell_type
        if theirs.cell_type == "code":
            assert ours.source == theirs.source and ours.metadata["nbgrader"] == theirs.metadata["nbgrader"]
        else:
            assert _FENCE.findall(ours.source) == _FENCE.findall(theirs.source), ours.id
            assert _HEADING.findall(ours.source) == _HEADING.findall(theirs.source), ours.id
            prose = re.sub(r"```.*?```|`[^`]*`", "", ours.source, flags=re.S)
            assert _HALF_WIDTH_AFTER_HAN.findall(prose) == [], ours.id
    assert stale_cells(en, zh) == [], "retranslate the cells whose English changed"
    number = int(path.name[3:5])
    assert zh.cells[0].source.startswith(f"# 实验 {number}. ") and "**你将实现什么。**" in zh.cells[0].source
    assert zh.cells[-1].source.startswith("## 下一步可以试试")
