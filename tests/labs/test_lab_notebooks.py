"""The lab notebooks: their shape, nbgrader metadata, imports, and both runs (as shipped, reference injected)."""
from __future__ import annotations

import ast
import importlib
import re

import pytest

nbformat = pytest.importorskip("nbformat")
pytest.importorskip("nbclient")

from _labnb import (LAB_DIR, ZH_DIR, check_cells, comparable_outputs, execute_lab, lab_notebooks, solution_cells,
                    source_sha256)  # noqa: E402
from kvlab.labs import LABS, lab
from kvlab.labs.solutions import cell_sources, fill, skeleton

NOTEBOOKS = lab_notebooks()
ALLOWED = {"kvlab", "kvlab.core", "kvlab.labs", "kvlab.trace", "kvlab.viz", "kvlab.compare", "kvlab.sglang"}
VLLM_NAMED = {"kvlab.core.kv_cache_utils", "kvlab.core.block_pool", "kvlab.core.kv_cache_manager",
              "kvlab.core.kv_cache_interface", "kvlab.core.single_type_kv_cache_manager",
              "kvlab.core.kv_cache_coordinator", "kvlab.core.kv_events", "kvlab.core.request"}
"""A lab's skeleton imports what vLLM's file imports, from the module of the same name."""


def _read(path):
    return nbformat.read(path, as_version=4)


def test_every_lab_has_its_notebook() -> None:
    assert [p.stem for p in NOTEBOOKS] == [lab(name).notebook for name in LABS][: len(NOTEBOOKS)]
    assert len(NOTEBOOKS) == len(LABS)


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_shape_and_nbgrader_metadata(path) -> None:
    nb = _read(path)
    number = int(path.stem[3:5])
    assert nb.cells[0].source.startswith(f"# Lab {number}. ") and "**What you will build.**" in nb.cells[0].source
    assert "**Before this lab:**" in nb.cells[0].source
    assert nb.cells[-1].source.startswith("## What to try next")
    ids = [c.metadata["nbgrader"]["grade_id"] for c in nb.cells if "nbgrader" in c.metadata]
    assert len(ids) == len(nb.cells) and len(set(ids)) == len(ids), "every cell has a unique grade_id"
    solutions = solution_cells(nb)
    assert solutions and all(c.cell_type == "code" for c in solutions)
    for cell in solutions:
        regions = re.findall(r"### BEGIN SOLUTION\n(.*?)### END SOLUTION", cell.source, re.S)
        assert regions and len(regions) == cell.source.count("### BEGIN SOLUTION")
        assert all(re.fullmatch(r"\s*raise NotImplementedError\(\"\w+\"\)\s*", r) for r in regions), regions
    checks = check_cells(nb)
    assert checks and all(c.metadata["nbgrader"]["points"] > 0 and c.metadata["nbgrader"]["locked"] for c in checks)
    assert all(re.fullmatch(r'check\("\w+", .+\)', c.source) for c in checks)


def _lab_of(nb) -> str:
    return re.search(r'check\("(\w+)"', check_cells(nb)[0].source).group(1)


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_the_learners_cells_are_the_reference_with_its_bodies_removed(path) -> None:
    nb = _read(path)
    solved = cell_sources(_lab_of(nb))
    learner = [c.source for c in solution_cells(nb)]
    assert learner == [skeleton(s) for s in solved]
    assert [fill(mine, s) for mine, s in zip(learner, solved)] == solved


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_imports_only_public_names_and_never_the_solutions(path) -> None:
    code = "\n".join(c.source for c in _read(path).cells if c.cell_type == "code")
    assert "solutions" not in code and "sys.path" not in code
    for node in ast.walk(ast.parse(code)):
        if isinstance(node, ast.ImportFrom) and node.module.startswith("kvlab"):
            assert node.module in ALLOWED | VLLM_NAMED, node.module
            public = importlib.import_module(node.module).__all__
            assert all(a.name in public for a in node.names), [a.name for a in node.names]


def _check_as_shipped(stored, executed, zh: bool) -> None:
    outputs = [o for c in executed.cells if c.cell_type == "code" for o in c.outputs]
    assert all(o.output_type != "error" for o in outputs)
    for cell in check_cells(executed):
        text = "".join(o.get("data", {}).get("text/plain", "") for o in cell.outputs)
        assert ("个场景\n尚未实现：" if zh else "scenarios passed\nnot implemented yet: ") in text, text
        assert "Traceback" not in text
    assert stored.metadata["kvlab"]["source_sha256"] == source_sha256(stored), "run tests/labs/run_lab_notebooks.py"
    assert comparable_outputs(executed) == comparable_outputs(stored), "run tests/labs/run_lab_notebooks.py"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_runs_as_shipped_and_with_the_reference_in_english_and_chinese(path) -> None:
    """One kernel: the English notebook as shipped, its checks with the reference injected (all
    pass), then the Chinese twin as shipped (its cells rebind every name, its checks report in
    Chinese)."""
    twin = ZH_DIR / path.name
    executed, extra, _seconds, zh = execute_lab(path, twin=twin)
    _check_as_shipped(_read(path), executed, zh=False)
    _check_as_shipped(_read(twin), zh, zh=True)
    name = re.search(r'check\("(\w+)"', check_cells(executed)[0].source).group(1)
    for outs in extra[1:]:
        text = "".join(o.get("data", {}).get("text/plain", "") for o in outs)
        assert re.match(rf"✓ {name}: (\d+)/\1 scenarios passed", text), text
