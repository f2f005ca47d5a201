"""The radix cache's request life cycle: evict for an allocation, checkpoint, release.

Mirrors: sglang/srt/mem_cache/common.py of SGLang 0.5.23 (``evict_from_tree_cache``,
``checkpoint_kv_cache``, ``release_kv_cache``). Per request, SGLang's scheduler does::

    admit     match_prefix(prompt[:-1]); lock the last matched node
              evict_from_tree_cache(tree, need); alloc(need)    # evicts only the shortfall
    prefill   checkpoint_kv_cache: tree.checkpoint(req, up_to=prompt length)
    decode    evict_from_tree_cache(tree, 1); alloc(1)
    finish    release_kv_cache(checkpoint=True): checkpoint every token with KV, then free the
              slots the tree does not own and unlock
    retract   release_kv_cache(checkpoint=False): free the slots the tree does not own, unlock

Differs: no chunked prefill (``checkpoint_kv_cache`` takes the tokens to insert), no
``skip_radix_cache_insert``, sessions, Mamba or SWA state, and no ReqToTokenPool row to give
back (the row is ``req.kv_indices``).

Examples:
    >>> from kvlab.sglang.managers.schedule_batch import Req
    >>> from kvlab.sglang.mem_cache.allocator import TokenToKVPoolAllocator
    >>> from kvlab.sglang.mem_cache.radix_cache import RadixCache
    >>> tree = RadixCache(TokenToKVPoolAllocator(8))
    >>> req = Req("a", [1, 2, 3], last_node=tree.root_node)
    >>> req.kv_indices = tree.token_to_kv_pool_allocator.alloc(3)
    >>> checkpoint_kv_cache(req, tree, up_to=3); release_kv_cache(req, tree, checkpoint=True)
    >>> tree.evictable_size(), tree.token_to_kv_pool_allocator.available_size()
    (3, 5)
"""

from __future__ import annotations

from typing import Any

__all__ = ["checkpoint_kv_cache", "evict_from_tree_cache", "release_kv_cache"]


def evict_from_tree_cache(tree_cache: Any, num_tokens: int) -> int:
    """Evict from the tree until its pool can allocate ``num_tokens`` slots (or nothing is left).

    Mirrors: sglang/srt/mem_cache/common.py::evict_from_tree_cache, which hands over to the
    allocator's ``evict_to_free_tokens``: the tree is asked for the shortfall only.

    Args:
        tree_cache: A RadixCache.
        num_tokens: Slots about to be allocated (tokens), >= 0.

    Returns:
        Tokens evicted (tokens).

    Raises:
        ValueError: If num_tokens is negative or not an int.
    """
    return tree_cache.token_to_kv_pool_allocator.evict_to_free_tokens(tree_cache, num_tokens)


def checkpoint_kv_cache(req: Any, tree_cache: Any, up_to: int) -> None:
    """Publish the KV ``req`` has computed so far (its first ``up_to`` tokens) in the tree.

    Mirrors: sglang/srt/mem_cache/common.py::checkpoint_kv_cache (after an extend; SGLang takes
    ``up_to`` from ``req.extend_end``).

    Raises:
        ValueError: See ``RadixCache.checkpoint`` (nothing changed).
    """
    tree_cache.checkpoint(req, up_to=up_to)


def release_kv_cache(req: Any, tree_cache: Any, checkpoint: bool) -> None:
    """Give back ``req``'s slots; with ``checkpoint`` the tree first keeps all it can key.

    Mirrors: sglang/srt/mem_cache/common.py::release_kv_cache (page size 1, no speculative
    decoding: no over-allocated slots). A finished request checkpoints every token with KV;
    a retracted one (``checkpoint=False``) only frees its own slots, and the prefix it matched
    stays cached. Either way its lock is dropped and its row emptied.

    Args:
        req: The request (``kvlab.sglang.managers.schedule_batch.Req``).
        tree_cache: The RadixCache it was matched in.
        checkpoint: Insert the request's tokens into the tree first (a finished request).

    Raises:
        ValueError: If the request holds no lock in this tree (nothing changed).
    """
    if req.last_node is None:
        raise ValueError(f"release_kv_cache: request {req.rid!r} holds no lock (never matched, "
                         "or already released)")  # fmt: skip
    if checkpoint:
        tree_cache.checkpoint(req, up_to=len(req.kv_indices))
    tree_cache.token_to_kv_pool_allocator.free(req.kv_indices[req.cache_protected_len :])
    tree_cache.dec_lock_ref(req.last_node)
    req.last_node = None
    req.kv_indices = []
    req.cache_protected_len = 0
