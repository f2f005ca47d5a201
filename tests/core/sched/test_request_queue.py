"""The waiting queue (vLLM's RequestQueue interface, FCFS): exact orders after each operation."""

from __future__ import annotations

import pytest

from kvlab.core.request import Request, SamplingParams
from kvlab.core.sched import (
    FCFSRequestQueue,
    RequestQueue,
    SchedulingPolicy,
    create_request_queue,
)


def reqs(*ids: str) -> list[Request]:
    return [Request(rid, [1, 2, 3], SamplingParams(), None) for rid in ids]


def ids(queue: RequestQueue) -> list[str]:
    return [r.request_id for r in queue]


def test_fcfs_add_peek_pop_prepend():
    queue = create_request_queue(SchedulingPolicy.FCFS)
    assert isinstance(queue, FCFSRequestQueue) and isinstance(queue, RequestQueue)
    assert not queue and len(queue) == 0
    a, b, c = reqs("a", "b", "c")
    for r in (a, b, c):
        queue.add_request(r)
    assert ids(queue) == ["a", "b", "c"] and len(queue) == 3 and queue
    assert queue.peek_request() is a and queue[0] is a and ids(queue) == ["a", "b", "c"]
    assert queue.pop_request() is a and ids(queue) == ["b", "c"]
    queue.prepend_request(a)  # a preempted request is admitted next
    assert ids(queue) == ["a", "b", "c"]


def test_fcfs_prepend_requests_reverses_like_extendleft():
    queue = create_request_queue(SchedulingPolicy.FCFS)
    a, b, c, d = reqs("a", "b", "c", "d")
    queue.add_request(d)
    other = create_request_queue(SchedulingPolicy.FCFS)
    for r in (a, b, c):
        other.add_request(r)
    queue.prepend_requests(other)
    assert ids(queue) == ["c", "b", "a", "d"]


def test_fcfs_remove_keeps_order_and_ignores_strangers():
    queue = create_request_queue(SchedulingPolicy.FCFS)
    a, b, c, d, stranger = reqs("a", "b", "c", "d", "x")
    for r in (a, b, c, d):
        queue.add_request(r)
    queue.remove_requests([c, a, stranger])
    assert ids(queue) == ["b", "d"]
    queue.remove_request(d)
    assert ids(queue) == ["b"]
    with pytest.raises(ValueError):
        queue.remove_request(stranger)
    assert ids(queue) == ["b"]


def test_fcfs_empty_queue_errors():
    queue = create_request_queue(SchedulingPolicy.FCFS)
    with pytest.raises(IndexError, match="peek from an empty queue"):
        queue.peek_request()
    with pytest.raises(IndexError):
        queue.pop_request()


def test_only_fcfs_is_implemented():
    with pytest.raises(ValueError, match="'priority' is not a valid SchedulingPolicy"):
        SchedulingPolicy("priority")
    with pytest.raises(ValueError, match="kvlab implements only 'fcfs'"):
        create_request_queue("priority")  # type: ignore[arg-type]
