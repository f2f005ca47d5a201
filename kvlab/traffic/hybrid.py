"""Replay a sized model's pool through kvlab.core exactly, hybrid models included.

``kvlab.traffic.sizing`` gives a model's KVCacheConfig at a budget. With one group (dense, GQA,
MLA) the pool is a block count and the fast replays apply (``lru.py``, ``stack.py``). With
several groups (Gemma-3's sliding-window layers beside its full-attention layers; Jamba's Mamba
states beside its attention) peers approximate; kvlab runs vLLM's own code: the
``KVCacheManager`` built on that config, its ``HybridKVCacheCoordinator`` finding the longest
hit every group agrees on (the fixed point), the sliding-window manager freeing what leaves the
window, the Mamba manager keeping one state per block in "align" mode.

The sequence clock, one request at a time, but prefilled in chunks as vLLM's scheduler
prefills a prompt alone (``max_num_batched_tokens`` per step, 8,192 by default; in Mamba's
"align" mode split at blocks as vLLM's ``_mamba_block_aligned_split`` does, so the state at the
prompt's last full block is cached): ``get_computed_blocks``, then ``allocate_slots`` once per
chunk with ``num_computed_tokens`` advanced between chunks, so sliding-window blocks that fall
out of the window are freed during the prefill (as on a real server), then ``free``. A prompt
longer than ``max_model_len`` is refused before any lookup (vLLM's input check). A request
whose chunk finds no room even with the pool otherwise empty could never run (vLLM would
preempt it forever); it is freed, keeping what its earlier chunks evicted, and counted
``rejected`` (0 hit tokens). ``get_kv_cache_configs`` makes sure one ``max_model_len`` request
fits, so with a sized pool this needs a request within a block of ``max_model_len``.

Why hybrid hit rates collapse: a sliding-window group can only reuse a prefix whose last
``sliding_window`` tokens are still cached, and those blocks were freed early (during the
prefill that made them), so LRU evicts them long before the full-attention blocks of the same
prefix.

Examples:
    >>> from kvlab.traffic import prepare_blocks, read_mooncake_lines
    >>> from kvlab.traffic.sizing import load_model_config, size_kv_cache
    >>> s = size_kv_cache(load_model_config("gemma-3-12b"), 2**30, max_model_len=2048)
    >>> b = prepare_blocks(read_mooncake_lines([
    ...     '{"timestamp": 0, "input_length": 1100, "output_length": 1, "hash_ids": [0, 1, 2]}',
    ...     '{"timestamp": 1, "input_length": 1100, "output_length": 1, "hash_ids": [0, 1, 5]}']),
    ...     s.block_size)
    >>> replay_kv_cache_config(b, s.kv_cache_config).per_request_hit_tokens
    [0, 1024]
"""

from __future__ import annotations

from typing import Any

from kvlab.traffic.blocks import BlockedTraffic, ensure_none_hash, progress_iter
from kvlab.traffic.replay import EvictionCounter, ReplayResult, vllm_request

__all__ = ["replay_kv_cache_config"]


def replay_kv_cache_config(blocked: BlockedTraffic, kv_cache_config: Any,
                           max_num_batched_tokens: int = 8192, progress: bool | None = False,
                           stop_after: int | None = None,
                           max_model_len: int | None = None) -> ReplayResult:  # fmt: skip
    """Replay through a KVCacheManager built on ``kv_cache_config`` (see the module doc).

    Args:
        blocked: The traffic at the config's block size (``prepare_blocks``).
        kv_cache_config: kvlab.core KVCacheConfig (``KVCacheSizing.kv_cache_config``).
        max_num_batched_tokens: Prefill chunk (tokens).
        progress: tqdm bar: True always, None only on a terminal, False none.
        stop_after: Replay only the first ``stop_after`` requests (None = all).
        max_model_len: Prompts longer than this (tokens) are refused before any lookup
            (vLLM's input check; None = no limit).

    Returns:
        A ReplayResult (cache "vllm", clock "sequence", capacity_tokens = blocks x block size
        of one group).

    Raises:
        ValueError: If the traffic's block size is not the config's.
    """
    from kvlab.core import KVCacheManager, MambaSpec
    from kvlab.core.request import RequestStatus

    groups = kv_cache_config.kv_cache_groups
    bs = groups[0].kv_cache_spec.block_size
    if blocked.block_size != bs:
        raise ValueError(f"the traffic is at block size {blocked.block_size}, the config's "
                         f"is {bs}: prepare_blocks(requests, {bs})")  # fmt: skip
    chunk = max_num_batched_tokens
    align = any(isinstance(g.kv_cache_spec, MambaSpec) for g in groups)
    ensure_none_hash()
    counter = EvictionCounter()
    mgr = KVCacheManager(kv_cache_config, max_model_len=1 << 30, hash_block_size=bs,
                         metrics_collector=counter)  # fmt: skip
    n_req = len(blocked) if stop_after is None else min(stop_after, len(blocked))
    res = ReplayResult("vllm", (kv_cache_config.num_blocks - 1) // len(groups) * bs, bs,
                       "sequence")  # fmt: skip
    res.prompt_tokens = sum(r.num_prompt_tokens for r in blocked.requests[:n_req])
    for i in progress_iter(range(n_req), progress, desc="hybrid replay", unit="req"):
        if blocked.requests[i].num_prompt_tokens > (max_model_len or 1 << 62):
            res.rejected += 1
            res.per_request_hit_tokens.append(0)
            continue
        r = vllm_request(blocked.requests[i], blocked.block_hashes[i])
        mgr.new_step_starts()  # NOTE: each chunk is one scheduler step (Scheduler.schedule)
        blocks, hit = mgr.get_computed_blocks(r)
        done, new = hit, _split(min(chunk, r.num_tokens - hit), hit, r.num_tokens, bs, align)
        ok = mgr.allocate_slots(r, new, hit, blocks) is not None
        while ok:
            done += new
            r.num_computed_tokens = done
            if done >= r.num_tokens:
                break
            new = _split(min(chunk, r.num_tokens - done), done, r.num_tokens, bs, align)
            mgr.new_step_starts()
            ok = mgr.allocate_slots(r, new) is not None
        if not ok:
            res.rejected += 1
            hit = 0
        r.status = RequestStatus.FINISHED_LENGTH_CAPPED
        mgr.free(r)
        res.per_request_hit_tokens.append(hit)
    res.evicted_blocks = counter.num_evicted_blocks
    res.hit_tokens = sum(res.per_request_hit_tokens)
    return res


def _split(num_new_tokens: int, num_computed_tokens: int, num_tokens: int, block_size: int,
           align: bool) -> int:  # fmt: skip
    """A prefill chunk; Mamba "align" mode ends it on a block so its state can be cached.

    Mirrors: vllm/v1/core/sched/scheduler.py::Scheduler._mamba_block_aligned_split (prefill,
    no Eagle, no KV connector).
    """
    if not align:
        return num_new_tokens
    last_cache_position = num_tokens - num_tokens % block_size
    after = num_computed_tokens + num_new_tokens
    if after < last_cache_position:
        return num_new_tokens // block_size * block_size
    if num_computed_tokens < last_cache_position < after:
        return last_cache_position - num_computed_tokens
    return num_new_tokens
