"""Reference solutions of the labs: for instructors, never imported by the learner notebooks.

``reference(lab)`` returns what a learner should have written for ``lab`` (the class, the
function or the tuple of functions ``kvlab.labs.check`` takes). Each module holds one lab's
solution as the notebook's own cells (after a ``# --- notebook cell ---`` line each) with every
``### BEGIN SOLUTION`` / ``### END SOLUTION`` region written, statement for statement as vLLM
0.22.1; :func:`skeleton` turns such a cell into the learner's (each region's body becomes
``raise NotImplementedError("<function>")``) and a test keeps the notebooks equal to that.
The tests run every lab notebook with these injected (every scenario passes); ``kvlab labs
solve`` writes a notebook with the regions filled in, an instructor's answer key.
"""

from __future__ import annotations

import importlib
import inspect
import re
from typing import Any

__all__ = ["SOLUTION_MODULES", "cell_sources", "fill", "reference", "skeleton"]

_CELL = "# --- notebook cell ---\n"
_REGION = re.compile(r"( *)### BEGIN SOLUTION\n(.*?)\1### END SOLUTION", re.S)

SOLUTION_MODULES = {
    "free_queue": "free_queue",
    "block_pool": "block_pool",
    "block_hash": "block_hash",
    "full_attention_hit": "full_attention_hit",
    "sliding_window_hit": "sliding_window_hit",
    "hybrid_fixed_point": "hybrid_fixed_point",
    "allocate_slots_layout": "allocate_slots_layout",
    "nano_block_manager": "nano_block_manager",
    "radix_cache": "radix_cache",
}
"""Lab name -> module of this package holding its solution."""


def reference(lab: str) -> Any:
    """The reference implementation of ``lab`` (what ``check(lab, ...)`` takes).

    Raises:
        ValueError: For a lab without a reference solution.
    """
    if lab not in SOLUTION_MODULES:
        raise ValueError(f"no reference solution for lab {lab!r}; known: {', '.join(SOLUTION_MODULES)}")
    module = importlib.import_module(f"kvlab.labs.solutions.{SOLUTION_MODULES[lab]}")
    return module.SOLUTION


def cell_sources(lab: str) -> list[str]:
    """The solved notebook cells of ``lab`` (regions written), in notebook order."""
    if lab not in SOLUTION_MODULES:
        raise ValueError(f"no reference solution for lab {lab!r}; known: {', '.join(SOLUTION_MODULES)}")
    module = importlib.import_module(f"kvlab.labs.solutions.{SOLUTION_MODULES[lab]}")
    parts = inspect.getsource(module).split(_CELL)[1:]
    return [re.split(r"\n\n\n(?=SOLUTION = |# --- )", p)[0].rstrip("\n") for p in parts]


def _function_at(source: str, pos: int) -> str:
    names = re.findall(r"def (\w+)\(", source[:pos])
    return names[-1] if names else "solution"


def skeleton(source: str) -> str:
    """``source`` with each solution region's body replaced by ``raise NotImplementedError("f")``."""
    def repl(m: re.Match) -> str:
        indent = m.group(1)
        name = _function_at(source, m.start())
        return f'{indent}### BEGIN SOLUTION\n{indent}raise NotImplementedError("{name}")\n{indent}### END SOLUTION'

    return _REGION.sub(repl, source)


def fill(learner_source: str, solved_source: str) -> str:
    """The learner's cell with its regions replaced by the solved cell's regions (in order).

    Raises:
        ValueError: When the two cells do not have the same number of regions.
    """
    solved = [m.group(0) for m in _REGION.finditer(solved_source)]
    found = list(_REGION.finditer(learner_source))
    if len(found) != len(solved):
        raise ValueError(f"the cell has {len(found)} solution regions; the reference has {len(solved)}")
    it = iter(solved)
    return _REGION.sub(lambda m: next(it), learner_source)
