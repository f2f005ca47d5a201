"""Reference solution of lab ``block_hash``: the notebook's three cells, bodies written.

Mirrors: vllm/v1/core/kv_cache_utils.py::hash_block_tokens, generate_block_hash_extra_keys (with
_gen_mm_extra_hash_keys and _gen_lora_extra_hash_keys inlined; prompt embeddings left out),
get_request_block_hasher.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import kvlab.core.kv_cache_utils as kv_cache_utils
from kvlab.core import Request

# --- notebook cell ---
def hash_block_tokens(
    hash_function: Callable[[Any], bytes],
    parent_block_hash: bytes | None,
    curr_block_token_ids: Sequence[int],
    extra_keys: tuple[Any, ...] | None = None,
) -> bytes:
    """The hash of one full block, chained to its parent's.

    Mirrors: vllm/v1/core/kv_cache_utils.py::hash_block_tokens

    ``hash_function((parent, the block's token ids as a tuple, extra_keys))``, where the parent of
    the first block (``parent_block_hash`` None) is ``kv_cache_utils.NONE_HASH``.
    """
    ### BEGIN SOLUTION
    if not parent_block_hash:
        parent_block_hash = kv_cache_utils.NONE_HASH
    curr_block_token_ids_tuple = tuple(curr_block_token_ids)
    return hash_function((parent_block_hash, curr_block_token_ids_tuple, extra_keys))
    ### END SOLUTION


# --- notebook cell ---
def generate_block_hash_extra_keys(
    request: Request, start_token_idx: int, end_token_idx: int, start_mm_idx: int
) -> tuple[tuple[Any, ...] | None, int]:
    """The extra keys of the block of tokens [start_token_idx, end_token_idx), and the index of
    the multimodal item the next block starts its search from.

    Mirrors: vllm/v1/core/kv_cache_utils.py::generate_block_hash_extra_keys

    The keys, in this order: the LoRA adapter's name (``request.lora_request.lora_name``) if the
    request has one; for each multimodal item overlapping the block (``request.mm_features``,
    sorted by ``mm_position.offset``), ``(identifier, offset - start_token_idx)``; the
    ``cache_salt`` on the first block only. None when there is no key. ``start_mm_idx`` is the
    item to start from; -1 means the last item (a block completed by generated tokens can only
    overlap that one). Items entirely before the block are skipped; the search stops at an item
    that starts after the block or runs past its end.
    """
    ### BEGIN SOLUTION
    mm_extra_keys: list[Any] = []
    curr_mm_idx = start_mm_idx
    mm_features = request.mm_features
    if mm_features:
        last_pos = mm_features[-1].mm_position
        if last_pos.offset + last_pos.length > start_token_idx:
            if curr_mm_idx < 0:
                curr_mm_idx = len(mm_features) + curr_mm_idx
            while curr_mm_idx < len(mm_features):
                mm_feature = mm_features[curr_mm_idx]
                offset, length = mm_feature.mm_position.offset, mm_feature.mm_position.length
                if end_token_idx > offset:
                    if start_token_idx >= offset + length:
                        curr_mm_idx += 1
                        continue
                    mm_extra_keys.append((mm_feature.identifier, offset - start_token_idx))
                    if end_token_idx >= offset + length:
                        curr_mm_idx += 1
                    else:
                        break
                else:
                    break
    lora_extra_keys = [request.lora_request.lora_name] if request.lora_request else []
    cache_salt_keys = [request.cache_salt] if (start_token_idx == 0 and request.cache_salt) else []
    extra_keys = lora_extra_keys + mm_extra_keys + cache_salt_keys
    if not extra_keys:
        return None, curr_mm_idx
    return tuple(extra_keys), curr_mm_idx
    ### END SOLUTION


# --- notebook cell ---
def get_request_block_hasher(
    block_size: int, caching_hash_fn: Callable[[Any], bytes]
) -> Callable[[Request], list[bytes]]:
    """The function a Request calls, when tokens are appended, to hash its newly full blocks.

    Mirrors: vllm/v1/core/kv_cache_utils.py::get_request_block_hasher

    ``request_block_hasher(request)`` returns the hashes of the full blocks after the
    ``len(request.block_hashes)`` already hashed (the Request appends them), each chained to the
    one before (the first to ``request.block_hashes[-1]``, or to none); a partial block is never
    hashed. Blocks of the prompt start the multimodal search at item 0, later blocks at -1.
    """
    ### BEGIN SOLUTION
    def request_block_hasher(request: Request) -> list[bytes]:
        start_token_idx = len(request.block_hashes) * block_size
        num_tokens = request.num_tokens
        if start_token_idx + block_size > num_tokens:
            return []
        curr_mm_idx = 0
        if start_token_idx > 0:
            curr_mm_idx = -1
        prev_block_hash_value = request.block_hashes[-1] if request.block_hashes else None
        new_block_hashes = []
        while True:
            end_token_idx = start_token_idx + block_size
            if end_token_idx > num_tokens:
                break
            extra_keys, curr_mm_idx = generate_block_hash_extra_keys(
                request, start_token_idx, end_token_idx, curr_mm_idx)
            block_tokens = request.all_token_ids[start_token_idx:end_token_idx]
            block_hash = hash_block_tokens(caching_hash_fn, prev_block_hash_value, block_tokens, extra_keys)
            new_block_hashes.append(block_hash)
            start_token_idx += block_size
            prev_block_hash_value = block_hash
        return new_block_hashes

    return request_block_hasher
    ### END SOLUTION


SOLUTION = (hash_block_tokens, generate_block_hash_extra_keys, get_request_block_hasher)
