"""Execute the lab notebooks (shared by run_lab_notebooks.py and the tests). Not a test module.

A lab notebook is stored with the outputs of its *as-shipped* run: every check cell says "not
implemented yet". One kernel run checks both sides: the notebook's own cells (compared with the
stored outputs), then, appended, a cell that puts the reference solution in place of the
learner's class (``kvlab.labs.solutions``, instructor-only) and the check cells again, which
must all pass.
"""

from __future__ import annotations

import asyncio
import sys
import time
from pathlib import Path

import nbformat
from nbclient import NotebookClient

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
LAB_DIR = REPO / "notebooks" / "labs"
ZH_DIR = LAB_DIR / "zh"
sys.path.insert(0, str(REPO / "tests" / "notebooks"))
from _nbrun import comparable_outputs, source_sha256  # noqa: E402

__all__ = ["LAB_DIR", "ZH_DIR", "check_cells", "comparable_outputs", "execute_lab", "lab_notebooks",
           "solution_cells", "source_sha256"]  # fmt: skip

TIMEOUT_S = 120


def lab_notebooks(zh: bool = False) -> list[Path]:
    """The lab notebooks (``labNN_*.ipynb``), in course order."""
    return sorted((ZH_DIR if zh else LAB_DIR).glob("lab[0-9][0-9]_*.ipynb"))


def _nbgrader(cell: nbformat.NotebookNode) -> dict:
    return cell.metadata.get("nbgrader", {})


def solution_cells(nb: nbformat.NotebookNode) -> list[nbformat.NotebookNode]:
    """The cells the learner writes in (nbgrader ``solution: true``)."""
    return [c for c in nb.cells if _nbgrader(c).get("solution")]


def check_cells(nb: nbformat.NotebookNode) -> list[nbformat.NotebookNode]:
    """The graded check cells (nbgrader ``grade: true``)."""
    return [c for c in nb.cells if _nbgrader(c).get("grade")]


def _lab_name(nb: nbformat.NotebookNode) -> str:
    import re

    return re.search(r'check\("(\w+)"', check_cells(nb)[0].source).group(1)


def _injection(nb: nbformat.NotebookNode) -> str:
    """Code that rebinds the learner's names to the reference solution."""
    lab = _lab_name(nb)
    return (
        "from kvlab.labs.solutions import reference as _reference\n"
        f"_solution = _reference({lab!r})\n"
        "for _part in (_solution if isinstance(_solution, tuple) else (_solution,)):\n"
        "    globals()[_part.__name__] = _part\n"
    )


def execute_lab(path: Path, with_reference: bool = True,
                twin: Path | None = None) -> tuple[nbformat.NotebookNode, list, float, nbformat.NotebookNode | None]:
    """Run a lab notebook as shipped, then (appended) with the reference solution injected.

    Args:
        path: The notebook (its folder is the kernel's working directory).
        with_reference: Also run the check cells with the reference solution in place.
        twin: A second notebook run *after* those, in the same kernel (the Chinese twin, whose
            code cells are the same: they rebind every name it defines), to save a kernel start.

    Returns:
        ``(the notebook with its as-shipped outputs, the appended cells' outputs, seconds,
        the twin with its outputs or None)``.
    """
    nb = nbformat.read(path, as_version=4)
    n = len(nb.cells)
    if with_reference:
        nb.cells.append(nbformat.v4.new_code_cell(_injection(nb)))
        nb.cells += [nbformat.v4.new_code_cell(c.source) for c in check_cells(nb)]
    m = len(nb.cells)
    other = nbformat.read(twin, as_version=4) if twin is not None else None
    if other is not None:
        nb.cells += other.cells
    client = NotebookClient(nb, timeout=TIMEOUT_S, kernel_name="python3",
                            resources={"metadata": {"path": str(path.parent)}},
                            record_timing=False, store_widget_state=True)  # fmt: skip
    start = time.perf_counter()
    asyncio.run(asyncio.wait_for(client.async_execute(), TIMEOUT_S))
    if other is not None:
        other.cells = nb.cells[m:]
        other.metadata.setdefault("kvlab", {})["source_sha256"] = source_sha256(other)
    extra = [c.outputs for c in nb.cells[n:m]]
    del nb.cells[n:]
    nb.metadata.setdefault("kvlab", {})["source_sha256"] = source_sha256(nb)
    return nb, extra, time.perf_counter() - start, other
