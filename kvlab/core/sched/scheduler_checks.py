"""The Scheduler's set-up and input checks: reject bad input before anything changes.

vLLM asserts most of these (or trusts its engine front end to have checked them); kvlab
raises a TypeError / ValueError naming what was wrong and what is allowed.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from kvlab.core.kv_cache_interface import KVCacheConfig
from kvlab.core.kv_cache_manager import KVCacheManager
from kvlab.core.request import Request, RequestStatus
from kvlab.core.sched.config import SchedulerConfig

if TYPE_CHECKING:
    from kvlab.core.sched.output import SchedulerOutput
    from kvlab.core.sched.scheduler import Scheduler

__all__ = ["build_manager", "check_new_request", "check_update"]


def build_manager(
    kv_cache: KVCacheConfig | KVCacheManager,
    config: SchedulerConfig,
    hash_block_size: int | None,
    enable_kv_cache_events: bool,
) -> KVCacheManager:
    """The scheduler's KVCacheManager: ``kv_cache`` itself, or one built from a KVCacheConfig.

    Mirrors the KVCacheManager construction in vllm/v1/core/sched/scheduler.py::Scheduler.__init__
    (max_model_len, max_num_batched_tokens, enable_caching and log_stats from the config).

    Args:
        kv_cache: A KVCacheConfig or a KVCacheManager.
        config: The scheduler config.
        hash_block_size: Block-hash granularity (tokens); None -> the GCD of the groups'
            block sizes (one group: its block size), as resolve_kv_cache_block_sizes does.
        enable_kv_cache_events: Queue vLLM KV events in the block pool.

    Raises:
        TypeError: ``kv_cache`` is neither.
        ValueError: A given manager's max_model_len differs from the config's.
    """
    if isinstance(kv_cache, KVCacheManager):
        if kv_cache.max_model_len != config.max_model_len:
            raise ValueError(
                f"the KVCacheManager has max_model_len={kv_cache.max_model_len} but the "
                f"SchedulerConfig says {config.max_model_len}; they must agree"
            )
        return kv_cache
    if not isinstance(kv_cache, KVCacheConfig):
        raise TypeError(
            f"kv_cache must be a KVCacheConfig or a KVCacheManager, got {type(kv_cache).__name__}"
        )
    if hash_block_size is None:
        hash_block_size = math.gcd(*(g.kv_cache_spec.block_size for g in kv_cache.kv_cache_groups))
    return KVCacheManager(
        kv_cache_config=kv_cache,
        max_model_len=config.max_model_len,
        hash_block_size=hash_block_size,
        max_num_batched_tokens=config.max_num_batched_tokens,
        enable_caching=config.enable_prefix_caching,
        log_stats=config.log_stats,
        enable_kv_cache_events=enable_kv_cache_events,
    )


def check_new_request(scheduler: Scheduler, request: Request) -> None:
    """Raise unless ``request`` can join the waiting queue.

    Raises:
        TypeError: Not a Request.
        ValueError: Duplicate id, not fresh (status WAITING, nothing computed), no
            sampling params (pooling is left out), a prompt outside 1..max_model_len - 1 tokens,
            or, with prefix caching, block hashes that do not cover its full blocks.
    """
    if not isinstance(request, Request):
        raise TypeError(
            f"add_request needs a kvlab.core.request.Request, got {type(request).__name__}"
        )
    rid = request.request_id
    if rid in scheduler.requests:
        raise ValueError(f"request id {rid!r} is already in the scheduler")
    if request.status != RequestStatus.WAITING or request.num_computed_tokens != 0:
        raise ValueError(
            f"request {rid!r} is not fresh (status {request.status}, "
            f"num_computed_tokens {request.num_computed_tokens})"
        )
    if request.sampling_params is None:
        raise ValueError(f"request {rid!r} has no sampling_params (pooling requests are left out)")
    # NOTE: vLLM's input processor refuses a generation prompt of max_model_len tokens (no room
    # for an output token); let in, it would stall once chunked (running requests compute at
    # most max_model_len - 1 tokens).
    if not 0 < request.num_prompt_tokens < scheduler.max_model_len:
        raise ValueError(
            f"request {rid!r} has {request.num_prompt_tokens} prompt tokens; allowed "
            f"1..max_model_len - 1 = {scheduler.max_model_len - 1} (one output token must fit)"
        )
    manager = scheduler.kv_cache_manager
    if manager.enable_caching:
        expected = request.num_tokens // manager.block_pool.hash_block_size
        if len(request.block_hashes) != expected:
            raise ValueError(
                f"request {rid!r} has {len(request.block_hashes)} block hashes, needs {expected}: "
                "build it with block_hasher="
                f"get_request_block_hasher({manager.block_pool.hash_block_size}, hash_fn)"
            )


def check_update(
    scheduler: Scheduler, scheduler_output: SchedulerOutput, sampled: Mapping[str, Sequence[int]]
) -> None:
    """Raise unless ``update_from_output(scheduler_output, sampled)`` is consistent.

    Raises:
        ValueError: The output is not the latest unconsumed one, tokens were sampled for a
            request not scheduled in it, or a token id is not an int >= 0.
    """
    pending = scheduler._pending_step
    if pending is None or scheduler_output.step != pending:
        raise ValueError(
            f"update_from_output needs the output of the latest schedule() (step {pending}), "
            f"got step {scheduler_output.step}"
        )
    for req_id, token_ids in sampled.items():
        if req_id not in scheduler_output.num_scheduled_tokens:
            raise ValueError(f"sampled tokens for {req_id!r}, which was not scheduled in this step")
        if any(isinstance(t, bool) or not isinstance(t, int) or t < 0 for t in token_ids):
            raise ValueError(f"token ids of {req_id!r} must be ints >= 0, got {list(token_ids)!r}")
