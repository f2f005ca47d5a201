"""Grade submitted lab notebooks headless, for a class: one score table.

Each notebook runs top to bottom in a fresh kernel (nbclient; a cell that raises does not stop
the run), with two environment variables that ``kvlab.labs.check`` reads: ``KVLAB_LABS_RESULTS``
(a file each check call appends its result to, one JSON line) and ``KVLAB_LABS_TIME_LIMIT_S`` (the
time limit per scenario). So the grade is what the learner's own check cells computed, in their
own kernel, never parsed from printed text.

NOTE: a submission is code: run the grader as a user that can only read the submissions and
write the output (a container or a throwaway account), as with any autograder.

Examples:
    >>> table = grade_notebooks(["alice/lab01_free_queue.ipynb"])      # doctest: +SKIP
    >>> table["submissions"][0]["results"]["free_queue"]["scenarios_passed"]
    11
"""

from __future__ import annotations

import asyncio
import json
import os
import tempfile
from collections.abc import Iterable
from pathlib import Path
from typing import Any

__all__ = ["RESULTS_ENV", "TIME_LIMIT_ENV", "grade_notebook", "grade_notebooks", "result_record"]

RESULTS_ENV = "KVLAB_LABS_RESULTS"
"""A file path: every check() appends its result there as one JSON line."""
TIME_LIMIT_ENV = "KVLAB_LABS_TIME_LIMIT_S"
"""Seconds: the default time limit per scenario of check()."""


def result_record(result: Any) -> dict:
    """The JSON-ready summary of a LabResult (what the grader stores)."""
    div = result.divergence
    return {
        "lab": result.lab, "passed": result.passed, "status": result.status,
        "scenarios_passed": result.scenarios_passed, "scenarios_total": result.scenarios_total,
        "score": round(result.score, 4), "misconception": result.misconception, "seed": result.seed,
        "divergence": None if div is None else {
            "scenario": div.scenario, "step": div.step, "call": div.call, "field": div.field,
            "error": div.error},
        "message": result.message,
    }  # fmt: skip


def grade_notebook(path: Path, time_limit_s: float = 10.0, notebook_timeout_s: float = 600.0) -> dict:
    """Run one submission and collect its check results.

    Args:
        path: The submitted .ipynb.
        time_limit_s: Time limit per scenario (seconds).
        notebook_timeout_s: Time limit for the whole notebook (seconds).

    Returns:
        ``{"notebook", "results": {lab: record}, "errors": [cell errors], "status"}``; status is
        ``"ok"``, ``"timeout"`` or ``"unreadable"``.
    """
    import nbformat
    from nbclient import NotebookClient

    entry: dict[str, Any] = {"notebook": str(path), "results": {}, "errors": [], "status": "ok"}
    try:
        nb = nbformat.read(path, as_version=4)
    except Exception as exc:  # noqa: BLE001 - a broken submission is reported, not raised
        entry.update(status="unreadable", errors=[f"{type(exc).__name__}: {exc}"])
        return entry
    with tempfile.TemporaryDirectory(prefix="kvlab-grade-") as tmp:
        results = Path(tmp) / "results.jsonl"
        env = {RESULTS_ENV: str(results), TIME_LIMIT_ENV: str(time_limit_s)}
        old = {k: os.environ.get(k) for k in env}
        os.environ.update(env)
        client = NotebookClient(nb, timeout=notebook_timeout_s, kernel_name="python3", allow_errors=True,
                                resources={"metadata": {"path": tmp}})  # fmt: skip
        try:
            asyncio.run(asyncio.wait_for(client.async_execute(), notebook_timeout_s))
        except (asyncio.TimeoutError, TimeoutError, RuntimeError) as exc:
            entry["status"] = "timeout"
            entry["errors"].append(f"{type(exc).__name__}: {exc}")
        finally:
            for k, v in old.items():
                if v is None:
                    os.environ.pop(k, None)
                else:
                    os.environ[k] = v
        if results.exists():
            for line in results.read_text().splitlines():
                record = json.loads(line)
                entry["results"][record["lab"]] = record  # the last check of a lab counts
    for cell in nb.cells:
        for out in cell.get("outputs", []):
            if out.get("output_type") == "error":
                entry["errors"].append(f"{out.get('ename')}: {out.get('evalue')}")
    return entry


def grade_notebooks(paths: Iterable[str | Path], time_limit_s: float = 10.0,
                    notebook_timeout_s: float = 600.0) -> dict:
    """Grade several submissions: ``{"labs": [...], "submissions": [grade_notebook(...), ...]}``."""
    submissions = [grade_notebook(Path(p), time_limit_s, notebook_timeout_s) for p in paths]
    labs = sorted({lab for s in submissions for lab in s["results"]})
    return {"labs": labs, "time_limit_s": time_limit_s, "submissions": submissions}
