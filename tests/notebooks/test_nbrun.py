"""The stored-vs-executed comparison normalises only what is volatile, and the solution folds."""

from __future__ import annotations

import pytest

nbformat = pytest.importorskip("nbformat")

from _nbrun import comparable_outputs, solution_sources  # noqa: E402


def _nb(text: str, data: dict | None = None) -> nbformat.NotebookNode:
    cell = nbformat.v4.new_code_cell("x")
    cell.outputs = [nbformat.v4.new_output("stream", name="stdout", text=text)]
    if data is not None:
        cell.outputs.append(nbformat.v4.new_output("display_data", data=data))
    return nbformat.v4.new_notebook(cells=[cell, nbformat.v4.new_markdown_cell("## Exercises")])


def test_only_addresses_widget_ids_and_wall_times_are_normalised() -> None:
    view = "application/vnd.jupyter.widget-view+json"
    a = _nb("late gets [325, 326]\nprefill step 336.0 ms, in 2.7 s\n",
            {"text/plain": "<TracePlayer object at 0x7f5c>", view: {"model_id": "aa", "version_major": 2}})
    b = _nb("late gets [325, 326]\nprefill step 12.5 ms, in 0.9 s\n",
            {"text/plain": "<TracePlayer object at 0x1234>", view: {"model_id": "bb", "version_major": 2}})
    assert comparable_outputs(a) == comparable_outputs(b)
    c = _nb("late gets [325, 327]\nprefill step 336.0 ms, in 2.7 s\n",
            {"text/plain": "<TracePlayer object at 0x7f5c>", view: {"model_id": "aa", "version_major": 2}})
    assert comparable_outputs(a) != comparable_outputs(c)  # a block id changed: a real diff
    d = _nb("late gets [325, 326]\nprefill step 336.0 ms, in 2.7 s\n",
            {"text/plain": "<TracePlayer object at 0x7f5c>", view: {"model_id": "aa", "version_major": 3}})
    assert comparable_outputs(a) != comparable_outputs(d)


def test_solution_sources_are_the_python_blocks_of_the_folds() -> None:
    nb = _nb("")
    nb.cells[-1].source = (
        "## Exercises\n\n```python\nnot_a_solution()\n```\n\n<details><summary>Show solutions"
        "</summary>\n\n```python\ncheck('01.1', 3)\n```\n\n</details>\n"
    )
    assert solution_sources(nb) == ["check('01.1', 3)\n"]


def test_a_stream_split_anywhere_compares_equal_to_the_whole() -> None:
    """A busy kernel may flush stdout mid-cell: the split is not part of what a cell prints."""
    whole = _nb("same prefix: (12, [1, 2, 3])\n8 shared: (8, [1, 2])\nin 2.7 s\n")
    split = _nb("same prefix: (12, [1, 2, 3])")
    split.cells[0].outputs += [
        nbformat.v4.new_output("stream", name="stdout", text="\n8 shared: (8, [1, 2])\nin 2"),
        nbformat.v4.new_output("stream", name="stdout", text=".7 s\n"),
    ]
    assert comparable_outputs(split) == comparable_outputs(whole)
    assert len(comparable_outputs(split)[0]) == 1
    other = _nb("same prefix: (12, [1, 2, 3])")
    other.cells[0].outputs.append(nbformat.v4.new_output("stream", name="stderr", text="\n8 shared"))
    assert comparable_outputs(other) != comparable_outputs(_nb("same prefix: (12, [1, 2, 3])\n8 shared"))
