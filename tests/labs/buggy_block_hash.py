"""Wrong block hashing, written as learners write it: one per catalogue entry.

Each ``solution_with(...)`` returns the three functions check("block_hash", ...) takes, the
reference's with one of them replaced.
"""
from __future__ import annotations

import kvlab.core.kv_cache_utils as kv_cache_utils
from kvlab.labs.solutions import block_hash as ref


def hasher_from(hash_block_tokens=ref.hash_block_tokens, extra_keys=ref.generate_block_hash_extra_keys,
                partial=False, rehash=False):
    def get_request_block_hasher(block_size, caching_hash_fn):
        def request_block_hasher(request):
            start = 0 if rehash else len(request.block_hashes) * block_size
            parent = None if rehash or not request.block_hashes else request.block_hashes[-1]
            out = []
            while start < request.num_tokens:
                end = start + block_size
                if end > request.num_tokens and not partial:
                    break
                extra, _ = extra_keys(request, start, end, 0)
                parent = hash_block_tokens(caching_hash_fn, parent, request.all_token_ids[start:end], extra)
                out.append(parent)
                start = end
            if partial and request.block_hashes and len(out) and request.num_tokens % block_size:
                pass
            return out
        return request_block_hasher
    return get_request_block_hasher


def three(hash_block_tokens=ref.hash_block_tokens, extra_keys=ref.generate_block_hash_extra_keys, **kw):
    return (hash_block_tokens, extra_keys, hasher_from(hash_block_tokens, extra_keys, **kw))


def _named(fn, name):
    fn.__name__ = name
    return fn


def no_chain_hash(hash_function, parent_block_hash, curr_block_token_ids, extra_keys=None):
    return hash_function((kv_cache_utils.NONE_HASH, tuple(curr_block_token_ids), extra_keys))


def none_parent_hash(hash_function, parent_block_hash, curr_block_token_ids, extra_keys=None):
    return hash_function((parent_block_hash, tuple(curr_block_token_ids), extra_keys))


def list_tokens_hash(hash_function, parent_block_hash, curr_block_token_ids, extra_keys=None):
    return hash_function((parent_block_hash or kv_cache_utils.NONE_HASH, list(curr_block_token_ids), extra_keys))


def python_hash(hash_function, parent_block_hash, curr_block_token_ids, extra_keys=None):
    return hash((parent_block_hash, tuple(curr_block_token_ids), extra_keys))


def no_extra_keys(request, start_token_idx, end_token_idx, start_mm_idx):
    return None, start_mm_idx


def salt_every_block(request, start_token_idx, end_token_idx, start_mm_idx):
    keys, idx = ref.generate_block_hash_extra_keys(request, start_token_idx, end_token_idx, start_mm_idx)
    if request.cache_salt and start_token_idx > 0:
        keys = (*(keys or ()), request.cache_salt)
    return keys, idx


def mm_absolute_offset(request, start_token_idx, end_token_idx, start_mm_idx):
    keys, idx = ref.generate_block_hash_extra_keys(request, start_token_idx, end_token_idx, start_mm_idx)
    if keys:
        keys = tuple((k[0], k[1] + start_token_idx) if isinstance(k, tuple) else k for k in keys)
    return keys, idx


BUGS = {
    "no_chain": three(_named(no_chain_hash, "hash_block_tokens")),
    "none_parent": three(_named(none_parent_hash, "hash_block_tokens")),
    "list_tokens": three(_named(list_tokens_hash, "hash_block_tokens")),
    "not_bytes": three(_named(python_hash, "hash_block_tokens")),
    "no_extra_keys": three(extra_keys=_named(no_extra_keys, "generate_block_hash_extra_keys")),
    "salt_every_block": three(extra_keys=_named(salt_every_block, "generate_block_hash_extra_keys")),
    "mm_absolute_offset": three(extra_keys=_named(mm_absolute_offset, "generate_block_hash_extra_keys")),
    "partial_block": three(partial=True),
    "rehash_all": three(rehash=True),
}
