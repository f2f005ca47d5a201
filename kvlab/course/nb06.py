"""Notebook 6's exercises (sliding window and chunked local attention)."""

from __future__ import annotations

import os

from kvlab.core import (
    ChunkedLocalAttentionSpec,
    KVCacheConfig,
    KVCacheGroupSpec,
    KVCacheManager,
    Request,
    SamplingParams,
    SlidingWindowSpec,
    get_request_block_hasher,
    init_none_hash,
    sha256,
)
from kvlab.course.check import Exercise, register

BLOCK_SIZE = 4


def _manager(spec, num_blocks: int = 24) -> KVCacheManager:
    os.environ.setdefault("PYTHONHASHSEED", "0")
    init_none_hash(sha256)
    config = KVCacheConfig(num_blocks, [], [KVCacheGroupSpec(["layer0"], spec)])
    return KVCacheManager(config, max_model_len=256, hash_block_size=BLOCK_SIZE)


def _run(manager, request_id, prompt, num_decode_steps):
    """Notebook 6's ``run``: prefill, then decode; returns the request and its block lists.

    Returns None for the block lists if an allocate_slots was refused.
    """
    hasher = get_request_block_hasher(BLOCK_SIZE, sha256)
    req = Request(request_id, prompt, SamplingParams(max_tokens=64), None, block_hasher=hasher)
    if manager.allocate_slots(req, req.num_tokens) is None:
        return req, None
    req.num_computed_tokens = req.num_tokens
    history = [manager.get_block_ids(request_id)[0]]
    for step in range(num_decode_steps):
        req.append_output_token_ids(100 + step)
        if manager.allocate_slots(req, 1) is None:
            return req, None
        req.num_computed_tokens += 1
        history.append(manager.get_block_ids(request_id)[0])
    return req, history


def _sw_spec(sliding_window: int) -> SlidingWindowSpec:
    return SlidingWindowSpec(block_size=BLOCK_SIZE, num_kv_heads=1, head_size=1, dtype="float32",
                             sliding_window=sliding_window)  # fmt: skip


def max_decode_blocks(sliding_window: int = 5) -> int:
    """Most real (non-null) blocks request ``a`` holds after a decode step (blocks)."""
    _, history = _run(_manager(_sw_spec(sliding_window)), "a", list(range(12)), 10)
    return max(sum(b != 0 for b in ids) for ids in history[1:])


def hit_after_evicting(block_ids: tuple[int, ...] = (1, 4)) -> int:
    """b's sliding-window hit (tokens) after ``evict_blocks`` on ``block_ids``."""
    manager = _manager(_sw_spec(8))
    _run(manager, "a", list(range(12)), 10)
    manager.evict_blocks(set(block_ids))
    b = Request("b", list(range(12)) + [100 + t for t in range(8)] + [7, 7],
                SamplingParams(max_tokens=8), None,
                block_hasher=get_request_block_hasher(BLOCK_SIZE, sha256))  # fmt: skip
    return manager.get_computed_blocks(b)[1]


def chunked_local_hits(evict: tuple[int, ...] = (3,)) -> tuple[int, int]:
    """Hits (tokens) of a 16-token prompt equal to c's first 16 tokens: as is, then after
    ``evict_blocks`` on ``evict`` (chunked local attention, attention_chunk_size 8)."""
    spec = ChunkedLocalAttentionSpec(block_size=BLOCK_SIZE, num_kv_heads=1, head_size=1,
                                     dtype="float32", attention_chunk_size=8)  # fmt: skip
    manager = _manager(spec)
    _run(manager, "c", list(range(12)), 10)
    hasher = get_request_block_hasher(BLOCK_SIZE, sha256)
    prompt = list(range(12)) + [100, 101, 102, 103]
    before = manager.get_computed_blocks(Request("x", prompt, SamplingParams(max_tokens=8), None,
                                                 block_hasher=hasher))[1]  # fmt: skip
    manager.evict_blocks(set(evict))
    after = manager.get_computed_blocks(Request("y", prompt, SamplingParams(max_tokens=8), None,
                                                block_hasher=hasher))[1]  # fmt: skip
    return before, after


def smallest_pool(sliding_window: int = 8) -> int:
    """Smallest num_blocks (null_block included) with which ``a`` runs 12 + 10 tokens (blocks)."""
    num_blocks = 2
    while _run(_manager(_sw_spec(sliding_window), num_blocks), "a", list(range(12)), 10)[1] is None:
        num_blocks += 1
    return num_blocks


register(Exercise(
    id="06.1",
    question="With sliding_window = 5 (and then 9), how many real blocks does `a` hold at most "
    "after a decode step? Pass sliding_window=9 to check the second.",
    solve=max_decode_blocks,
    hint="run `a` with the new spec and count the non-zero ids of each decode step's list "
    "(the prefill's list is not a decode step); compare with cdiv(sliding_window - 1, 4) + 1.",
    explain="The decode bound cdiv(sliding_window - 1, block_size) + 1; the 12-token prefill "
    "held more, as a prefill chunk may.",
    mistakes=((3, "3 is what the 12-token prefill holds, before any token is computed."),),
))  # fmt: skip
register(Exercise(
    id="06.2",
    question="Evict blocks 1 and 4 before b's lookup: how many tokens does b hit?",
    solve=hit_after_evicting,
    hint="scan b's block hashes right to left for the first run of cdiv(7, 4) = 2 cached blocks.",
    explain="The run ending at block 4 is broken; the scan goes on leftwards and finds blocks "
    "2 and 3.",
    mistakes=((20, "block 4 is part of the run that gave the 20-token hit."),
              (0, "the scan does not stop at the first miss: it looks further left.")),
))  # fmt: skip
register(Exercise(
    id="06.3",
    question="Chunked local attention: a 16-token prompt equal to c's first 16 tokens hits how "
    "many tokens; and after evict_blocks({3}) (the block of tokens 8-11)? Answer (before, after).",
    solve=chunked_local_hits,
    hint="before: the num_tokens - 1 cap allows 15 tokens, so 3 full blocks; after: every block "
    "before the chunk that holds the hit end is a free null block, the rest must be cached.",
    explain="The cap binds first (12 of 16); after the eviction the chunk boundary at token 8 "
    "binds: tokens 0-7 need no cached block at all.",
    mistakes=(((16, 8), "the last token is never a hit: at most num_tokens - 1 = 15 tokens."),
              ((12, 0), "blocks before the chunk of the hit end are null blocks: no lookup needed.")),
))  # fmt: skip
register(Exercise(
    id="06.4",
    question="What is the smallest pool (num_blocks, null_block included) with which `a` "
    "(sliding_window 8) runs its 12-token prefill and 10 decode steps?",
    solve=smallest_pool,
    hint="allocate_slots frees the skipped blocks (remove_skipped_blocks) before it counts the "
    "free blocks; try shrinking num_blocks in build() until an allocate_slots returns None.",
    explain="Freeing first lets a decode step reuse the block that just left the window.",
    mistakes=((5, "the freed block is already back in the free queue when the need is counted."),),
))  # fmt: skip
