"""Shared builders for the tests of kvlab's KVCacheManager / coordinators / managers.

Not a test module (pytest collects only test_*.py). Imported by the test files next to it.
"""

from __future__ import annotations

from typing import Any

import pytest

from kvlab.core.block_pool import BlockPool
from kvlab.core.kv_cache_interface import (
    ChunkedLocalAttentionSpec,
    FullAttentionSpec,
    KVCacheConfig,
    KVCacheGroupSpec,
    MambaSpec,
    SlidingWindowSpec,
)
from kvlab.core.kv_cache_manager import KVCacheManager
from kvlab.core.kv_cache_utils import get_request_block_hasher, init_none_hash, sha256
from kvlab.core.request import Request
from kvlab.core.request_params import SamplingParams

DTYPE = "float32"


def full_spec(block_size: int, **kw: Any) -> FullAttentionSpec:
    return FullAttentionSpec(block_size=block_size, num_kv_heads=1, head_size=1, dtype=DTYPE, **kw)


def sw_spec(block_size: int, sliding_window: int) -> SlidingWindowSpec:
    return SlidingWindowSpec(
        block_size=block_size,
        num_kv_heads=1,
        head_size=1,
        dtype=DTYPE,
        sliding_window=sliding_window,
    )


def chunked_spec(block_size: int, chunk: int) -> ChunkedLocalAttentionSpec:
    return ChunkedLocalAttentionSpec(
        block_size=block_size, num_kv_heads=1, head_size=1, dtype=DTYPE, attention_chunk_size=chunk
    )


def mamba_spec(block_size: int, **kw: Any) -> MambaSpec:
    return MambaSpec(block_size=block_size, shapes=((1, 1),), dtypes=(DTYPE,), **kw)


def config(num_blocks: int, *specs: Any, eagle_groups: tuple[int, ...] = ()) -> KVCacheConfig:
    groups = [
        KVCacheGroupSpec([f"layer{i}"], spec, is_eagle_group=i in eagle_groups)
        for i, spec in enumerate(specs)
    ]
    return KVCacheConfig(num_blocks=num_blocks, kv_cache_tensors=[], kv_cache_groups=groups)


def manager(
    num_blocks: int, *specs: Any, hash_block_size: int | None = None, **kw: Any
) -> KVCacheManager:
    kw.setdefault("max_model_len", 8192)
    kw.setdefault("enable_caching", True)
    if hash_block_size is None:
        hash_block_size = min(s.block_size for s in specs)
    return KVCacheManager(config(num_blocks, *specs), hash_block_size=hash_block_size, **kw)


def make_request(
    request_id: str,
    token_ids: list[int],
    block_size: int,
    hash_fn: Any = sha256,
    **kw: Any,
) -> Request:
    """A generation request whose block hashes are computed at ``block_size``.

    Call ``init_none_hash(hash_fn)`` once per test first (each call draws a new NONE_HASH
    unless PYTHONHASHSEED is set), e.g. through the ``none_hash`` fixture.
    """
    sampling = SamplingParams(max_tokens=17, prompt_logprobs=kw.pop("prompt_logprobs", None))
    return Request(
        request_id=request_id,
        prompt_token_ids=list(token_ids),
        sampling_params=sampling,
        pooling_params=None,
        block_hasher=get_request_block_hasher(block_size, hash_fn),
        **kw,
    )


@pytest.fixture(autouse=True)
def none_hash() -> None:
    """Seed NONE_HASH (sha256) once per test; re-call init_none_hash to change hash_fn."""
    init_none_hash(sha256)


def pool_free_ids(mgr_or_pool: Any) -> list[int]:
    pool = mgr_or_pool if isinstance(mgr_or_pool, BlockPool) else mgr_or_pool.block_pool
    return [b.block_id for b in pool.free_block_queue.get_all_free_blocks()]


def check_invariants(mgr: KVCacheManager) -> None:
    """Structural invariants that must hold after every public call."""
    pool = mgr.block_pool
    free = pool.free_block_queue.get_all_free_blocks()
    assert len(free) == pool.get_num_free_blocks()
    free_ids = {b.block_id for b in free}
    holders: dict[int, int] = {}
    for m in mgr.coordinator.single_type_managers:
        for rid, blocks in m.req_to_blocks.items():
            assert m.num_cached_block.get(rid, 0) <= len(blocks) or not blocks
            for b in blocks:
                if not b.is_null:
                    holders[b.block_id] = holders.get(b.block_id, 0) + 1
    for b in pool.blocks:
        if b.is_null:
            assert b.block_id not in free_ids
            continue
        assert b.ref_cnt == holders.get(b.block_id, 0), (
            b.block_id,
            b.ref_cnt,
            holders.get(b.block_id),
        )
        assert (b.ref_cnt == 0) == (b.block_id in free_ids), b
        if b.block_hash is not None:
            cached = pool.cached_block_hash_to_block._cache.get(b.block_hash)
            assert cached is b or (isinstance(cached, dict) and cached.get(b.block_id) is b)


def _tuples(value: Any) -> Any:
    """Lists (nested too) as tuples."""
    return tuple(_tuples(v) for v in value) if isinstance(value, (list, tuple)) else value


class ListRecorder:
    """A recorder that stores every hook call as a tuple (name, *args), merged into events as
    kvlab.trace.Recorder does: consecutive touch / get_new_blocks reports (and req_blocks_add /
    req_blocks_null of one request and group) become one tuple, an empty req_blocks_add of an
    entry that exists and a req_free of one that does not are dropped, a call its guard
    rejected (begin_call then abort_call) leaves nothing, free_blocks / cache_full_blocks of no
    block are dropped, and allocate_slots' end_call carries its last num_blocks_to_allocate."""

    MERGED = ("touch", "get_new_blocks", "req_blocks_add", "req_blocks_null")

    def __init__(self) -> None:
        self.calls: list[tuple] = []
        self._keys: set[tuple] = set()
        self._num_blocks_to_allocate = 0
        self._fixed_point: tuple[int, int] | None = None

    def req_blocks_add(self, request_id, group, block_ids) -> None:
        if not block_ids and (request_id, group) in self._keys:
            return
        self._keys.add((request_id, group))
        self._record("req_blocks_add", request_id, group, block_ids)

    def free_blocks(self, block_ids) -> None:
        if block_ids:
            self._record("free_blocks", block_ids)

    def cache_full_blocks(self, request_id, group, num_cached, num_full, block_ids, hashes) -> None:
        if block_ids:
            self._record("cache_full_blocks", request_id, group, num_cached, num_full, block_ids, hashes)

    def req_free(self, request_id, group) -> None:
        if (request_id, group) in self._keys:
            self._keys.discard((request_id, group))
            self.calls.append(("req_free", request_id, group))

    def fixed_point(self, idx, group_ids, hit_length, curr_hit_length, reused, block_ids) -> None:
        # As kvlab.trace.Recorder: (iteration, group_ids, length before the turn, after, ...).
        state = self._fixed_point
        if state is None or idx == 0:
            iteration = 0 if state is None else state[0] + 1
            length_in = hit_length
        else:
            iteration, length_in = state
        self._fixed_point = (iteration, curr_hit_length)
        self._record("fixed_point", iteration, group_ids, length_in, curr_hit_length, reused, block_ids)

    def begin_call(self, name, request_id, args) -> None:
        self._fixed_point = None
        self.calls.append(("begin_call", name, request_id, tuple(args)))

    def num_blocks_to_allocate(self, n) -> None:
        self._num_blocks_to_allocate = n

    def abort_call(self, name) -> None:
        if self.calls and self.calls[-1][0] == "begin_call":
            self.calls.pop()
        else:
            self.calls.append(("end_call", name, ()))

    def end_call(self, name, result) -> None:
        self._fixed_point = None
        if name == "allocate_slots" and len(result) == 1:
            result = (result[0], self._num_blocks_to_allocate)
        self.calls.append(("end_call", name, tuple(result)))

    def _record(self, name: str, *args: Any) -> None:
        args = tuple(_tuples(a) for a in args)
        last = self.calls[-1] if self.calls else None
        if name in self.MERGED and last is not None and last[0] == name and last[1:-1] == args[:-1]:
            self.calls[-1] = (*last[:-1], tuple(last[-1]) + tuple(args[-1]))
        else:
            self.calls.append((name, *args))

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):
            raise AttributeError(name)

        def hook(*args: Any) -> None:
            self._record(name, *args)

        return hook

    def named(self, *names: str) -> list[tuple]:
        return [c for c in self.calls if c[0] in names]
