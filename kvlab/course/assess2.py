"""Session 2's pre-test and exit quiz (allocate_slots, the window, the fixed point, slot mapping).

Keys computed by running kvlab; see ``kvlab.course.sessions`` for the objectives they test.
"""

from __future__ import annotations

import numpy as np

from kvlab.core import (
    FullAttentionSpec,
    KVCacheConfig,
    KVCacheGroupSpec,
    KVCacheManager,
    SlidingWindowSpec,
    VllmConfig,
    get_kv_cache_config,
)
from kvlab.course.lab_setup import admit, full_attention_manager, request_factory, seed_hashing
from kvlab.course.check import Exercise, register
from kvlab.course.rubric import Rubric, explain_item
from kvlab.worker import BlockTable


def _spec(kind: str, block_size: int = 4, num_kv_heads: int = 1, window: int = 8):
    common = {"block_size": block_size, "num_kv_heads": num_kv_heads, "head_size": 1, "dtype": "float32"}
    return FullAttentionSpec(**common) if kind == "full" else SlidingWindowSpec(**common, sliding_window=window)


def _manager(groups, num_blocks: int = 40) -> KVCacheManager:
    seed_hashing()
    config = KVCacheConfig(num_blocks, [], [KVCacheGroupSpec([f"l{i}"], s) for i, s in enumerate(groups)])
    return KVCacheManager(config, max_model_len=256, hash_block_size=4)


def new_blocks_with_lookahead() -> int:
    """New blocks for allocate_slots(r, 5, num_lookahead_tokens=3) after 8 computed tokens (blocks)."""
    manager, make = full_attention_manager(20, 4, 256), request_factory(4)
    r = make("r", list(range(13)))
    manager.allocate_slots(r, 8)
    r.num_computed_tokens = 8
    return len(manager.allocate_slots(r, 5, num_lookahead_tokens=3).get_block_ids()[0])


def window_table(prompt_len: int = 8, decodes: int = 3, window: int = 4) -> list[int]:
    """A sliding-window request's block list after its prefill and ``decodes`` decode steps."""
    manager, make = _manager([_spec("window", window=window)], 24), request_factory(4, max_tokens=64)
    r = make("r", list(range(prompt_len)))
    admit(manager, r)
    for step in range(decodes):
        r.append_output_token_ids(100 + step)
        manager.allocate_slots(r, 1)
        r.num_computed_tokens += 1
    return manager.get_block_ids("r")[0]


def mixed_hit(probe_len: int = 19) -> int:
    """Hit of a ``probe_len``-token prompt: full attention in 8-token blocks + window 8 in 4."""
    seed_hashing()
    layers = {"global": _spec("full", block_size=8), "local": _spec("window", num_kv_heads=2)}
    # 40 blocks hold one request of at most 104 tokens (get_kv_cache_configs checks max_model_len).
    config = get_kv_cache_config(VllmConfig(max_model_len=64, num_gpu_blocks_override=40), layers, 1 << 20)
    manager, make = KVCacheManager(config, max_model_len=64, hash_block_size=4), request_factory(4)
    manager.allocate_slots(make("a", list(range(40))), 40)
    return manager.get_computed_blocks(make("p", list(range(probe_len))))[1]


def slots(row: tuple[int, ...] = (3, 7), positions: tuple[int, ...] = (0, 5, 6)) -> list[int]:
    """slot_mapping of ``positions`` for a one-row block table of 4-token blocks."""
    table = BlockTable(block_size=4, max_num_reqs=1, max_num_blocks_per_req=8, max_num_batched_tokens=8)
    table.add_row(list(row), 0)
    return table.compute_slot_mapping(np.zeros(len(positions), dtype=np.int64), np.array(positions)).tolist()[:len(positions)]


def after_rejection(num_drafts: int = 2, num_accepted: int = 0) -> int:
    """num_computed_tokens after a verify step of 1 + num_drafts tokens, 10 computed before."""
    manager, make = full_attention_manager(20, 4, 256), request_factory(4)
    s = make("s", list(range(10)))
    admit(manager, s)
    s.append_output_token_ids(50)
    s.spec_token_ids = list(range(60, 60 + num_drafts))
    num_new = s.num_tokens_with_spec - s.num_computed_tokens
    manager.allocate_slots(s, num_new, num_lookahead_tokens=num_drafts)
    s.num_computed_tokens += num_new
    s.num_computed_tokens -= num_drafts - num_accepted  # update_from_output
    return s.num_computed_tokens


def returned_after_hit() -> list[int]:
    """Block ids allocate_slots returns for r (8-token hit, 10 new tokens, 2 lookahead slots)."""
    manager, make = full_attention_manager(20, 4, 256), request_factory(4)
    admit(manager, make("sys", list(range(16))))
    r = make("r", list(range(8)) + list(range(300, 310)))
    hit_blocks, num_hit = manager.get_computed_blocks(r)
    return manager.allocate_slots(r, 10, num_hit, hit_blocks, num_lookahead_tokens=2).get_block_ids()[0]


def three_group_hit() -> int:
    """full + window 8 + window 12; a (21 tokens) freed; the window-8 copy of block 4 evicted."""
    seed_hashing()
    layers = {"global": _spec("full"), "local-8": _spec("window", window=8), "local-12": _spec("window", window=12)}
    # 40 blocks hold one request of at most 48 tokens (get_kv_cache_configs checks max_model_len).
    config = get_kv_cache_config(VllmConfig(max_model_len=48, num_gpu_blocks_override=40), layers, 1 << 20)
    manager, make = KVCacheManager(config, max_model_len=48, hash_block_size=4), request_factory(4)
    a = make("a", list(range(21)))
    manager.allocate_slots(a, 21)
    victim = manager.get_block_ids("a")[1][4]
    manager.free(a)
    manager.evict_blocks({victim})
    return manager.get_computed_blocks(make("b", list(range(21))))[1]


def decode_slots() -> list[int]:
    """slot_mapping of r's tokens 6-8: r (6 tokens) and o (5 tokens) prefilled, r decodes 3."""
    manager, make = full_attention_manager(20, 4, 256), request_factory(4, max_tokens=8)
    r, o = make("r", list(range(6))), make("o", list(range(50, 55)))
    admit(manager, r)
    admit(manager, o)
    for token in (7, 8, 9):
        r.append_output_token_ids(token)
        manager.allocate_slots(r, 1)
        r.num_computed_tokens += 1
    return slots(tuple(manager.get_block_ids("r")[0]), (6, 7, 8))


def async_load() -> tuple[int, int, int]:
    """(blocks returned, blocks cached before cache_blocks, after) for allocate_slots(c, 0,
    num_external_computed_tokens=8, delay_cache_blocks=True) of a 9-token request."""
    manager, make = full_attention_manager(20, 4, 256), request_factory(4)
    c = make("c", list(range(9)))
    new = manager.allocate_slots(c, 0, num_external_computed_tokens=8, delay_cache_blocks=True)

    def num_cached() -> int:
        return sum(manager.block_pool.blocks[i].block_hash is not None for i in manager.get_block_ids("c")[0])

    before = num_cached()
    c.num_computed_tokens = 8
    manager.cache_blocks(c, 8)
    return len(new.get_block_ids()[0]), before, num_cached()


def why_right_to_left() -> str:
    manager, make = _manager([_spec("window")], 24), request_factory(4, max_tokens=64)
    a = make("a", list(range(20)))
    admit(manager, a)
    manager.free(a)
    manager.evict_blocks({manager.block_pool.blocks[1].block_id})
    blocks, hit = manager.get_computed_blocks(make("b", list(range(20)) + [7, 7]))
    return (f"With window 8 and 4-token blocks a hit of L tokens needs only the KV of the last "
            f"cdiv(8 - 1, 4) = 2 blocks before L: the blocks before them are never read again and are "
            f"returned as null blocks. So the search starts from the right and stops at the first "
            f"run of 2 cached blocks. Left to right it would stop at the first miss: with a's first "
            f"block evicted, the right-to-left search still hits {hit} tokens, blocks "
            f"{blocks.get_block_ids()[0]}.")


WHY_RIGHT_TO_LEFT = Rubric((
    ("only the last cdiv(sliding_window - 1, block_size) blocks before the hit end are needed",
     (r"last .*blocks?", r"blocks? before", r"window", r"最后", r"窗口")),
    ("the blocks before them are not needed: null blocks", (r"null", r"not (needed|read)", r"空块")),
    ("an evicted early block must not end the hit, as the left-to-right stop at the first miss would",
     (r"first miss", r"evict", r"left to right", r"第一个未命中", r"驱逐", r"从左到右")),
))  # fmt: skip

ITEMS = (
    Exercise("pre2.1", "A request has 8 tokens computed (2 blocks of 4). allocate_slots(r, 5, "
             "num_lookahead_tokens=3): how many new blocks does it get?", new_blocks_with_lookahead,
             "slots = computed + new + lookahead tokens, rounded up to blocks, minus the blocks held.",
             mistakes=((1, "the lookahead slots need blocks too."),)),
    Exercise("pre2.2", "Sliding window 4, blocks of 4: an 8-token prompt, then 3 decode steps. "
             "What is the request's block list?", window_table,
             "remove_skipped_blocks runs first in each allocate_slots; a skipped block becomes block 0.",
             mistakes=(([1, 2, 3], "block 0 (tokens 0-3) is out of the window after 8 tokens."),)),
    Exercise("pre2.3", "Full attention in 8-token blocks + window 8 in 4-token blocks; a 40-token "
             "prompt is cached. How many tokens does a 19-token probe of the same tokens hit?",
             mixed_hit, "the cap is 18 tokens; a hit ends on a multiple of the LCM of the block sizes.",
             mistakes=((18, "18 is not a multiple of 8."),)),
    Exercise("pre2.4", "Block-table row [3, 7], blocks of 4 tokens: the slots of positions "
             "[0, 5, 6]?", slots, "slot = block_id x block_size + position % block_size.",
             mistakes=(([0, 5, 6], "map each position through the row first."),)),
    Exercise("pre2.5", "10 tokens computed, a sampled token and 2 drafts are verified, no draft is "
             "accepted. num_computed_tokens after update_from_output?", after_rejection,
             "num_computed_tokens advances by what was scheduled, then falls by the rejected drafts.",
             mistakes=((13, "the rejected drafts are taken off."), (10, "the sampled token was computed."))),
    Exercise("exit2.1", "sys (16 tokens) is cached in blocks [1-4] of a 20-block pool. r = sys's "
             "first 8 tokens + 10 of its own. allocate_slots(r, 10, 8, hits, num_lookahead_tokens=2): "
             "which block ids does it return?", returned_after_hit,
             "the hits are not returned as new; slots for 8 + 10 + 2 tokens are 5 blocks.",
             mistakes=(([1, 2, 5, 6, 7], "the hit blocks are not new blocks."),
                       ([5, 6], "the lookahead slots need a block too."))),
    Exercise("exit2.2", "Sliding window 6, blocks of 4: a 10-token prompt, then 5 decode steps. "
             "Build the request's block list.", lambda: window_table(10, 5, 6),
             "get_num_skipped_tokens(n) = n - 6 + 1 before each call; whole skipped blocks become 0.",
             mistakes=(([1, 2, 3, 4], "blocks that left the window are replaced by the null block."),)),
    Exercise("exit2.3", "The three-group model (full, window 8, window 12): a (21 tokens) is "
             "computed and freed, and the window-8 copy of its block 4 is evicted. How many tokens "
             "does b (the same 21 tokens) hit?", three_group_hit,
             "run the fixed point: window 8 needs the 2 blocks before the hit end, window 12 needs 3.",
             mistakes=((20, "window 8 lost block 4: its run of 2 cached blocks ends earlier."),
                       (12, "window 12 needs 3 cached blocks before the hit end: 1, 2 and 3 are."))),
    Exercise("exit2.4", "r (6 tokens) and o (5 tokens) are prefilled in that order (blocks of 4), "
             "then r decodes 3 tokens. The slot_mapping of r's positions 6, 7, 8?", decode_slots,
             "r's third block came later, after o's blocks.",
             mistakes=(([6, 7, 8], "map each position through r's block-table row."),
                       ([6, 7, 12], "r's third block is not block 3: o took 3 and 4."))),
    explain_item("exit2.5", "Explain why a sliding-window group searches for a cache hit from the "
                 "right, and what it returns for the blocks before the hit's last ones.",
                 why_right_to_left, WHY_RIGHT_TO_LEFT,
                 mistakes=(("it scans from the right because the newest blocks are cached",
                            "say how many blocks a hit needs and why the earlier ones do not count."),)),
    Exercise("exit2.6", "allocate_slots(c, 0, num_external_computed_tokens=8, delay_cache_blocks="
             "True) for a 9-token request: blocks returned, blocks with a block_hash right after, and "
             "after cache_blocks(c, 8)? Answer (returned, cached before, cached after).", async_load,
             "external tokens are part of the computed prefix; delay_cache_blocks defers caching.",
             mistakes=(((2, 2, 2), "nothing is returned as new, and nothing is cached before the load."),)),
    Exercise("exit2.7", "Like pre2.5 but 1 of the 2 drafts is accepted: num_computed_tokens after "
             "update_from_output?", lambda: after_rejection(2, 1),
             "one rejected draft is taken off.", mistakes=((13, "one draft was rejected."),)),
)  # fmt: skip

for _item in ITEMS:
    register(_item)
