"""Bad-input campaign, core: BlockPool, FreeKVCacheBlockQueue and hashing.

Every row calls one entry point with one bad input on a recorded manager mid-run (blocks in
use, cached free blocks, a shuffled free queue) and asserts: the error type, that the message
names what is allowed, and that the full snapshot (free-queue order and links, ref_cnt and
block_hash of every block, cached map, req_to_blocks, NONE_HASH, and the recorder's replay,
which must still equal the live state) is exactly as before.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from _robust_helpers import busy_manager, snapshot
from hypothesis import given, settings
from hypothesis import strategies as st

from kvlab.core import kv_cache_utils as block_hash_module
from kvlab.core.block_pool import BlockPool
from kvlab.core.kv_cache_utils import KVCacheBlock
from kvlab.core.request import Request, SamplingParams
from kvlab.trace import Recorder
from kvlab.core.kv_cache_utils import (
    get_hash_fn_by_name,
    get_request_block_hasher,
    init_none_hash,
    sha256,
)


class Ctx:
    """What a row can reach: the manager, its pool and queue, and named blocks."""

    def __init__(self) -> None:
        self.manager, self.rec, (self.done, self.live) = busy_manager()
        self.pool = self.manager.block_pool
        self.queue = self.pool.free_block_queue
        free = self.queue.get_all_free_blocks()
        self.free = free[0]  # ref_cnt 0, queued
        self.tail = free[-1]
        self.cached_free = next(b for b in free if b.block_hash is not None)
        self.held = next(b for b in self.pool.blocks if b.ref_cnt == 1)
        self.held2 = next(b for b in self.pool.blocks if b.ref_cnt == 1 and b is not self.held)


def _snap(ctx: Ctx) -> dict[str, Any]:
    snap = snapshot(ctx.manager, ctx.rec)
    snap["none_hash"] = getattr(block_hash_module, "NONE_HASH", None)
    return snap


def _request(request_id: Any, prompt: Any) -> Request:
    return Request(request_id, prompt, SamplingParams(max_tokens=4), None,
                   block_hasher=get_request_block_hasher(4, sha256))  # fmt: skip


Row = tuple[str, Callable[[Ctx], Any], type[BaseException], str]

# (id, bad call, error type, regex the message must match: it names what is allowed)
ROWS: list[Row] = [
    # ---- BlockPool.free_blocks
    ("pool.free_blocks/double free", lambda c: c.pool.free_blocks([c.free]), ValueError,
     r"already free .*allowed: blocks with ref_cnt >= 1"),
    ("pool.free_blocks/cached free block", lambda c: c.pool.free_blocks([c.cached_free]),
     ValueError, r"allowed: blocks with ref_cnt >= 1"),
    ("pool.free_blocks/listed twice", lambda c: c.pool.free_blocks([c.held, c.held]), ValueError,
     r"each listed at most ref_cnt times"),
    ("pool.free_blocks/held then free", lambda c: c.pool.free_blocks([c.held, c.held2, c.free]),
     ValueError, r"allowed: blocks with ref_cnt >= 1"),
    ("pool.free_blocks/None", lambda c: c.pool.free_blocks(None), TypeError,
     r"iterable of KVCacheBlock"),
    ("pool.free_blocks/int", lambda c: c.pool.free_blocks(5), TypeError,
     r"iterable of KVCacheBlock"),
    ("pool.free_blocks/block ids", lambda c: c.pool.free_blocks([c.held.block_id]), TypeError,
     r"allowed: KVCacheBlock"),
    ("pool.free_blocks/held then str", lambda c: c.pool.free_blocks([c.held, "x"]), TypeError,
     r"item 1 .*allowed: KVCacheBlock"),
    # ---- BlockPool.touch
    ("pool.touch/None", lambda c: c.pool.touch(None), TypeError,
     r"touch: blocks must be an iterable of KVCacheBlock, got NoneType"),
    ("pool.touch/int", lambda c: c.pool.touch(3), TypeError,
     r"blocks must be an iterable of KVCacheBlock"),
    ("pool.touch/free block then id", lambda c: c.pool.touch([c.cached_free, 5]), TypeError,
     r"iterable of KVCacheBlock, got list \(item 1 is int 5\)"),
    # ---- BlockPool.evict_blocks
    ("pool.evict_blocks/None", lambda c: c.pool.evict_blocks(None), TypeError,
     r"iterable of int block ids"),
    ("pool.evict_blocks/int", lambda c: c.pool.evict_blocks(5), TypeError,
     r"iterable of int block ids"),
    ("pool.evict_blocks/str", lambda c: c.pool.evict_blocks("12"), TypeError,
     r"iterable of int block ids"),
    ("pool.evict_blocks/float id", lambda c: c.pool.evict_blocks([1.5]), TypeError,
     r"must hold ints.*allowed: 0 <= block_id < 16"),
    ("pool.evict_blocks/None id", lambda c: c.pool.evict_blocks([None]), TypeError,
     r"allowed: 0 <= block_id < 16"),
    ("pool.evict_blocks/bool id", lambda c: c.pool.evict_blocks([True]), TypeError,
     r"allowed: 0 <= block_id < 16"),
    ("pool.evict_blocks/negative", lambda c: c.pool.evict_blocks([-1]), ValueError,
     r"allowed 0 <= block_id < 16"),
    ("pool.evict_blocks/too big", lambda c: c.pool.evict_blocks([16]), ValueError,
     r"allowed 0 <= block_id < 16"),
    ("pool.evict_blocks/good then bad",
     lambda c: c.pool.evict_blocks([c.cached_free.block_id, 99]), ValueError,
     r"allowed 0 <= block_id < 16"),
    # ---- BlockPool.get_new_blocks
    ("pool.get_new_blocks/str", lambda c: c.pool.get_new_blocks("2"), TypeError,
     r"num_blocks must be an int .*0 <= num_blocks <= "),
    ("pool.get_new_blocks/None", lambda c: c.pool.get_new_blocks(None), TypeError,
     r"num_blocks must be an int"),
    ("pool.get_new_blocks/float", lambda c: c.pool.get_new_blocks(2.0), TypeError,
     r"num_blocks must be an int"),
    ("pool.get_new_blocks/bool", lambda c: c.pool.get_new_blocks(True), TypeError,
     r"num_blocks must be an int"),
    ("pool.get_new_blocks/negative", lambda c: c.pool.get_new_blocks(-1), ValueError,
     r"allowed: 0 <= num_blocks <= "),
    ("pool.get_new_blocks/too many", lambda c: c.pool.get_new_blocks(10**6), ValueError,
     r"allowed: 0 <= num_blocks <= "),
    # ---- BlockPool.cache_full_blocks / constructor
    ("pool.cache_full_blocks/block_size",
     lambda c: c.pool.cache_full_blocks(c.live, [c.held, c.held2], 0, 2, 3, 0), ValueError,
     r"must be a positive multiple of hash_block_size"),
    ("pool.cache_full_blocks/too few hashes",
     lambda c: c.pool.cache_full_blocks(c.live, [c.held] * 9, 0, 9, 4, 0), ValueError,
     r"fewer than num_full_blocks"),
    ("pool.cache_full_blocks/request None",
     lambda c: c.pool.cache_full_blocks(None, [c.held, c.held2], 0, 2, 4, 0), TypeError,
     r"request must be a Request \(or an object with request_id and block_hashes\), got "
     r"NoneType"),
    ("pool.cache_full_blocks/request id str",
     lambda c: c.pool.cache_full_blocks("live", [c.held, c.held2], 0, 2, 4, 0), TypeError,
     r"request must be a Request .*got str 'live'"),
    ("pool.cache_full_blocks/blocks None",
     lambda c: c.pool.cache_full_blocks(c.live, None, 0, 2, 4, 0), TypeError,
     r"blocks must be an iterable of KVCacheBlock, got NoneType"),
    ("pool.cache_full_blocks/block ids",
     lambda c: c.pool.cache_full_blocks(c.live, [c.free.block_id, 3], 0, 2, 4, 0), TypeError,
     r"blocks must hold KVCacheBlock, got int"),
    ("pool.cache_full_blocks/num_cached_blocks str",
     lambda c: c.pool.cache_full_blocks(c.live, [c.free], "0", 1, 4, 0), TypeError,
     r"num_cached_blocks must be an int, got str '0'"),
    ("pool.cache_full_blocks/num_full_blocks float",
     lambda c: c.pool.cache_full_blocks(c.live, [c.free], 0, 1.0, 4, 0), TypeError,
     r"num_full_blocks must be an int, got float 1.0"),
    ("pool.cache_full_blocks/num_cached_blocks -1",
     lambda c: c.pool.cache_full_blocks(c.live, [c.free], -1, 1, 4, 0), ValueError,
     r"allowed: 0 <= num_cached_blocks and 0 <= num_full_blocks <= len\(blocks\)"),
    ("pool.cache_full_blocks/num_full_blocks beyond blocks",
     lambda c: c.pool.cache_full_blocks(c.live, [c.free], 0, 2, 4, 0), ValueError,
     r"num_full_blocks=2 for 1 blocks; allowed: .*num_full_blocks <= len\(blocks\)"),
    ("pool.cache_full_blocks/block_size None",
     lambda c: c.pool.cache_full_blocks(c.live, [c.free], 0, 1, None, 0), TypeError,
     r"block_size must be an int, got NoneType"),
    ("pool.cache_full_blocks/group id str",
     lambda c: c.pool.cache_full_blocks(c.live, [c.free], 0, 1, 4, "0"), TypeError,
     r"kv_cache_group_id must be an int, got str '0'"),
    ("pool.cache_full_blocks/group id -1",
     lambda c: c.pool.cache_full_blocks(c.live, [c.free], 0, 1, 4, -1), ValueError,
     r"kv_cache_group_id -1; allowed 0 <= kv_cache_group_id < 2\*\*32"),
    # ---- BlockPool.get_cached_block
    ("pool.get_cached_block/hash None", lambda c: c.pool.get_cached_block(None, [0]), TypeError,
     r"block_hash must be bytes \(a BlockHash, e.g. from request.block_hashes\), got NoneType"),
    ("pool.get_cached_block/hash str", lambda c: c.pool.get_cached_block("ab", [0]), TypeError,
     r"block_hash must be bytes .*got str 'ab'"),
    ("pool.get_cached_block/hash bytearray",
     lambda c: c.pool.get_cached_block(bytearray(c.live.block_hashes[0]), [0]), TypeError,
     r"block_hash must be bytes .*got bytearray"),
    ("pool.get_cached_block/groups None",
     lambda c: c.pool.get_cached_block(c.live.block_hashes[0], None), TypeError,
     r"kv_cache_group_ids must be a list of int group ids \(0 <= id < 2\*\*32\), got NoneType"),
    ("pool.get_cached_block/groups int",
     lambda c: c.pool.get_cached_block(c.live.block_hashes[0], 0), TypeError,
     r"kv_cache_group_ids must be a list of int group ids"),
    ("pool.get_cached_block/group str",
     lambda c: c.pool.get_cached_block(c.live.block_hashes[0], [0, "1"]), TypeError,
     r"kv_cache_group_ids must hold ints, got str '1'; allowed: 0 <= id < 2\*\*32"),
    ("pool.get_cached_block/group -1",
     lambda c: c.pool.get_cached_block(c.live.block_hashes[0], [0, -1]), ValueError,
     r"kv_cache_group_id -1; allowed 0 <= id < 2\*\*32"),
    ("pool.get_cached_block/group 2**40",
     lambda c: c.pool.get_cached_block(c.live.block_hashes[0], [2**40]), ValueError,
     r"allowed 0 <= id < 2\*\*32"),
    ("pool.get_cached_block/bad group in a generator",
     lambda c: c.pool.get_cached_block(c.live.block_hashes[0], (g for g in [0, None, 0])),
     TypeError, r"kv_cache_group_ids must be a list of int group ids"),
    # ---- Request (vLLM's EngineCore.add_request refuses a non-str request_id)
    ("Request/int request_id", lambda c: _request(5, [1, 2, 3]), TypeError,
     r"request_id must be a string, got <class 'int'> 5 \(as vLLM's EngineCore.add_request"),
    ("Request/None request_id", lambda c: _request(None, [1, 2, 3]), TypeError,
     r"request_id must be a string, got <class 'NoneType'>"),
    ("Request/prompt a bare str", lambda c: _request("r", "123"), TypeError,
     r"prompt_token_ids must be a list of int token ids, or None with prompt_embeds; got str"),
    ("Request/prompt ids str", lambda c: _request("r", [1, "2"]), TypeError,
     r"prompt_token_ids\[1\] is str '2'; allowed: token ids as plain Python ints"),
    ("Request/prompt ids float", lambda c: _request("r", [1.0, 2]), TypeError,
     r"prompt_token_ids\[0\] is float 1.0; allowed: token ids as plain Python ints"),
    ("Request/prompt ids None", lambda c: _request("r", [1, None]), TypeError,
     r"prompt_token_ids\[1\] is NoneType None; allowed"),
    ("Request/prompt ids bool", lambda c: _request("r", [True]), TypeError,
     r"prompt_token_ids\[0\] is bool True; allowed"),
    ("Request/prompt a numpy array", lambda c: _request("r", np.arange(3)), TypeError,
     r"got ndarray .* \(a numpy array: pass .tolist\(\)\)"),
    ("Request/prompt numpy ints", lambda c: _request("r", list(np.arange(3))), TypeError,
     r"prompt_token_ids\[0\] is int64 .*plain Python ints"),
    ("Request/prompt an int", lambda c: _request("r", 7), TypeError,
     r"prompt_token_ids must be a list of int token ids.* got int 7"),
    ("BlockPool/num_gpu_blocks 0", lambda c: BlockPool(0, True, 4), ValueError,
     r"num_gpu_blocks must be a positive int"),
    ("BlockPool/hash_block_size str", lambda c: BlockPool(4, True, "4"), ValueError,
     r"hash_block_size must be a positive int"),
    # ---- KVCacheManager (the scheduler's entry points)
    ("manager.allocate_slots/None request", lambda c: c.manager.allocate_slots(None, 4), TypeError,
     r"allocate_slots: request must be a Request .*got NoneType None"),
    ("manager.allocate_slots/str request", lambda c: c.manager.allocate_slots("live", 4),
     TypeError, r"allocate_slots: request must be a Request .*got str 'live'"),
    ("manager.allocate_slots/num_new_tokens '4'", lambda c: c.manager.allocate_slots(c.live, "4"),
     TypeError, r"num_new_tokens must be an int >= 0, got str '4'"),
    ("manager.allocate_slots/num_new_tokens 4.0", lambda c: c.manager.allocate_slots(c.live, 4.0),
     TypeError, r"num_new_tokens must be an int >= 0, got float 4.0"),
    ("manager.allocate_slots/num_new_tokens -1", lambda c: c.manager.allocate_slots(c.live, -1),
     ValueError, r"num_new_tokens must be >= 0, got -1"),
    ("manager.allocate_slots/new_computed_blocks str",
     lambda c: c.manager.allocate_slots(c.live, 4, 0, "x"), TypeError,
     r"new_computed_blocks must be KVCacheBlocks or None, got str"),
    ("manager.free/None", lambda c: c.manager.free(None), TypeError,
     r"free: request must be a Request .*got NoneType None"),
    ("manager.free/str", lambda c: c.manager.free("live"), TypeError,
     r"free: request must be a Request .*got str 'live'"),
    ("manager.get_computed_blocks/None", lambda c: c.manager.get_computed_blocks(None), TypeError,
     r"get_computed_blocks: request must be a Request .*got NoneType None"),
    ("manager.get_computed_blocks/str", lambda c: c.manager.get_computed_blocks("live"),
     TypeError, r"get_computed_blocks: request must be a Request .*got str 'live'"),
    ("manager.evict_blocks/None", lambda c: c.manager.evict_blocks(None), TypeError,
     r"block_ids must be an iterable of int block ids \(a set in vLLM\), got NoneType"),
    ("manager.evict_blocks/int", lambda c: c.manager.evict_blocks(5), TypeError,
     r"block_ids must be an iterable of int block ids .*got int 5"),
    ("manager.evict_blocks/out of range", lambda c: c.manager.evict_blocks({3, 16}), ValueError,
     r"allowed 0 <= block_id < 16"),
    # ---- FreeKVCacheBlockQueue
    ("queue.append/queued block", lambda c: c.queue.append(c.free), ValueError,
     r"already in the free queue.*allowed: blocks outside the queue"),
    ("queue.append/tail block", lambda c: c.queue.append(c.tail), ValueError,
     r"allowed: blocks outside the queue"),
    ("queue.append_n/held then queued", lambda c: c.queue.append_n([c.held, c.free]), ValueError,
     r"allowed: blocks outside the queue, each appended once"),
    ("queue.append_n/listed twice", lambda c: c.queue.append_n([c.held, c.held2, c.held]),
     ValueError, r"each appended once"),
    ("queue.popleft_n/negative", lambda c: c.queue.popleft_n(-1), ValueError,
     r"n must be in \[0, num_free_blocks="),
    ("queue.popleft_n/too many", lambda c: c.queue.popleft_n(10**6), ValueError,
     r"n must be in \[0, num_free_blocks="),
    ("queue.popleft_n/str", lambda c: c.queue.popleft_n("2"), TypeError,
     r"n must be an int in \[0, num_free_blocks="),
    ("queue.popleft_n/float", lambda c: c.queue.popleft_n(2.0), TypeError,
     r"n must be an int in \[0, num_free_blocks="),
    ("queue.remove/held block", lambda c: c.queue.remove(c.held), RuntimeError,
     r"allowed: a block in the free queue"),
    # ---- hashing
    ("init_none_hash/str", lambda c: init_none_hash("sha256"), TypeError,
     r"hash function \(callable.*get_hash_fn_by_name\('sha256'\)"),
    ("init_none_hash/None", lambda c: init_none_hash(None), TypeError,
     r"must be a hash function \(callable"),
    ("get_request_block_hasher/str fn", lambda c: get_request_block_hasher(4, "sha256"),
     TypeError, r"caching_hash_fn must be a hash function \(callable"),
    ("get_request_block_hasher/size 0", lambda c: get_request_block_hasher(0, sha256),
     ValueError, r"block_size must be a positive int"),
    ("get_request_block_hasher/size str", lambda c: get_request_block_hasher("4", sha256),
     ValueError, r"block_size must be a positive int"),
    ("get_request_block_hasher/size bool", lambda c: get_request_block_hasher(True, sha256),
     ValueError, r"block_size must be a positive int"),
    ("get_hash_fn_by_name/md5", lambda c: get_hash_fn_by_name("md5"), ValueError,
     r"allowed: sha256"),
    ("get_hash_fn_by_name/None", lambda c: get_hash_fn_by_name(None), ValueError,
     r"allowed: sha256"),
]  # fmt: skip


@pytest.mark.parametrize(("call", "error", "allowed"), [r[1:] for r in ROWS],
                         ids=[r[0] for r in ROWS])  # fmt: skip
def test_bad_input_is_refused_and_nothing_changes(
    call: Callable[[Ctx], Any], error: type[BaseException], allowed: str
) -> None:
    ctx = Ctx()
    before = _snap(ctx)
    with pytest.raises(error, match=allowed):
        call(ctx)
    assert _snap(ctx) == before


def test_the_campaign_covers_every_core_entry_point() -> None:
    entry_points = {r[0].split("/")[0] for r in ROWS}
    assert entry_points >= {
        "pool.free_blocks", "pool.evict_blocks", "pool.get_new_blocks", "queue.append",
        "queue.append_n", "queue.popleft_n", "init_none_hash", "get_request_block_hasher",
        "pool.cache_full_blocks", "pool.get_cached_block", "Request", "manager.allocate_slots",
        "manager.free", "manager.get_computed_blocks", "manager.evict_blocks",
    }  # fmt: skip


def test_after_a_refused_double_free_the_pool_keeps_working() -> None:
    ctx = Ctx()
    with pytest.raises(ValueError):
        ctx.pool.free_blocks([ctx.held, ctx.held])
    ctx.manager.free(ctx.live)  # the real free still works
    assert ctx.held.ref_cnt == 0 and ctx.held in ctx.queue.get_all_free_blocks()
    _snap(ctx)  # replay == live


@settings(max_examples=80, deadline=None)
@given(data=st.data())
def test_free_blocks_refuses_exactly_the_over_frees(data: st.DataObject) -> None:
    """Any list of blocks: success iff no block is listed more often than it is held, and no
    block that reaches ref_cnt 0 is listed twice (vLLM would link it into the queue twice)."""
    pool = BlockPool(8, enable_caching=True, hash_block_size=4)
    rec = Recorder().attach(pool)
    held = pool.get_new_blocks(data.draw(st.integers(0, 7)))
    pool.touch(data.draw(st.lists(st.sampled_from(held), max_size=4)) if held else [])
    candidates = pool.blocks[1:] + [pool.null_block]
    to_free: list[KVCacheBlock] = data.draw(st.lists(st.sampled_from(candidates), max_size=10))
    before = snapshot(pool, rec)
    counts = {b.block_id: sum(x is b for x in to_free) for b in to_free}
    over = any(not b.is_null and counts[b.block_id] > b.ref_cnt for b in to_free)
    twice = any(not b.is_null and 1 < counts[b.block_id] == b.ref_cnt for b in to_free)
    if over or twice:
        with pytest.raises(ValueError, match="allowed: "):
            pool.free_blocks(to_free)
        assert snapshot(pool, rec) == before
    else:
        pool.free_blocks(to_free)
        queued = pool.free_block_queue.get_all_free_blocks()
        assert all(b.ref_cnt >= 0 for b in pool.blocks if not b.is_null)
        assert {b.block_id for b in queued} == {
            b.block_id for b in pool.blocks if b.ref_cnt == 0 and not b.is_null
        }
        assert pool.free_block_queue.num_free_blocks == len(queued)
        assert snapshot(pool, rec)["replay_equals_live"]


def test_get_cached_block_takes_int_likes_and_stays_fast_path_equal() -> None:
    """numpy group ids (int-likes) go through the checked path and find the same blocks."""
    ctx = Ctx()
    h = ctx.live.block_hashes[0]
    plain = ctx.pool.get_cached_block(h, [0])
    assert plain is not None and ctx.pool.get_cached_block(h, [np.int64(0)]) == plain
    assert ctx.pool.get_cached_block(h, (g for g in [0])) == plain
    assert ctx.pool.get_cached_block(h, [7]) is None  # a group the pool never cached: a miss
    _snap(ctx)  # replay == live
