"""The scheduler's utils: remove_all, and the guards of the public entry points (clear errors,
nothing changed)."""

from __future__ import annotations

import pytest
from _sched_helpers import BLOCK_SIZE, FakeWorker, kv_config, make_request, make_scheduler

from kvlab.core.request import RequestStatus
from kvlab.core.sched import Scheduler, SchedulerConfig
from kvlab.core.sched.utils import remove_all


def queues(sched: Scheduler) -> tuple[list[str], list[str], list[str]]:
    return (
        [r.request_id for r in sched.waiting],
        [r.request_id for r in sched.running],
        sorted(sched.requests),
    )


def test_remove_all_one_in_place_several_new_list():
    lst = ["a", "b", "c", "b"]
    assert remove_all(lst, set()) is lst
    same = remove_all(lst, {"b"})
    assert same is lst and lst == ["a", "c", "b"]  # one item: its first occurrence, in place
    assert remove_all(lst, {"zz"}) == ["a", "c", "b"]  # absent: nothing happens
    out = remove_all(lst, {"a", "b"})
    assert out == ["c"] and lst == ["a", "c", "b"]  # several: a new list


def test_add_request_refuses_a_request_with_outputs():
    sched = make_scheduler()
    req = make_request("a", range(6))
    req.append_output_token_ids(7)
    with pytest.raises(ValueError, match=r"not fresh .*num_output_tokens 1\); allowed: status "
                                         r"WAITING with nothing computed or generated"):
        sched.add_request(req)
    assert queues(sched) == ([], [], [])


def test_finish_requests_guard_names_what_is_allowed():
    sched = make_scheduler()
    sched.add_request(make_request("a", range(6)))
    allowed = (r"\(FINISHED_STOPPED, FINISHED_LENGTH_CAPPED, FINISHED_ABORTED, FINISHED_IGNORED, "
               r"FINISHED_ERROR, FINISHED_REPETITION\)")
    message = rf"must be a FINISHED_\* status {allowed}, got <RequestStatus.RUNNING: 5>"
    with pytest.raises(ValueError, match=message):
        sched.finish_requests("a", RequestStatus.RUNNING)
    with pytest.raises(ValueError, match=r"got 'aborted'"):
        sched.finish_requests("a", "aborted")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"request_ids must be one id \(str\), an iterable of ids, "
                                        r"or None \(every request\), got int"):
        sched.finish_requests(5)  # type: ignore[arg-type]
    assert queues(sched) == (["a"], [], ["a"])
    assert sched.requests["a"].status == RequestStatus.WAITING
    # vLLM accepts the status as its int value too.
    assert sched.finish_requests("a", int(RequestStatus.FINISHED_ABORTED)) == ["a"]
    assert queues(sched) == ([], [], [])


def test_scheduler_init_guard():
    with pytest.raises(TypeError, match="kv_cache must be a KVCacheConfig or a KVCacheManager, "
                                        "got dict"):
        Scheduler({}, SchedulerConfig())  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="config must be a SchedulerConfig, got dict"):
        Scheduler(kv_config(8), {})  # type: ignore[arg-type]


def test_step_protocol_pending_step():
    sched = make_scheduler()
    worker = FakeWorker(BLOCK_SIZE)
    sched.add_request(make_request("a", range(6), max_tokens=3))
    assert sched.guard.pending_step is None
    out0 = sched.schedule()
    assert (out0.step, sched.guard.pending_step, sched.num_steps) == (0, 0, 1)
    with pytest.raises(RuntimeError, match=r"step 0 was scheduled but update_from_output was "
                                           r"not called for it"):
        sched.schedule()
    assert sched.num_steps == 1 and len(sched.step_log) == 1  # the refused call changed nothing
    sched.update_from_output(out0, worker.execute(out0))
    assert sched.guard.pending_step is None
    out1 = sched.schedule()
    with pytest.raises(ValueError, match=r"latest schedule\(\) \(step 1\), got step 0"):
        sched.update_from_output(out0, {})
    assert sched.guard.pending_step == 1 and sched.requests["a"].num_output_tokens == 1
    sched.update_from_output(out1, worker.execute(out1))
    assert sched.requests["a"].num_output_tokens == 2
