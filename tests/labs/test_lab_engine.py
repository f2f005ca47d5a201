"""The grading engine: whatever the learner's code does, check() reports it and never raises."""
from __future__ import annotations

import threading
import time

import pytest

import buggy_free_queue as bug
from kvlab.labs import LABS, LabResult, check, lab
from kvlab.labs.timelimit import ScenarioTimeout, run_limited


def test_run_limited_returns_values_errors_and_stops_endless_loops() -> None:
    assert run_limited(lambda: 6 * 7, 1.0).value == 42
    out = run_limited(lambda: {}["missing"], 1.0)
    assert isinstance(out.error, KeyError) and not out.timed_out

    def spin() -> None:
        while True:
            pass

    start = time.perf_counter()
    out = run_limited(spin, 0.3)
    assert out.timed_out and isinstance(out.error, ScenarioTimeout) and not out.stuck
    assert time.perf_counter() - start < 2.5
    assert not any(t.name == "kvlab-lab-scenario" and t.is_alive() for t in threading.enumerate())
    with pytest.raises(ValueError, match="limit_s must be > 0"):
        run_limited(lambda: 1, 0)


def test_an_endless_loop_is_stopped_and_reported_where_it_loops() -> None:
    result = check("free_queue", bug.EndlessWalk, seed=1, time_limit_s=0.5)
    assert result.status == "timeout" and not result.passed
    assert result.scenarios_passed == 0 and result.scenarios_total == 11
    assert result.divergence.field == "time limit" and result.divergence.op == "__init__"
    assert "in get_all_free_blocks" in result.divergence.where
    assert "did not finish within 0.5 s; the remaining scenarios were skipped" in result.message


def test_an_exception_is_reported_with_the_learners_line() -> None:
    result = check("free_queue", bug.RaisesInRemove, seed=1)
    assert result.status == "raised"
    div = result.divergence
    assert (div.op, div.args, div.error) == ("remove", [0], "KeyError: 0")
    assert div.where.endswith("in remove") and "buggy_free_queue.py" in div.where
    assert "your code raised KeyError: 0" in str(result)


def test_an_unwritten_body_reads_not_implemented_yet() -> None:
    result = check("free_queue", bug.NotWrittenYet, seed=1)
    assert result.status == "not implemented" and result.divergence is None
    assert result.message == ("not implemented yet: popleft still raises NotImplementedError; "
                              "write its body, then run this cell again")
    assert "Traceback" not in str(result)


@pytest.mark.parametrize("value, message", [
    (3, "this lab takes the class FreeKVCacheBlockQueue (with popleft, popleft_n, remove, append, append_n, "
        "get_all_free_blocks); got an object of type int (pass the class itself, not an instance)"),
    (len, "this lab takes the class FreeKVCacheBlockQueue (with popleft, popleft_n, remove, append, append_n, "
          "get_all_free_blocks); got the function len"),
    (type("Half", (), {"popleft": lambda self: 0}),
     "the class Half has no popleft_n, remove, append, append_n, get_all_free_blocks; the lab calls popleft, "
     "popleft_n, remove, append, append_n, get_all_free_blocks"),
])
def test_the_wrong_kind_of_implementation_gets_a_plain_sentence(value, message) -> None:
    result = check("free_queue", value)
    assert (result.status, result.message, result.scenarios_total) == ("invalid", message, 0)


def test_api_errors_name_what_is_allowed() -> None:
    with pytest.raises(ValueError, match="unknown lab 'queue'; the labs are: free_queue"):
        check("queue", object)
    with pytest.raises(ValueError, match="time_limit_s must be > 0 seconds"):
        check("free_queue", object, time_limit_s=0)
    assert LABS[0] == "free_queue" and lab("free_queue").notebook == "lab01_free_queue"


def test_a_result_is_falsy_when_failed_and_scores_its_scenarios() -> None:
    result = check("free_queue", bug.PopsFromTail, seed=3)
    assert isinstance(result, LabResult) and not result
    assert result.score == pytest.approx(result.scenarios_passed / 11)
    assert result.seed == 3
    again = check("free_queue", bug.PopsFromTail, seed=3)
    assert (again.divergence.scenario, again.divergence.step) == (result.divergence.scenario, result.divergence.step)


def test_kvlab_labs_imports_without_torch_or_widgets() -> None:
    import subprocess
    import sys

    code = (
        "import sys\n"
        "class _Block:\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name.split('.')[0] in ('torch', 'triton', 'ipywidgets', 'anywidget', 'nbclient'):\n"
        "            raise ImportError('blocked: ' + name)\n"
        "sys.meta_path.insert(0, _Block())\n"
        "import kvlab.labs\n"
        "from kvlab.core import FreeKVCacheBlockQueue\n"
        "r = kvlab.labs.check('free_queue', FreeKVCacheBlockQueue, seed=0)\n"
        "assert r.passed and 'torch' not in sys.modules\n"
        "assert all(hasattr(kvlab.labs, n) for n in kvlab.labs.__all__)\n"
        "print(r.scenarios_passed)\n"
    )
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip() == "11"


def test_a_notebook_cells_frame_is_your_cell_and_any_other_file_is_named() -> None:
    from kvlab.labs.engine import _learner_frame

    def raised(filename: str) -> BaseException:
        try:
            exec(compile("def remove(block):\n    raise KeyError(block)\nremove(0)\n", filename, "exec"), {})
        except KeyError as exc:
            return exc
        raise AssertionError("no exception")

    assert _learner_frame(raised("/tmp/ipykernel_4242/1234567.py")) == "your cell, line 2, in remove"
    # A learner's file in a clone under /tmp is named, not called a cell.
    assert _learner_frame(raised("/tmp/clone/lab.py")) == "/tmp/clone/lab.py, line 2, in remove"
