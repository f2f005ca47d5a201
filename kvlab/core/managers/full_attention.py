"""Managers whose layers read every token: full attention, its attention-sink variant, and
cross attention (which reads every encoder token but never shares them).

Mirrors: vllm/v1/core/single_type_kv_cache_manager.py::{FullAttentionManager,
SinkFullAttentionManager, CrossAttentionManager}
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from typing import TYPE_CHECKING

from kvlab.core.kv_cache_interface import (
    ChunkedLocalAttentionSpec,
    CrossAttentionSpec,
    FullAttentionSpec,
    KVCacheSpec,
    SinkFullAttentionSpec,
)
from kvlab.core.managers.base import SingleTypeKVCacheManager, direct_lookup

if TYPE_CHECKING:
    from kvlab.core.block_pool import BlockPool
    from kvlab.core.kv_cache_utils import BlockHashList, KVCacheBlock
    from kvlab.core.request import Request

__all__ = ["CrossAttentionManager", "FullAttentionManager", "SinkFullAttentionManager"]


def _pop_last(computed_blocks: tuple[list[KVCacheBlock], ...]) -> None:
    for computed in computed_blocks:
        computed.pop()


def _align_down(
    computed_blocks: tuple[list[KVCacheBlock], ...], block_size: int, alignment_tokens: int
) -> None:
    """Pop blocks until the hit length is a multiple of ``alignment_tokens`` tokens."""
    while (
        block_size != alignment_tokens
        and len(computed_blocks[0]) * block_size % alignment_tokens != 0
    ):
        _pop_last(computed_blocks)


class FullAttentionManager(SingleTypeKVCacheManager):
    """Full (causal) attention: every block stays until the request finishes.

    A hit is the longest run of cached blocks from the start: the hashes are chained, so the
    first miss ends the prefix. Also used for chunked local attention inside a hybrid model's
    lookup (hence ``find_longest_cache_hit`` accepts ChunkedLocalAttentionSpec).

    Mirrors: vllm/v1/core/single_type_kv_cache_manager.py::FullAttentionManager
    """

    @classmethod
    def find_longest_cache_hit(
        cls,
        block_hashes: BlockHashList,
        max_length: int,
        kv_cache_group_ids: list[int],
        block_pool: BlockPool,
        kv_cache_spec: KVCacheSpec,
        use_eagle: bool,
        alignment_tokens: int,
        dcp_world_size: int = 1,
        pcp_world_size: int = 1,
    ) -> tuple[list[KVCacheBlock], ...]:
        """Scan left to right; stop at the first block some group lacks.

        With EAGLE the last hit block is dropped; then blocks are dropped until the hit is a
        multiple of ``alignment_tokens``. See the base class for Args/Returns.

        Mirrors: vllm/v1/core/single_type_kv_cache_manager.py::FullAttentionManager.find_longest_cache_hit

        Raises:
            TypeError: ``kv_cache_spec`` is neither full nor chunked local attention.
        """
        if not isinstance(kv_cache_spec, (FullAttentionSpec, ChunkedLocalAttentionSpec)):
            raise TypeError(
                "FullAttentionManager serves FullAttentionSpec (and subclasses) and "
                f"ChunkedLocalAttentionSpec, not {type(kv_cache_spec).__name__}"
            )
        computed_blocks: tuple[list[KVCacheBlock], ...] = tuple([] for _ in kv_cache_group_ids)
        block_size = kv_cache_spec.block_size
        if dcp_world_size * pcp_world_size > 1:
            block_size *= dcp_world_size * pcp_world_size
        max_num_blocks = max_length // block_size
        direct = direct_lookup(block_pool, kv_cache_group_ids)
        if direct is not None:  # one group: the same lookups, without a call per block
            cache_get, suffix, group_id, rec = direct
            append = computed_blocks[0].append
            for block_hash in itertools.islice(block_hashes, max_num_blocks):
                cached = cache_get(block_hash + suffix)
                if cached is None:
                    if rec is not None:
                        rec.lookup(block_hash, group_id, -1)
                    break  # chained hashes: nothing after a miss can be cached
                if type(cached) is dict:
                    cached = next(iter(cached.values()))
                if rec is not None:
                    rec.lookup(block_hash, group_id, cached.block_id)
                append(cached)
        else:
            for block_hash in itertools.islice(block_hashes, max_num_blocks):
                cached_block = block_pool.get_cached_block(block_hash, kv_cache_group_ids)
                if not cached_block:
                    # Chained hashes: nothing after a miss can be cached for this prefix.
                    break
                for computed, cached in zip(computed_blocks, cached_block):
                    computed.append(cached)
        if use_eagle and computed_blocks[0]:
            _pop_last(computed_blocks)
        _align_down(computed_blocks, block_size, alignment_tokens)
        return computed_blocks

    def get_num_common_prefix_blocks(self, running_request_id: str) -> int:
        """Leading blocks of ``running_request_id`` whose ref_cnt equals the number of requests
        in ``req_to_blocks`` (i.e. every request holds them) (blocks).

        Mirrors: vllm/v1/core/single_type_kv_cache_manager.py::FullAttentionManager.get_num_common_prefix_blocks
        """
        blocks = self._req_blocks_for_update(running_request_id)
        num_requests = len(self.req_to_blocks)
        num_common_blocks = 0
        for block in blocks:
            if block.ref_cnt != num_requests:
                break
            num_common_blocks += 1
        return num_common_blocks


class SinkFullAttentionManager(FullAttentionManager):
    """Full attention plus ``sink_len`` sink tokens kept in blocks reserved at start-up.

    The sink blocks are taken off the free queue once (their ref_cnt stays 0, as in vLLM) and
    never belong to a request.

    Mirrors: vllm/v1/core/single_type_kv_cache_manager.py::SinkFullAttentionManager

    Raises:
        ValueError: ``sink_len`` is missing, not positive, or not a multiple of the block size.
    """

    def __init__(
        self,
        kv_cache_spec: SinkFullAttentionSpec,
        block_pool: BlockPool,
        enable_caching: bool,
        kv_cache_group_id: int,
        dcp_world_size: int = 1,
        pcp_world_size: int = 1,
    ) -> None:
        super().__init__(
            kv_cache_spec,
            block_pool,
            enable_caching,
            kv_cache_group_id,
            dcp_world_size,
            pcp_world_size,
        )
        sink_len = kv_cache_spec.sink_len
        if sink_len is None or sink_len <= 0 or sink_len % self.block_size != 0:
            raise ValueError(
                f"sink_len must be a positive multiple of the block size {self.block_size}, "
                f"got {sink_len!r}"
            )
        num_sink_block = sink_len // self.block_size
        self.sink_blocks = self.block_pool.free_block_queue.popleft_n(num_sink_block)


class CrossAttentionManager(SingleTypeKVCacheManager):
    """Cross attention of encoder-decoder models: one static allocation for the encoder tokens.

    Its blocks hold one request's encoder states, so they are never cached or shared.

    Mirrors: vllm/v1/core/single_type_kv_cache_manager.py::CrossAttentionManager
    """

    def allocate_new_computed_blocks(
        self,
        request_id: str,
        new_computed_blocks: Sequence[KVCacheBlock],
        num_local_computed_tokens: int,
        num_external_computed_tokens: int,
    ) -> None:
        """Nothing to add: cross attention never has prefix-cache hits.

        Raises:
            ValueError: ``new_computed_blocks`` is not empty.
        """
        if len(new_computed_blocks) != 0:
            raise ValueError(
                "cross-attention blocks are never cached: new_computed_blocks must be empty"
            )

    def cache_blocks(
        self, request: Request, num_tokens: int, alignment_tokens: int | None = None
    ) -> None:
        """Always raises: prefix caching is off for encoder-decoder models.

        Raises:
            ValueError: Always.
        """
        raise ValueError(
            "cache_blocks must not be called for cross attention: prefix caching is disabled"
        )

    def get_num_common_prefix_blocks(self, running_request_id: str) -> int:
        """Always 0: encoder states are per request."""
        return 0

    @classmethod
    def find_longest_cache_hit(
        cls,
        block_hashes: BlockHashList,
        max_length: int,
        kv_cache_group_ids: list[int],
        block_pool: BlockPool,
        kv_cache_spec: KVCacheSpec,
        use_eagle: bool,
        alignment_tokens: int,
        dcp_world_size: int = 1,
        pcp_world_size: int = 1,
    ) -> tuple[list[KVCacheBlock], ...]:
        """Not supported (vLLM raises NotImplementedError too).

        Raises:
            TypeError: ``kv_cache_spec`` is not a CrossAttentionSpec.
            NotImplementedError: Otherwise.
        """
        if not isinstance(kv_cache_spec, CrossAttentionSpec):
            raise TypeError(
                "CrossAttentionManager serves CrossAttentionSpec, "
                f"not {type(kv_cache_spec).__name__}"
            )
        raise NotImplementedError("CrossAttentionManager does not support prefix caching")
