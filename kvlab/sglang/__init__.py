"""kvlab.sglang: SGLang's radix-tree prefix cache and the life cycle its scheduler drives.

Mirrors SGLang 0.5.23 (``python/sglang/srt``, read from its wheel), file for file, with page size
1 and the LRU eviction policy (SGLang's defaults):

=====================================  =====================================================
kvlab file                             SGLang 0.5.23 file (what it holds)
=====================================  =====================================================
``mem_cache/radix_cache.py``           ``mem_cache/radix_cache.py``: TreeNode, RadixCache
                                       (match_prefix, insert, checkpoint, locks, evict)
``mem_cache/allocator/token.py``       ``mem_cache/allocator/token.py``: TokenToKVPoolAllocator,
                                       with ``allocator/base.py``'s evict_to_free_tokens
``mem_cache/common.py``                ``mem_cache/common.py``: evict_from_tree_cache,
                                       checkpoint_kv_cache, release_kv_cache
``managers/schedule_batch.py``         ``managers/schedule_batch.py``: Req and ReqKvInfo, reduced
``recording.py``                       none: the tree's changes as kvlab events (RadixRecorder)
=====================================  =====================================================

The life cycle is 0.5.23's: an allocation evicts only the shortfall (the allocator's
``evict_to_free_tokens``), and a request's KV enters the tree through ``checkpoint`` (insert,
split at the prompt's end, free duplicates, match again, move the lock), after its prefill and
when it finishes. The tree makes the same decisions as SGLang's own RadixCache on every
operation (match, insert with splits, lock counts, LRU leaf eviction): tests/sglang checks it,
and the life cycle, against SGLang 0.5.23 in lockstep where SGLang is importable.

Which SGLang cache this is: SGLang 0.5.23 serves ordinary models with ``UnifiedRadixCache``
(``mem_cache/unified_radix_cache.py``, whose tree core is in Rust by default:
``mem_cache/rust_tree_core``), and keeps ``RadixCache`` for sliding-window-only models
(``PureSWARadixCache`` extends it) and for simulation (``RadixCache.create_simulated``). kvlab
mirrors ``RadixCache``: the Python tree a reader can follow, with the same prefix-sharing rules.

What differs from SGLang: a logical clock instead of ``time.monotonic()`` (ties go to the lower
node id), no page size > 1, no host (hierarchical) cache, no EAGLE bigram keys, no extra_key /
cache_salt namespaces, no other eviction policy, no KV events or metrics; slots are Python ints
(SGLang: int64 tensors) and a request's row lives on the request. ``kvlab.viz.compare_radix``
draws the tree; ``kvlab.compare`` runs it next to vLLM V1 and nano-vllm (``RadixPolicy``).

Examples:
    >>> from kvlab.sglang import RadixCache, TokenToKVPoolAllocator
    >>> cache = RadixCache(TokenToKVPoolAllocator(16))
    >>> cache.insert((1, 2, 3, 4), cache.token_to_kv_pool_allocator.alloc(4))
    0
    >>> value, node = cache.match_prefix((1, 2, 9)); value
    [1, 2]
"""

from kvlab.sglang.managers.schedule_batch import Req
from kvlab.sglang.mem_cache.allocator import TokenToKVPoolAllocator
from kvlab.sglang.mem_cache.common import (
    checkpoint_kv_cache,
    evict_from_tree_cache,
    release_kv_cache,
)
from kvlab.sglang.mem_cache.radix_cache import RadixCache, TreeNode
from kvlab.sglang.recording import (
    NodeView,
    RadixEvent,
    RadixEventKind,
    RadixRecorder,
    RadixSnapshot,
    radix_snapshot,
)

__all__ = [
    "NodeView", "RadixCache", "RadixEvent", "RadixEventKind", "RadixRecorder", "RadixSnapshot",
    "Req", "TokenToKVPoolAllocator", "TreeNode", "checkpoint_kv_cache", "evict_from_tree_cache",
    "radix_snapshot", "release_kv_cache",
]  # fmt: skip
