"""Notebook 2's exercises (KVCacheBlock, the null block and the BlockPool)."""

from __future__ import annotations

import os

from kvlab.core import BlockPool, Request, SamplingParams, get_request_block_hasher, init_none_hash, sha256
from kvlab.course.check import Exercise, register


def _request_a() -> Request:
    os.environ.setdefault("PYTHONHASHSEED", "0")
    init_none_hash(sha256)
    return Request("a", list(range(10)), SamplingParams(max_tokens=4), None,
                   block_hasher=get_request_block_hasher(4, sha256))  # fmt: skip


def oversized_request(num_blocks: int = 8) -> tuple[str, int]:
    """(exception class name, free blocks afterwards) for get_new_blocks(num_blocks) on a fresh
    8-block pool (7 free)."""
    pool = BlockPool(num_gpu_blocks=8, enable_caching=True, hash_block_size=4)
    try:
        pool.get_new_blocks(num_blocks)
    except Exception as exc:  # noqa: BLE001 - the exercise asks which one
        return type(exc).__name__, pool.get_num_free_blocks()
    return "none", pool.get_num_free_blocks()


def cached_without_caching() -> int:
    """Entries in cached_block_hash_to_block after cache_full_blocks with enable_caching=False."""
    pool = BlockPool(num_gpu_blocks=8, enable_caching=False, hash_block_size=4)
    blocks = pool.get_new_blocks(3)
    pool.cache_full_blocks(_request_a(), blocks, num_cached_blocks=0, num_full_blocks=2,
                           block_size=4, kv_cache_group_id=0)  # fmt: skip
    return len(pool.cached_block_hash_to_block)


def queue_after_touching_free_block() -> list[int]:
    """Notebook 2's pool at its end (a and b freed, prefix cache reset), then touch([block 1])."""
    req_a = _request_a()
    pool = BlockPool(num_gpu_blocks=8, enable_caching=True, hash_block_size=4)
    a_blocks = pool.get_new_blocks(3)
    pool.cache_full_blocks(req_a, a_blocks, 0, 2, 4, 0)
    b_blocks = [pool.get_cached_block(h, [0])[0] for h in req_a.block_hashes[:2]]
    pool.touch(b_blocks)
    b_blocks += pool.get_new_blocks(1)
    pool.free_blocks(reversed(a_blocks))
    pool.free_blocks(reversed(b_blocks))
    pool.reset_prefix_cache()
    pool.touch([pool.blocks[1]])
    return [b.block_id for b in pool.free_block_queue.get_all_free_blocks()]


register(Exercise(
    id="02.1",
    question="pool.get_new_blocks(8) on the 8-block pool: which exception, and how many free "
    "blocks are left afterwards? Answer (exception class name, num_free_blocks).",
    solve=oversized_request,
    hint="only 7 blocks are free (block 0 is the null_block); a refused call changes nothing.",
    explain="The pool refuses with a ValueError and leaves every structure as it was.",
    mistakes=((("ValueError", 0), "a refused call takes no block: count the free ones again."),
              (("none", 0), "8 blocks cannot come from 7 free ones.")),
))  # fmt: skip
register(Exercise(
    id="02.2",
    question="With enable_caching=False, how many entries does cached_block_hash_to_block have "
    "after cache_full_blocks(req_a, a_blocks, 0, 2, 4, 0)?",
    solve=cached_without_caching,
    hint="read len(pool.cached_block_hash_to_block): BlockPool.cache_full_blocks does not look "
    "at enable_caching.",
    explain="The pool caches what it is told to; with caching off it is KVCacheManager that "
    "never calls cache_blocks (and get_new_blocks skips the eviction step).",
    mistakes=((0, "try it: the pool itself does not check enable_caching."),),
))  # fmt: skip
register(Exercise(
    id="02.3",
    question="At the end of the notebook, touch block 1 while it is free (pool.touch([pool.blocks[1]])): "
    "what is the free-queue order (block ids, head first) afterwards?",
    solve=queue_after_touching_free_block,
    hint="touch on a block with ref_cnt 0 removes it from the middle of the free queue; the "
    "others keep their order.",
    explain="Block 1 leaves the queue (ref_cnt 1); nothing else moves.",
    mistakes=(([5, 6, 7, 3, 4, 2, 1], "touch takes a free block out of the queue."),
              ([5, 6, 7, 3, 4, 2, 1, 1], "touch does not append: it removes.")),
))  # fmt: skip
