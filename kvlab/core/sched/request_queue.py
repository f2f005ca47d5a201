"""The waiting queue of the scheduler, behind vLLM's RequestQueue interface.

Mirrors: vllm/v1/core/sched/request_queue.py (SchedulingPolicy, RequestQueue,
FCFSRequestQueue, create_request_queue). ``Scheduler.waiting`` is one of these: the
scheduler looks at its head with ``peek_request``, admits with ``pop_request``, puts a
preempted request back at the front with ``prepend_request`` and drops aborted ones with
``remove_requests``.

Left out: PriorityRequestQueue and ``SchedulingPolicy.PRIORITY`` (kvlab schedules
first-come-first-served only: the priority policy decides who runs, not how the KV cache
works; ``SchedulerConfig(policy=...)`` refuses anything but "fcfs").

    >>> from kvlab.core.request import Request, SamplingParams
    >>> queue = create_request_queue(SchedulingPolicy.FCFS)
    >>> a, b = (Request(rid, [1, 2], SamplingParams(), None) for rid in "ab")
    >>> queue.add_request(a); queue.add_request(b)
    >>> queue.prepend_request(queue.pop_request())   # a preempted request goes back first
    >>> [r.request_id for r in queue], queue.peek_request().request_id
    (['a', 'b'], 'a')
"""

from __future__ import annotations

import enum
from abc import ABC, abstractmethod
from collections import deque
from collections.abc import Iterable, Iterator

from kvlab.core.request import Request

__all__ = ["FCFSRequestQueue", "RequestQueue", "SchedulingPolicy", "create_request_queue"]


class SchedulingPolicy(enum.Enum):
    """Who is admitted first. Mirrors: vllm/v1/core/sched/request_queue.py::SchedulingPolicy.

    NOTE: vLLM's PRIORITY member is left out (see the module docstring).
    """

    FCFS = "fcfs"


class RequestQueue(ABC):
    """What the scheduler needs from a waiting queue, whatever its order.

    Mirrors: vllm/v1/core/sched/request_queue.py::RequestQueue.
    """

    @abstractmethod
    def add_request(self, request: Request) -> None:
        """Queue ``request`` where the policy puts new arrivals."""

    @abstractmethod
    def pop_request(self) -> Request:
        """Take the request the policy admits next out of the queue."""

    @abstractmethod
    def peek_request(self) -> Request:
        """The request the policy admits next, left in the queue."""

    @abstractmethod
    def prepend_request(self, request: Request) -> None:
        """Put ``request`` back at the front (a preempted request)."""

    @abstractmethod
    def prepend_requests(self, requests: RequestQueue) -> None:
        """Put every request of ``requests`` at the front."""

    @abstractmethod
    def remove_request(self, request: Request) -> None:
        """Drop one request from the queue."""

    @abstractmethod
    def remove_requests(self, requests: Iterable[Request]) -> None:
        """Drop every request of ``requests`` from the queue."""

    @abstractmethod
    def __bool__(self) -> bool:
        """Whether any request waits."""

    @abstractmethod
    def __len__(self) -> int:
        """How many requests wait."""

    @abstractmethod
    def __iter__(self) -> Iterator[Request]:
        """The waiting requests, in the order the policy admits them."""


class FCFSRequestQueue(deque[Request], RequestQueue):
    """First come, first served: a deque whose left end is admitted next.

    Being a deque, it also answers ``queue[0]``, ``len(queue)`` and iteration as one.

    Mirrors: vllm/v1/core/sched/request_queue.py::FCFSRequestQueue.
    """

    def add_request(self, request: Request) -> None:
        """Append ``request`` at the back."""
        self.append(request)

    def pop_request(self) -> Request:
        """Remove and return the front request.

        Raises:
            IndexError: The queue is empty.
        """
        return self.popleft()

    def peek_request(self) -> Request:
        """The front request, left in place.

        Raises:
            IndexError: The queue is empty.
        """
        if not self:
            raise IndexError("peek from an empty queue")
        return self[0]

    def prepend_request(self, request: Request) -> None:
        """Put ``request`` at the front (admitted next)."""
        self.appendleft(request)

    def prepend_requests(self, requests: RequestQueue) -> None:
        """Put the requests of ``requests`` at the front, one by one.

        NOTE: each one goes in front of the previous, so they end up in reverse order (as
        vLLM's ``extendleft``).
        """
        self.extendleft(requests)

    def remove_request(self, request: Request) -> None:
        """Drop ``request``.

        Raises:
            ValueError: It is not in the queue.
        """
        self.remove(request)

    def remove_requests(self, requests: Iterable[Request]) -> None:
        """Drop every request of ``requests`` (ones not in the queue are ignored), keeping order."""
        requests_to_remove = set(requests)
        filtered_requests = [req for req in self if req not in requests_to_remove]
        # A deque cannot be filtered in place: empty it and refill it.
        self.clear()
        self.extend(filtered_requests)

    def __bool__(self) -> bool:
        return len(self) > 0

    def __len__(self) -> int:
        return super().__len__()

    def __iter__(self) -> Iterator[Request]:
        return super().__iter__()


def create_request_queue(policy: SchedulingPolicy) -> RequestQueue:
    """An empty waiting queue for ``policy``.

    Mirrors: vllm/v1/core/sched/request_queue.py::create_request_queue (FCFS only).

    Raises:
        ValueError: ``policy`` is not a SchedulingPolicy kvlab implements.
    """
    if policy == SchedulingPolicy.FCFS:
        return FCFSRequestQueue()
    raise ValueError(f"Unknown scheduling policy: {policy!r} (kvlab implements only 'fcfs')")
