"""``kvlab labs``: list, solve (an answer key) and grade (a class's score table), and strict mode."""
from __future__ import annotations

import json
import re
from pathlib import Path

import nbformat
import pytest
from click.testing import CliRunner

from _labnb import LAB_DIR, check_cells, solution_cells
from kvlab.cli import main
from kvlab.labs import LABS, LabNotPassed, check
from kvlab.labs.solutions import cell_sources

LAB01 = LAB_DIR / "lab01_free_queue.ipynb"


def test_list_names_every_lab_and_its_notebook() -> None:
    out = CliRunner().invoke(main, ["labs", "list"], env={"COLUMNS": "200"}).output
    for name in LABS:
        assert name in out
    assert "notebooks/labs/lab01_free_queue.ipynb" in out


def test_solve_fills_the_solution_regions_with_the_reference(tmp_path: Path) -> None:
    out = tmp_path / "key.ipynb"
    run = CliRunner().invoke(main, ["labs", "solve", str(LAB01), "-o", str(out)])
    assert run.exit_code == 0 and run.output == f"wrote {out}\n"
    solved = nbformat.read(out, as_version=4)
    assert [c.source for c in solution_cells(solved)] == cell_sources("free_queue")
    assert [c.source for c in check_cells(solved)] == ['check("free_queue", FreeKVCacheBlockQueue)']


def _submission(tmp_path: Path, name: str, edit) -> Path:
    nb = nbformat.read(LAB01, as_version=4)
    cell = solution_cells(nb)[0]
    cell.source = edit(cell_sources("free_queue")[0])
    path = tmp_path / f"{name}.ipynb"
    nbformat.write(nb, path)
    return path


def test_grade_writes_one_row_per_submission(tmp_path: Path) -> None:
    alice = _submission(tmp_path, "alice", lambda s: s)
    # bob links freed blocks at the head of the queue
    bob = _submission(tmp_path, "bob", lambda s: s.replace(
        "last_block = self.fake_free_list_tail.prev_free_block\n        assert",
        "last_block = self.fake_free_list_head\n        old_first = last_block.next_free_block\n        assert").replace(
        "        last_block.next_free_block = self.fake_free_list_tail\n        self.fake_free_list_tail.prev_free_block = last_block\n        self.num_free_blocks += len(blocks)",
        "        last_block.next_free_block = old_first\n        old_first.prev_free_block = last_block\n        self.num_free_blocks += len(blocks)"))
    out = tmp_path / "scores" / "class.json"
    run = CliRunner().invoke(main, ["labs", "grade", str(alice), str(bob), "--json", str(out), "--time-limit", "5"],
                             env={"COLUMNS": "200"})
    assert run.exit_code == 0, run.output
    table = json.loads(out.read_text())
    assert table["labs"] == ["free_queue"] and table["time_limit_s"] == 5.0
    a, b = (s["results"]["free_queue"] for s in table["submissions"])
    assert (a["passed"], a["scenarios_passed"], a["scenarios_total"]) == (True, 11, 11)
    assert (b["passed"], b["status"], b["misconception"]) == (False, "diverged", "free_queue.append_at_head")
    assert b["divergence"]["field"] == "free queue" and b["divergence"]["call"].startswith("append_n(")
    assert re.search(r"│ free_queue │ 11/11 +│ passed", run.output), run.output
    assert re.search(r"│ free_queue │ 0/11 +│ diverged │ free_queue.append_at_head", run.output)
    assert "free_queue.append_at_head" in run.output


def test_grade_refuses_a_missing_file() -> None:
    run = CliRunner().invoke(main, ["labs", "grade", "nowhere.ipynb"])
    assert run.exit_code == 2 and "does not exist" in run.output


def test_strict_mode_raises_a_clean_report(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KVLAB_LABS_STRICT", "1")
    with pytest.raises(LabNotPassed) as info:
        check("free_queue", type("Q", (), {}))
    assert info.value._render_traceback_() == str(info.value.result).splitlines()
    assert info.value.result.status == "invalid"


def test_results_are_appended_for_a_grader(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from kvlab.core import FreeKVCacheBlockQueue

    results = tmp_path / "r.jsonl"
    monkeypatch.setenv("KVLAB_LABS_RESULTS", str(results))
    monkeypatch.setenv("KVLAB_LABS_TIME_LIMIT_S", "3")
    check("free_queue", FreeKVCacheBlockQueue, seed=2)
    record = json.loads(results.read_text())
    assert record["lab"] == "free_queue" and record["passed"] and record["seed"] == 2
