"""Keep the Chinese notebooks (``notebooks/zh/NN_*.ipynb``) in step with the English ones.

The English notebook is the one source of truth for code: a Chinese notebook has the English
notebook's cells, in the same order and with the same ids, plus one language cell
(:data:`LANG_CELL_ID`, right after the title) that makes kvlab render in Chinese. Its code cells
are copied verbatim from English; its markdown cells hold the Chinese prose, each recording in
``metadata.kvlab.en_sha256`` the hash of the English source it was translated from, so a test
fails as soon as the English prose changes after translation (tests/notebooks/test_zh_notebooks.py).

Usage (from the repository root)::

    .venv/bin/python tests/notebooks/zh_sync.py               # sync every zh notebook, report
    .venv/bin/python tests/notebooks/zh_sync.py 04 07         # only these
    .venv/bin/python tests/notebooks/zh_sync.py --new 05      # start notebooks/zh/05_*.ipynb
    .venv/bin/python tests/notebooks/zh_sync.py --translated 04 c03 c07   # c03, c07 now match English
    .venv/bin/python tests/notebooks/run_notebooks.py zh/04   # then execute (stores outputs)

A sync copies the English code cells, keeps the Chinese text of every markdown cell whose id is
still there, and lists the markdown cells that need (re)translation: new ones (they get the
English text for now) and ones whose English changed since they were translated (their current
English text is printed). Exit status 1 when anything needs translation.
"""

from __future__ import annotations

import argparse
import copy
import hashlib
import re
import sys
from pathlib import Path

import nbformat

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _nbrun import NOTEBOOK_DIR, notebook_paths

ZH_DIR = NOTEBOOK_DIR / "zh"
LANG_CELL_ID = "zh-lang"
"""Id of the one code cell a Chinese notebook has and its English notebook has not."""

LANG_CELL_SOURCE = """\
# 中文版：kvlab 的视图与说明文字以中文显示；以下代码单元与英文版逐字相同。
import os

os.environ["KVLAB_LANG"] = "zh"
if os.path.basename(os.getcwd()) == "zh":
    os.chdir("..")  # 与英文版在同一文件夹中运行，相对路径一致
"""

_CJK = re.compile(r"[\u4e00-\u9fff]")


def en_sha256(source: str) -> str:
    """The hash a translated cell records: sha256 of the English cell's source (hex)."""
    return hashlib.sha256(source.encode()).hexdigest()


def has_chinese(text: str) -> bool:
    """Whether ``text`` contains at least one CJK ideograph."""
    return _CJK.search(text) is not None


def zh_path(en_path: Path) -> Path:
    """notebooks/NN_x.ipynb -> notebooks/zh/NN_x.ipynb."""
    return ZH_DIR / en_path.name


def en_path(zh: Path) -> Path:
    """notebooks/zh/NN_x.ipynb -> notebooks/NN_x.ipynb."""
    return NOTEBOOK_DIR / zh.name


def zh_notebook_paths() -> list[Path]:
    """The Chinese notebooks there are, in course order."""
    return sorted(ZH_DIR.glob("[0-9][0-9]_*.ipynb"))


def lang_cell() -> nbformat.NotebookNode:
    cell = nbformat.v4.new_code_cell(LANG_CELL_SOURCE)
    cell.id = LANG_CELL_ID
    return cell


def stale_cells(en: nbformat.NotebookNode, zh: nbformat.NotebookNode) -> list[str]:
    """Ids of zh markdown cells not translated from the current English source."""
    by_id = {c.id: c for c in zh.cells}
    stale = []
    for cell in en.cells:
        if cell.cell_type != "markdown":
            continue
        mine = by_id.get(cell.id)
        if (
            mine is None
            or mine.cell_type != "markdown"
            or mine.metadata.get("kvlab", {}).get("en_sha256") != en_sha256(cell.source)
            or not has_chinese(mine.source)
        ):
            stale.append(cell.id)
    return stale


def sync(en: nbformat.NotebookNode, zh: nbformat.NotebookNode | None) -> nbformat.NotebookNode:
    """The zh notebook rebuilt on ``en``'s cells (see the module docstring); ``zh`` is unchanged.

    Code cells keep the zh notebook's outputs only where their source is unchanged (they are
    refreshed by executing the notebook anyway).
    """
    old = {c.id: c for c in (zh.cells if zh is not None else [])}
    cells = []
    for cell in en.cells:
        mine = old.get(cell.id)
        if cell.cell_type == "markdown":
            if mine is not None and mine.cell_type == "markdown":
                new = copy.deepcopy(mine)
            else:
                new = copy.deepcopy(cell)
                new.metadata.pop("kvlab", None)
        else:
            new = copy.deepcopy(cell)
            if mine is not None and mine.cell_type == "code" and mine.source == cell.source:
                new.outputs, new.execution_count = mine.outputs, mine.execution_count
            else:
                new.outputs, new.execution_count = [], None
        cells.append(new)
        if len(cells) == 1:  # the language cell goes right after the title
            lang = old.get(LANG_CELL_ID)
            cells.append(copy.deepcopy(lang) if lang is not None and lang.source == LANG_CELL_SOURCE
                         else lang_cell())  # fmt: skip
    out = copy.deepcopy(zh if zh is not None else en)
    out.cells = cells
    for key in ("kernelspec", "language_info"):
        if key in en.metadata:
            out.metadata[key] = copy.deepcopy(en.metadata[key])
    if zh is None:
        out.metadata.pop("kvlab", None)
        out.metadata.pop("widgets", None)
    out.metadata["language"] = "zh"
    return out


def mark_translated(en: nbformat.NotebookNode, zh: nbformat.NotebookNode, ids: list[str]) -> None:
    """Record that zh markdown cells ``ids`` are translations of the current English sources.

    Raises:
        ValueError: For an id that is not a markdown cell of both notebooks, or a cell with no
            Chinese text (nothing is changed then).
    """
    en_by_id = {c.id: c for c in en.cells if c.cell_type == "markdown"}
    zh_by_id = {c.id: c for c in zh.cells if c.cell_type == "markdown"}
    for cid in ids:
        if cid not in en_by_id or cid not in zh_by_id:
            raise ValueError(f"{cid!r} is not a markdown cell of both notebooks; "
                             f"markdown ids: {', '.join(en_by_id)}")  # fmt: skip
        if not has_chinese(zh_by_id[cid].source):
            raise ValueError(f"cell {cid!r} has no Chinese text yet: translate it first")
    for cid in ids:
        zh_by_id[cid].metadata.setdefault("kvlab", {})["en_sha256"] = en_sha256(en_by_id[cid].source)


def _select(numbers: list[str], paths: list[Path]) -> list[Path]:
    chosen = [p for p in paths if not numbers or p.name[:2] in numbers]
    if numbers and not chosen:
        raise SystemExit(f"no notebook matches {numbers}")
    return chosen


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("numbers", nargs="*", help="notebook numbers (NN); default: every zh notebook")
    parser.add_argument("--new", action="store_true", help="create the zh notebooks named that are missing")
    parser.add_argument("--translated", nargs="+", metavar=("NN", "ID"),
                        help="mark markdown cells ID of notebook NN as translated from the current English")  # fmt: skip
    args = parser.parse_args(argv)
    if args.translated:
        number, *ids = args.translated
        (path,) = _select([number], zh_notebook_paths())
        en, zh = nbformat.read(en_path(path), 4), nbformat.read(path, 4)
        mark_translated(en, zh, ids)
        nbformat.write(zh, path)
        print(f"{path.name}: marked {', '.join(ids)} as translated")
        return 0
    pool = notebook_paths() if args.new else [en_path(p) for p in zh_notebook_paths()]
    needs = 0
    for en_file in _select(args.numbers, pool):
        target = zh_path(en_file)
        en = nbformat.read(en_file, 4)
        zh = nbformat.read(target, 4) if target.exists() else None
        synced = sync(en, zh)
        if zh is None or nbformat.writes(synced) != nbformat.writes(zh):
            ZH_DIR.mkdir(exist_ok=True)
            nbformat.write(synced, target)
            print(f"{target.relative_to(NOTEBOOK_DIR.parent)}: synced; execute it: "
                  f".venv/bin/python tests/notebooks/run_notebooks.py zh/{target.name[:2]}")
        en_md = {c.id: c.source for c in en.cells if c.cell_type == "markdown"}
        for cid in stale_cells(en, synced):
            needs += 1
            print(f"  needs translation: {target.name} cell {cid}; the English now reads:")
            print("    " + en_md[cid].replace("\n", "\n    "))
    if needs:
        print(f"{needs} markdown cell(s) need translation; after translating, run "
              "zh_sync.py --translated NN ID ...")
    return 1 if needs else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
