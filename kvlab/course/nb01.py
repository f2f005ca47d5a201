"""Notebook 1's exercises (why paged KV): waste per block size, a refused batch, sizing SmolLM2."""

from __future__ import annotations

from kvlab.core import (
    FullAttentionSpec,
    KVCacheConfig,
    KVCacheGroupSpec,
    KVCacheManager,
    Request,
    SamplingParams,
    VllmConfig,
    get_num_blocks,
)
from kvlab.course.check import Exercise, register

BATCH = {"chat": 212, "code": 1187, "short": 9, "rag": 3050, "summary": 640, "greeting": 33}
"""Notebook 1's batch: request name -> num_tokens (prompt + output so far)."""


def paged_waste(block_size: int = 64) -> int:
    """Tokens the paged layout leaves unused in the last blocks of BATCH (tokens)."""
    return sum(-(-n // block_size) * block_size - n for n in BATCH.values())


def admitted(num_blocks: int = 200, block_size: int = 16) -> list[str]:
    """Requests of BATCH admitted, in order, by a waiting-queue loop as vLLM's scheduler runs it.

    A refused ``allocate_slots`` (None) stops admission: vLLM's scheduler ``break``s out of its
    waiting loop, so the refused request and every one behind it wait for the next step.
    """
    spec = FullAttentionSpec(block_size=block_size, num_kv_heads=3, head_size=64, dtype="float32")
    config = KVCacheConfig(num_blocks, [], [KVCacheGroupSpec(["all 30 layers"], spec)])
    manager = KVCacheManager(config, max_model_len=4096, hash_block_size=block_size,
                             enable_caching=False)
    names = []
    for i, (name, num_tokens) in enumerate(BATCH.items()):
        prompt = [1000 * (i + 1) + t for t in range(num_tokens)]
        req = Request(name, prompt, SamplingParams(max_tokens=16), None)
        if manager.allocate_slots(req, num_tokens) is None:
            break
        names.append(name)
    return names


def smollm2_num_blocks(budget_gib: float = 2) -> dict[str, int]:
    """SmolLM2-135M's pool (blocks of 16 tokens) for ``budget_gib`` GiB, float32 and bfloat16."""
    return {
        dtype: get_num_blocks(
            VllmConfig(), 30, int(budget_gib * 2**30),
            FullAttentionSpec(block_size=16, num_kv_heads=3, head_size=64, dtype=dtype).page_size_bytes,
        )
        for dtype in ("float32", "bfloat16")
    }  # fmt: skip


register(Exercise(
    id="01.1",
    question="With block_size = 64, how many tokens does the paged layout leave unused in the batch?",
    solve=paged_waste,
    hint="for each request, cdiv(num_tokens, block_size) * block_size - num_tokens, then sum.",
    explain="Each request wastes less than one block; larger blocks waste more.",
    mistakes=((6 * 63, "block_size - 1 is the worst case per request, not what this batch wastes."),),
))  # fmt: skip
register(Exercise(
    id="01.2",
    question="With a pool of num_blocks blocks (say 200), which requests are admitted, in order?",
    solve=admitted,
    hint="the null_block takes one block; the loop stops at the first refused request (None).",
    explain="vLLM's scheduler stops at the first waiting request it cannot allocate (FCFS).",
    mistakes=(
        (["chat", "code", "short", "summary", "greeting"],
         "a refused request does not let later ones jump the queue: the scheduler breaks."),
    ),
))  # fmt: skip
register(Exercise(
    id="01.3",
    question="How many 16-token blocks does a 2 GiB budget give SmolLM2-135M (30 layers, 3 KV "
    "heads of 64), in float32 and in bfloat16? Answer a dict {'float32': n, 'bfloat16': n}.",
    solve=smollm2_num_blocks,
    hint="available_memory // page_size_bytes // num_layers, with 2 * 2**30 bytes.",
    explain="Halving the dtype size doubles the blocks.",
    mistakes=(({"float32": 2912, "bfloat16": 2912}, "bfloat16 takes 2 bytes a value, float32 4."),),
))  # fmt: skip
