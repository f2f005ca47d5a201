"""The BlockStored KV event of one cache_full_blocks call, with vLLM's field values.

Split from kvlab/core/block_pool.py (one concept: what a stored range looks like on vLLM's event
stream); BlockPool.cache_full_blocks queues it when KV events are on.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kvlab.core.block_hash import (
    BlockHashList,
    ExternalBlockHash,
    generate_block_hash_extra_keys,
    maybe_convert_block_hash,
)
from kvlab.core.kv_events import MEDIUM_GPU, BlockStored

if TYPE_CHECKING:
    from kvlab.core.kv_cache_block import KVCacheBlock
    from kvlab.core.request import Request

__all__ = ["make_block_stored"]


def make_block_stored(
    request: Request,
    blocks: list[KVCacheBlock],
    block_hashes: BlockHashList,
    new_hashes: list[ExternalBlockHash] | None,
    num_cached_blocks: int,
    num_full_blocks: int,
    block_size: int,
    kv_cache_group_id: int,
    block_mask: list[bool] | None,
) -> BlockStored:
    """The BlockStored event of one BlockPool.cache_full_blocks call (vLLM's field values).

    Mirrors: the event built inside vllm/v1/core/block_pool.py::BlockPool.cache_full_blocks.

    Args:
        request: The request whose blocks were cached.
        blocks: All of the request's blocks in the group.
        block_hashes: The request's hashes at the group's block size.
        new_hashes: The stored blocks' hashes as vLLM publishes them (null/masked skipped).
        num_cached_blocks: Blocks cached before the call (blocks).
        num_full_blocks: Full blocks after the call (blocks).
        block_size: The group's block size (tokens).
        kv_cache_group_id: The group.
        block_mask: Per new full block, False for a skipped one (or None).

    Returns:
        The event (medium GPU).
    """
    parent_block_hash = (
        None
        if num_cached_blocks == 0
        else maybe_convert_block_hash(block_hashes[num_cached_blocks - 1])
    )
    # NOTE: extra keys per stored block (skipping null/masked ones, to match new_hashes);
    # the mm index restarts at 0 for the range, as in vLLM.
    extra_keys_list: list[tuple[Any, ...] | None] = []
    curr_mm_idx = 0
    for i in range(num_cached_blocks, num_full_blocks):
        if blocks[i].is_null or (
            block_mask is not None and not block_mask[i - num_cached_blocks]
        ):
            continue
        block_start = i * block_size
        extra_keys, curr_mm_idx = generate_block_hash_extra_keys(
            request, block_start, block_start + block_size, curr_mm_idx
        )
        extra_keys_list.append(extra_keys)
    lora = request.lora_request
    return BlockStored(
        block_hashes=new_hashes,
        parent_block_hash=parent_block_hash,
        token_ids=request.all_token_ids[
            num_cached_blocks * block_size : num_full_blocks * block_size
        ],
        block_size=block_size,
        lora_id=lora.adapter_id if lora else None,
        medium=MEDIUM_GPU,
        lora_name=lora.name if lora else None,
        extra_keys=extra_keys_list if extra_keys_list else None,
        group_idx=kv_cache_group_id,
    )
