"""Reference solutions of the labs: for instructors, never imported by the learner notebooks.

``reference(lab)`` returns what a learner should have written for ``lab`` (the class, the
function or the tuple of functions ``kvlab.labs.check`` takes). Each module holds one lab's
solution, written as the skeleton's bodies filled in, statement for statement as vLLM 0.22.1.
The tests run every lab notebook with these injected (every scenario passes); ``kvlab labs
solve`` writes a notebook with them filled in, for an instructor's answer key.
"""

from __future__ import annotations

import importlib
from typing import Any

__all__ = ["SOLUTION_MODULES", "reference"]

SOLUTION_MODULES = {
    "free_queue": "free_queue",
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
