"""The scheduler's helpers: stop checks, list removal, finish reasons, and its guards.

Mirrors: vllm/v1/core/sched/utils.py (check_stop, remove_all) and the finish-reason strings
of vllm/v1/engine (FinishReason). Left out: repetition detection (``check_sequence_repetition``:
a sampling feature, not a KV-cache one).

kvlab adds the guards of the Scheduler's public entry points (``guard_scheduler_init`` and
``SchedulerGuard``): each entry point calls one of them on its first line; bad input raises
a TypeError / ValueError / RuntimeError naming what was wrong and what is allowed, before
anything changes. vLLM asserts most of these, or trusts its engine front end to have
checked them. This module does not import the scheduler.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from contextlib import suppress
from typing import TYPE_CHECKING, Any, Protocol

from kvlab.core.kv_cache_interface import KVCacheConfig
from kvlab.core.kv_cache_manager import KVCacheManager
from kvlab.core.request import Request, RequestStatus
from kvlab.core.sched.config import SchedulerConfig

if TYPE_CHECKING:
    from kvlab.core.sched.output import SchedulerOutput

__all__ = [
    "FINISH_REASONS",
    "GuardedScheduler",
    "SchedulerGuard",
    "check_stop",
    "get_finished_reason",
    "guard_scheduler_init",
    "remove_all",
]

FINISH_REASONS: dict[RequestStatus, str] = {
    RequestStatus.FINISHED_STOPPED: "stop",
    RequestStatus.FINISHED_LENGTH_CAPPED: "length",
    RequestStatus.FINISHED_ABORTED: "abort",
    RequestStatus.FINISHED_IGNORED: "length",
    RequestStatus.FINISHED_ERROR: "error",
    RequestStatus.FINISHED_REPETITION: "repetition",
}
"""Finished status -> the OpenAI-style finish reason. Mirrors vLLM's _FINISHED_REASON_MAP."""


def get_finished_reason(status: RequestStatus) -> str | None:
    """The finish reason of ``status`` ("stop", "length", "abort", ...), None if not finished."""
    return FINISH_REASONS.get(status)


def remove_all(lst: list, items_to_remove: set) -> list:
    """``lst`` without the items of ``items_to_remove``.

    Mirrors: vllm/v1/core/sched/utils.py::remove_all. One item (the usual case) is removed in
    place; several give a new list, so callers must use the return value.
    """
    if not items_to_remove:
        return lst

    if len(items_to_remove) == 1:
        # The common case: one request finished or was aborted.
        item = next(iter(items_to_remove))
        with suppress(ValueError):
            lst.remove(item)
        return lst
    return [item for item in lst if item not in items_to_remove]


def check_stop(request: Request, max_model_len: int) -> bool:
    """Decide whether the token just appended ends the request; set its status if so.

    Order of the checks (as vLLM): fewer than ``min_tokens`` outputs never stops; then the
    eos token; then a stop token (recorded in ``stop_reason``); then the length caps
    (``num_tokens >= max_model_len`` or ``num_output_tokens >= max_tokens``).

    Mirrors: vllm/v1/core/sched/utils.py::check_stop. Reads ``eos_token_id``,
    ``stop_token_ids`` and ``min_tokens`` from ``request.sampling_params`` when present
    (None, none and 0 otherwise: kvlab's SamplingParams has only what the KV cache needs).
    Left out: repetition detection.

    Args:
        request: A request with sampling params and at least one output token.
        max_model_len: Longest sequence allowed (tokens).

    Returns:
        True if the request is now finished (status FINISHED_STOPPED or _LENGTH_CAPPED).
    """
    assert not request.pooling_params

    sampling_params: Any = request.sampling_params
    assert sampling_params is not None

    if request.num_output_tokens < (getattr(sampling_params, "min_tokens", 0) or 0):
        return False

    last_token_id = request.output_token_ids[-1]
    if last_token_id == getattr(sampling_params, "eos_token_id", None):
        request.status = RequestStatus.FINISHED_STOPPED
        return True

    if last_token_id in (getattr(sampling_params, "stop_token_ids", None) or ()):
        request.status = RequestStatus.FINISHED_STOPPED
        request.stop_reason = last_token_id
        return True
    if request.num_tokens >= max_model_len or request.num_output_tokens >= request.max_tokens:
        request.status = RequestStatus.FINISHED_LENGTH_CAPPED
        return True

    # NOTE: vLLM's repetition detection (sampling_params.repetition_detection) is left out.
    return False


# --------------------------------------------------------------------------- guards
def guard_scheduler_init(
    kv_cache: KVCacheConfig | KVCacheManager, config: SchedulerConfig, recorder: Any
) -> None:
    """Raise unless ``Scheduler(kv_cache, config, recorder)`` can be built.

    Raises:
        TypeError: ``config`` is not a SchedulerConfig, ``kv_cache`` is neither a
            KVCacheConfig nor a KVCacheManager, or ``recorder`` lacks ``mark_step``.
        ValueError: A given KVCacheManager's max_model_len differs from the config's.
    """
    if not isinstance(config, SchedulerConfig):
        raise TypeError(f"config must be a SchedulerConfig, got {type(config).__name__}")
    if recorder is not None and not callable(getattr(recorder, "mark_step", None)):
        raise TypeError("recorder must have a mark_step(step) method (kvlab.trace's Recorder has)")
    if isinstance(kv_cache, KVCacheManager):
        if kv_cache.max_model_len != config.max_model_len:
            raise ValueError(
                f"the KVCacheManager has max_model_len={kv_cache.max_model_len} but the "
                f"SchedulerConfig says {config.max_model_len}; they must agree"
            )
    elif not isinstance(kv_cache, KVCacheConfig):
        raise TypeError(
            f"kv_cache must be a KVCacheConfig or a KVCacheManager, got {type(kv_cache).__name__}"
        )


_FINISHED_STATUSES = tuple(status for status in RequestStatus if RequestStatus.is_finished(status))


def _valid_token_ids(token_ids: Iterable[Any]) -> bool:
    return all(not isinstance(t, bool) and isinstance(t, int) and t >= 0 for t in token_ids)


class GuardedScheduler(Protocol):
    """What SchedulerGuard reads of the scheduler it guards (public attributes only)."""

    requests: Mapping[str, Request]
    max_model_len: int
    kv_cache_manager: KVCacheManager


class SchedulerGuard:
    """The checks of one Scheduler's public entry points, and its step protocol.

    kvlab schedules synchronously: ``schedule()``, then ``update_from_output`` with that
    output, then the next ``schedule()``. The guard remembers which step waits for its
    update (``pending_step``); it is told when a step is scheduled (``step_scheduled``), and
    an accepted ``update_from_output`` closes it.

    Args:
        scheduler: The scheduler guarded; its ``requests``, ``max_model_len`` and
            ``kv_cache_manager`` (``enable_caching``, ``block_pool.hash_block_size``) are read at each
            check, never written.

    Attributes:
        pending_step: The step scheduled and not updated yet, or None.
    """

    def __init__(self, scheduler: GuardedScheduler) -> None:
        self.scheduler = scheduler
        self.pending_step: int | None = None

    def add_request(self, request: Request) -> None:
        """Raise unless ``request`` can join the waiting queue (constant time).

        Raises:
            TypeError: Not a Request.
            ValueError: Duplicate id, not fresh (status WAITING, nothing computed or
                generated), no
                sampling params (pooling is left out), a prompt outside 1..max_model_len - 1
                tokens, or, with prefix caching, block hashes that do not cover its full
                blocks.
        """
        if not isinstance(request, Request):
            raise TypeError(
                f"add_request needs a kvlab.core.request.Request, got {type(request).__name__}"
            )
        scheduler = self.scheduler
        rid = request.request_id
        if rid in scheduler.requests:
            raise ValueError(f"request id {rid!r} is already in the scheduler")
        if (
            request.status != RequestStatus.WAITING
            or request.num_computed_tokens != 0
            or request.num_output_tokens != 0
        ):
            raise ValueError(
                f"request {rid!r} is not fresh (status {request.status}, num_computed_tokens "
                f"{request.num_computed_tokens}, num_output_tokens {request.num_output_tokens}); "
                "allowed: status WAITING with nothing computed or generated"
            )
        if request.sampling_params is None:
            raise ValueError(
                f"request {rid!r} has no sampling_params (pooling requests are left out)"
            )
        # NOTE: vLLM's input processor refuses a generation prompt of max_model_len tokens (no
        # room for an output token); let in, it would stall once chunked (running requests
        # compute at most max_model_len - 1 tokens).
        max_model_len = scheduler.max_model_len
        if not 0 < request.num_prompt_tokens < max_model_len:
            raise ValueError(
                f"request {rid!r} has {request.num_prompt_tokens} prompt tokens; allowed "
                f"1..max_model_len - 1 = {max_model_len - 1} (one output token must fit)"
            )
        manager = scheduler.kv_cache_manager
        if manager.enable_caching:
            expected = request.num_tokens // manager.block_pool.hash_block_size
            if len(request.block_hashes) != expected:
                raise ValueError(
                    f"request {rid!r} has {len(request.block_hashes)} block hashes, needs "
                    f"{expected}: build it with block_hasher="
                    f"get_request_block_hasher({manager.block_pool.hash_block_size}, hash_fn)"
                )

    def schedule(self) -> None:
        """Raise while the previous step waits for its ``update_from_output``.

        Raises:
            RuntimeError: A step is pending.
        """
        if self.pending_step is not None:
            raise RuntimeError(
                f"step {self.pending_step} was scheduled but update_from_output was not called "
                "for it (kvlab schedules synchronously: schedule, update_from_output, repeat)"
            )

    def step_scheduled(self, step: int) -> None:
        """Record that ``schedule()`` produced the output of ``step``."""
        self.pending_step = step

    def update_from_output(
        self, scheduler_output: SchedulerOutput, sampled_token_ids: Mapping[str, Sequence[int]]
    ) -> None:
        """Raise unless ``update_from_output(scheduler_output, sampled_token_ids)`` is consistent;
        on success the pending step is closed.

        Cost: one look-up per sampled request plus one test per token (the update itself
        walks the same lists).

        Raises:
            ValueError: The output is not the latest unconsumed one, tokens were sampled for a
                request not scheduled in it, or a token id is not an int >= 0.
        """
        pending = self.pending_step
        if pending is None or scheduler_output.step != pending:
            raise ValueError(
                f"update_from_output needs the output of the latest schedule() (step {pending}), "
                f"got step {scheduler_output.step}"
            )
        num_scheduled_tokens = scheduler_output.num_scheduled_tokens
        for req_id, token_ids in sampled_token_ids.items():
            if req_id not in num_scheduled_tokens:
                raise ValueError(
                    f"sampled tokens for {req_id!r}, which was not scheduled in this step"
                )
            for token_id in token_ids:
                if type(token_id) is not int or token_id < 0:
                    # Not a plain int >= 0: the full check (int subclasses but bool pass).
                    if not _valid_token_ids(token_ids):
                        raise ValueError(
                            f"token ids of {req_id!r} must be ints >= 0, got {list(token_ids)!r}"
                        )
                    break
        self.pending_step = None

    def finish_requests(self, request_ids: Any, finished_status: RequestStatus) -> None:
        """Raise unless ``finished_status`` is a FINISHED_* status and ``request_ids`` is one
        id, an iterable of ids, or None.

        Raises:
            TypeError: ``request_ids`` is neither a str, an iterable nor None.
            ValueError: ``finished_status`` is not a finished status.
        """
        if finished_status not in _FINISHED_STATUSES:
            allowed = ", ".join(status.name for status in _FINISHED_STATUSES)
            raise ValueError(
                f"finished_status must be a FINISHED_* status ({allowed}), got {finished_status!r}"
            )
        if request_ids is not None and not isinstance(request_ids, (str, Iterable)):
            raise TypeError(
                "request_ids must be one id (str), an iterable of ids, or None (every request), "
                f"got {type(request_ids).__name__}"
            )
