"""The tasks of a sweep: each an independent replay, named by a plain tuple (picklable).

=========================================================  ==================================
task                                                       result
=========================================================  ==================================
``("infinite", block_size, warmup, max_model_len)``        one ReplayResult ("infinite")
``("curve", block_size, cache, capacities, warmup, mml)``  one per capacity: "vllm" or
                                                           "nano" in one pass (``stack.py``),
                                                           "radix" (``radix.radix_curve``)
``("radix", block_size, capacity, warmup, mml)``           one (SGLang's radix tree)
``("belady", block_size, capacity, warmup, mml)``          one (``belady.py``)
``("timed", block_size, capacity, warmup, mml)``           one TimedResult (vLLM's scheduler)
``("policy", block_size, name, capacity, warmup, mml)``    one: libCacheSim's policy
                                                           (``peer_policies.py``)
``("model", config, budget, warmup, mml, block_size)``     one: the model sized at ``budget``
                                                           bytes, replayed as vLLM
``("fleet", block_size, replicas, routing, capacity,       one FleetResult
warmup, mml, seed)``
=========================================================  ==================================

``warmup`` is a request index: requests before it are replayed but not summed (``--warmup``);
``mml`` (max_model_len) refuses longer prompts, None for no limit.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from kvlab.traffic.replay import ReplayResult

__all__ = ["run", "window"]


def window(res: Any, requests: list, warmup: int) -> Any:
    """Sum ``res``'s hits and prompts from request ``warmup`` on (its per-request list)."""
    res.warmup_requests = warmup
    res.hit_tokens = sum(res.per_request_hit_tokens[warmup:])
    res.prompt_tokens = sum(r.num_prompt_tokens for r in requests[warmup:])
    return res


def _from_point(cache: str, cap: int, bs: int, point: Any) -> ReplayResult:
    res = ReplayResult(cache, cap, bs, "sequence", rejected=point.rejected,
                       evicted_blocks=point.evicted_blocks,
                       per_request_hit_tokens=point.per_request_hit_tokens)  # fmt: skip
    return res


def run(task: tuple, blocked_at: Callable[[int], Any]) -> list[Any]:
    """Run ``task``; ``blocked_at(block_size)`` gives the prepared traffic.

    Raises:
        ValueError: An unknown task kind (and what the replays raise).
    """
    from kvlab.traffic.replay import infinite_hits

    kind = task[0]
    if kind == "model":
        return [_run_model(task, blocked_at)]
    b = blocked_at(task[1])
    bs, reqs = b.block_size, b.requests
    if kind == "infinite":
        _, _, warmup, mml = task
        res = ReplayResult("infinite", bs, bs, "sequence",
                           per_request_hit_tokens=infinite_hits(b, mml))  # fmt: skip
        return [window(res, reqs, warmup)]
    if kind == "curve":
        from kvlab.traffic.stack import lru_curve

        _, _, cache, caps, warmup, mml = task
        if cache == "radix":
            from kvlab.traffic.radix import radix_curve

            points = radix_curve(b, caps, max_model_len=mml)
        else:
            points = lru_curve(b, caps, cap_hit=cache == "vllm", max_model_len=mml)
        return [window(_from_point(cache, c, bs, p), reqs, warmup)
                for c, p in zip(caps, points, strict=True)]  # fmt: skip
    if kind == "belady":
        from kvlab.traffic.belady import belady

        _, _, cap, warmup, mml = task
        p = belady(b, cap, max_model_len=mml)
        return [window(_from_point("belady", cap, bs, p), reqs, warmup)]
    if kind == "radix":
        from kvlab.traffic.radix import radix_curve

        _, _, cap, warmup, mml = task
        point = radix_curve(b, [cap], max_model_len=mml)[0]
        return [window(_from_point("radix", cap, bs, point), reqs, warmup)]
    if kind == "timed":
        from kvlab.traffic.timed import replay_timed

        _, _, cap, warmup, mml = task
        return [window(replay_timed(b, "vllm", cap), reqs, warmup)]
    if kind == "policy":
        from kvlab.traffic.peer_policies import replay_policy

        _, _, name, cap, warmup, mml = task
        return [window(replay_policy(b, name, cap, max_model_len=mml), reqs, warmup)]
    if kind == "fleet":
        from kvlab.traffic.fleet import replay_fleet

        _, _, replicas, routing, cap, warmup, mml, seed = task
        res = replay_fleet(b, replicas, routing, cap, seed=seed, max_model_len=mml,
                           warmup_requests=warmup)  # fmt: skip
        return [res]
    raise ValueError(f"unknown task {kind!r}")


def _run_model(task: tuple, blocked_at: Callable[[int], Any]) -> Any:
    from kvlab.traffic.hybrid import replay_kv_cache_config
    from kvlab.traffic.sizing import size_kv_cache
    from kvlab.traffic.stack import lru_curve

    _, cfg, budget, warmup, mml, block_size = task
    s = size_kv_cache(cfg, budget, max_model_len=mml, block_size=block_size)
    b = blocked_at(s.block_size)
    if s.is_hybrid:
        res = replay_kv_cache_config(b, s.kv_cache_config, max_model_len=s.max_model_len)
    else:
        cap = (s.num_gpu_blocks - 1) * s.block_size
        point = lru_curve(b, [cap], max_model_len=s.max_model_len)[0]
        res = _from_point("vllm", cap, s.block_size, point)
    res.sizing = s
    return window(res, b.requests, warmup)
