"""Notebook 10's exercises (the real model): hits for another block size, without prefix
caching, and a preemption in the engine."""

from __future__ import annotations

import functools
import os

from kvlab.core import (
    FullAttentionSpec,
    KVCacheConfig,
    KVCacheGroupSpec,
    KVCacheManager,
    Request,
    SamplingParams,
    get_request_block_hasher,
    init_none_hash,
    sha256,
)
from kvlab.course.check import Exercise, register


def warm_hit(block_size: int = 32, num_prompt_tokens: int = 140,
             enable_prefix_caching: bool = True) -> int:
    """Tokens the second run of one prompt hits after the first finished (tokens).

    The hit depends only on the prompt's token ids, so any ``num_prompt_tokens`` distinct ids
    give the engine's answer for a prompt of that length.
    """
    os.environ.setdefault("PYTHONHASHSEED", "0")
    init_none_hash(sha256)
    spec = FullAttentionSpec(block_size=block_size, num_kv_heads=3, head_size=64, dtype="float32")
    config = KVCacheConfig(64, [], [KVCacheGroupSpec(["model.layers"], spec)])
    manager = KVCacheManager(config, max_model_len=4096, hash_block_size=block_size,
                             enable_caching=enable_prefix_caching)  # fmt: skip
    hasher = get_request_block_hasher(block_size, sha256)
    prompt = list(range(num_prompt_tokens))
    hits = []
    for request_id in ("cold", "warm"):
        req = Request(request_id, prompt, SamplingParams(max_tokens=12), None, block_hasher=hasher)
        blocks, num_hit = manager.get_computed_blocks(req)
        manager.allocate_slots(req, num_prompt_tokens - num_hit, num_hit, blocks)
        req.num_computed_tokens = num_prompt_tokens
        manager.free(req)
        hits.append(num_hit)
    return hits[1]


@functools.lru_cache(maxsize=1)
def _model():
    from kvlab import Model

    return Model.from_pretrained(progress=False)


def preempted(num_gpu_blocks: int = 24, max_tokens: int = 40) -> list[str]:
    """Request ids the engine preempts for four 150-token prompts (SmolLM2, blocks of 16)."""
    return list(_preempted(num_gpu_blocks, max_tokens))


@functools.lru_cache(maxsize=8)
def _preempted(num_gpu_blocks: int, max_tokens: int) -> tuple[str, ...]:  # a run takes seconds
    from kvlab import LLM
    from kvlab import SamplingParams as EngineParams

    llm = LLM(_model(), num_gpu_blocks=num_gpu_blocks, block_size=16, max_num_seqs=4)
    llm.generate([[1000 * i + t for t in range(150)] for i in range(4)],
                 EngineParams(max_tokens=max_tokens))  # fmt: skip
    return tuple(rid for s in llm.step_stats for rid in s.preempted_req_ids)


register(Exercise(
    id="10.1",
    question="With LLM(model, num_gpu_blocks=32, block_size=32), how many of the 140 prompt "
    "tokens does the warm request hit?",
    solve=warm_hit,
    hint="only full blocks have a block_hash: how many full 32-token blocks are in 140 tokens, "
    "and does the num_tokens - 1 = 139 cap cut one more?",
    explain="4 full blocks of 32; the 12-token tail is the partial block, as with 16.",
    mistakes=((139, "the cap num_tokens - 1 is a bound, but only whole blocks hit."),
              (96, "the cap does not bind: 139 tokens still hold 4 full blocks.")),
))  # fmt: skip
register(Exercise(
    id="10.2",
    question="LLM(model, num_gpu_blocks=24, block_size=16, max_num_seqs=4) generates the four "
    "token-id prompts [[1000 * i + t for t in range(150)] for i in range(4)] with "
    "max_tokens=40. Which requests are preempted (ids from llm.step_stats, in order)?",
    solve=preempted,
    hint="a 150-token request holds 10 blocks and grows to 12; 23 blocks are usable. Collect "
    "s.preempted_req_ids over llm.step_stats.",
    explain="Two requests run; when both need their 12th block the pool is dry and the newest "
    "running one is preempted (recomputed later).",
    mistakes=(([], "look again: 2 x 12 blocks do not fit in 23."),
              (["req-0"], "vLLM preempts the newest running request, not the oldest.")),
))  # fmt: skip
register(Exercise(
    id="10.3",
    question="With LLM(..., enable_prefix_caching=False), how many tokens does the warm "
    "request hit?",
    solve=functools.partial(warm_hit, block_size=16, enable_prefix_caching=False),
    hint="without prefix caching no block is ever given a place in the cache.",
    explain="Nothing is cached, so every prompt is prefilled in full.",
    mistakes=((128, "128 is the hit with prefix caching on."),),
))  # fmt: skip
