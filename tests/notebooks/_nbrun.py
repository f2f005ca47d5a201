"""Execute kvlab's notebooks with nbclient (shared by run_notebooks.py and the tests).

Not a test module. The notebooks are stored *with* their outputs (the tutorial site renders
them without a kernel), so every notebook carries ``metadata.kvlab.source_sha256``: the hash of
its cells' sources when it was last executed by ``run_notebooks.py``. A test compares it with
the current sources, so outputs can never silently go stale.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import re
import time
from pathlib import Path

import nbformat
from nbclient import NotebookClient

REPO = Path(__file__).resolve().parents[2]
NOTEBOOK_DIR = REPO / "notebooks"
KERNEL_NAME = "python3"
CELL_TIMEOUT_S = 240
"""Longest a single cell may run (seconds) before the execution fails."""
NOTEBOOK_TIMEOUT_S = 300
"""Longest a whole notebook may run (seconds) before the execution fails."""


def notebook_paths() -> list[Path]:
    """The numbered notebooks, in course order (``NN_name.ipynb``)."""
    return sorted(p for p in NOTEBOOK_DIR.glob("[0-9][0-9]_*.ipynb"))


def source_sha256(nb: nbformat.NotebookNode) -> str:
    """Hash of every cell's type and source, in order (outputs and metadata excluded)."""
    h = hashlib.sha256()
    for cell in nb.cells:
        h.update(json.dumps([cell.cell_type, cell.source]).encode())
    return h.hexdigest()


_SOLUTIONS = re.compile(r"<details>.*?</details>", re.S)
_PYTHON_BLOCK = re.compile(r"```python\n(.*?)```", re.S)


def solution_sources(nb: nbformat.NotebookNode) -> list[str]:
    """The Python blocks inside the ``<details>`` folds ("Show solutions") of the last cell."""
    folds = _SOLUTIONS.findall(nb.cells[-1].source)
    return [block for fold in folds for block in _PYTHON_BLOCK.findall(fold)]


def execute(
    path: Path, timeout_s: float = NOTEBOOK_TIMEOUT_S, with_solutions: bool = False
) -> tuple[nbformat.NotebookNode, float]:
    """Run a notebook top to bottom in a fresh kernel (cwd = its folder).

    Args:
        path: The .ipynb file.
        timeout_s: Limit for the whole notebook (seconds).
        with_solutions: Also run the exercise solutions (the Python blocks of the last cell's
            ``<details>`` folds) as extra code cells at the end; they are returned after the
            notebook's own cells (never stored).

    Returns:
        The executed notebook (outputs and widget state filled in) and its wall time (seconds).

    Raises:
        nbclient.exceptions.CellExecutionError: A cell raised.
        TimeoutError: The notebook ran longer than ``timeout_s``.
    """
    nb = nbformat.read(path, as_version=4)
    if with_solutions:
        nb.cells += [nbformat.v4.new_code_cell(src) for src in solution_sources(nb)]
    client = NotebookClient(
        nb,
        timeout=CELL_TIMEOUT_S,
        kernel_name=KERNEL_NAME,
        resources={"metadata": {"path": str(path.parent)}},
        record_timing=False,
        store_widget_state=True,
    )
    start = time.perf_counter()
    asyncio.run(asyncio.wait_for(client.async_execute(), timeout_s))
    nb.metadata.setdefault("kvlab", {})["source_sha256"] = source_sha256(nb)
    return nb, time.perf_counter() - start


VOLATILE = (
    (re.compile(r" at 0x[0-9a-f]+"), " at 0x…"),  # memory addresses in reprs
    # wall times, with the padding a width format adds ("{:6.1f} ms": " 554.7 ms" vs "1261.7 ms")
    (re.compile(r"[ \t]*\b\d+(?:\.\d+)?(?:e-?\d+)? ?(ms|µs|s)\b"), r" <time> \1"),
)
"""What may differ between two executions of a notebook (pattern, replacement); all else must not."""

_WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"


def _normalise_text(text: str | list[str]) -> str:
    text = "".join(text) if isinstance(text, list) else text
    for pattern, replacement in VOLATILE:
        text = pattern.sub(replacement, text)
    return text


def comparable_outputs(nb: nbformat.NotebookNode) -> list[list[dict]]:
    """Each code cell's outputs with only what is volatile normalised.

    Kept: output types, stream names and texts, every MIME bundle (text/plain, text/html, ...),
    errors. Normalised: widget model ids (a fresh uuid per run), memory addresses in reprs, and
    wall times printed as a number followed by ms, µs or s (see :data:`VOLATILE`). Dropped:
    per-output metadata and execution counts (checked elsewhere).
    """
    cells = []
    for cell in nb.cells:
        if cell.cell_type != "code":
            continue
        outputs = []
        for out in cell.outputs:
            item: dict = {"output_type": out.output_type}
            if out.output_type == "stream":
                text = "".join(out.text) if isinstance(out.text, list) else out.text
                last = outputs[-1] if outputs else None
                # NOTE: where the kernel splits a cell's stdout into stream outputs depends on
                # timing (a busy machine flushes mid-cell); Jupyter shows consecutive stream
                # outputs of one name as one text, and so do we.
                if last and last["output_type"] == "stream" and last["name"] == out.name:
                    last["text"] += text
                    continue
                item["name"], item["text"] = out.name, text
            elif out.output_type == "error":
                item["ename"], item["evalue"] = out.ename, out.evalue
            else:
                data = {}
                for mime, value in out.get("data", {}).items():
                    if mime == _WIDGET_VIEW:
                        value = {k: v for k, v in value.items() if k != "model_id"}
                    elif isinstance(value, (str, list)):
                        value = _normalise_text(value)
                    data[mime] = value
                item["data"] = data
            outputs.append(item)
        for item in outputs:
            if item["output_type"] == "stream":
                item["text"] = _normalise_text(item["text"])
        cells.append(outputs)
    return cells
