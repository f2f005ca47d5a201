"""The exit quiz: ten questions whose answer keys are computed by running kvlab.

Check an answer with ``check("quiz.k", answer)`` (``kvlab.course.check``); the lesson plan
(docs/how-to/teach-a-class.md) lists the questions. Every key below builds a small
KVCacheManager (blocks of 4 tokens unless said), runs the calls the question describes and
reads the answer off it, so the key follows kvlab (and vLLM 0.22.1, which kvlab mirrors).
"""

from __future__ import annotations

from kvlab.core import (
    FullAttentionSpec,
    VllmConfig,
    get_num_blocks,
)
from kvlab.course.lab_setup import full_attention_manager, request_factory
from kvlab.course.check import Exercise, register
from kvlab.course.nb12 import resume_hit


def _manager(num_blocks: int = 16, block_size: int = 4):
    return (full_attention_manager(num_blocks, block_size, max_model_len=4096, layer="layers"),
            request_factory(block_size))  # fmt: skip


def q1_blocks_for_257_tokens() -> int:
    manager, request = _manager(num_blocks=64, block_size=16)
    req = request("r", list(range(257)))
    return len(manager.allocate_slots(req, 257).get_block_ids()[0])


def q2_hit_of_cached_prompt() -> int:
    manager, request = _manager()
    first = request("first", list(range(20)))
    manager.allocate_slots(first, 20)
    return manager.get_computed_blocks(request("again", list(range(20))))[1]


def q3_free_order() -> list[int]:
    manager, request = _manager(num_blocks=4)  # blocks 1-3 usable: a takes all of them
    a = request("a", list(range(12)))
    manager.allocate_slots(a, 12)
    manager.free(a)
    return [blk.block_id for blk in manager.block_pool.free_block_queue.get_all_free_blocks()]


def q5_shared_ref_cnt() -> int:
    manager, request = _manager()
    for i in range(4):
        child = request(f"{i}_req", list(range(300, 310)))
        hit_blocks, num_hit = manager.get_computed_blocks(child)
        manager.allocate_slots(child, child.num_tokens - num_hit, num_hit, hit_blocks)
    return manager.block_pool.blocks[manager.get_block_ids("0_req")[0][0]].ref_cnt


def q6_ref_cnt_after_lookup() -> int:
    manager, request = _manager()
    a = request("a", list(range(12)))
    manager.allocate_slots(a, 12)
    manager.free(a)
    hit_blocks, _ = manager.get_computed_blocks(request("b", list(range(13))))
    return hit_blocks.blocks[0][0].ref_cnt


def q7_free_blocks_change_on_evict_blocks() -> int:
    manager, request = _manager()
    a = request("a", list(range(12)))
    manager.allocate_slots(a, 12)
    before = manager.block_pool.get_num_free_blocks()
    manager.evict_blocks(set(manager.get_block_ids("a")[0]))
    return manager.block_pool.get_num_free_blocks() - before


def q8_qwen3_vl_blocks() -> int:
    spec = FullAttentionSpec(block_size=16, num_kv_heads=8, head_size=128, dtype="bfloat16")
    return get_num_blocks(VllmConfig(), 80, int(80 * 0.7 * 1024**3), spec.page_size_bytes)


def q9_map_entries() -> int:
    manager, request = _manager()
    manager.allocate_slots(request("a", list(range(16))), 16)
    return len(manager.block_pool.cached_block_hash_to_block)


def q10_blocks_taken() -> list[int]:
    manager, request = _manager(num_blocks=10)
    a = request("a", list(range(12)))
    manager.allocate_slots(a, 12)
    manager.free(a)
    fresh = request("fresh", list(range(500, 532)))
    manager.allocate_slots(fresh, 32)
    return manager.get_block_ids("fresh")[0]


QUESTIONS = (
    Exercise("quiz.1", "With block_size 16, how many blocks does a 257-token prompt take?",
             q1_blocks_for_257_tokens, "A block is handed out whole: round up.",
             explain="cdiv(257, 16) = 17; the last block holds one token.",
             mistakes=((16, "256 tokens fill 16 blocks; the 257th needs one more."),)),
    Exercise("quiz.2", "A 20-token prompt (blocks of 4) is fully cached. Send the same prompt "
             "again: how many tokens does get_computed_blocks report as hit?",
             q2_hit_of_cached_prompt, "The hit is capped at num_tokens - 1, in whole blocks.",
             explain="At most 19 tokens may hit, and only full blocks hit: 4 blocks = 16 tokens.",
             mistakes=((20, "the last token is always recomputed (it must produce logits)."),
                       (19, "only full blocks hit: round 19 down to a multiple of 4."))),
    Exercise("quiz.3", "A request holding blocks [1, 2, 3] (the whole pool) is freed. What is the "
             "free queue, head first?", q3_free_order,
             "free() hands the blocks to the pool tail first.",
             explain="The tail of a prompt is the least likely to be shared, so it is evicted first.",
             mistakes=(([1, 2, 3], "free appends a request's blocks in reverse order."),)),
    Exercise("quiz.4", "Notebook 12, section 1 (16 blocks): how many tokens does the preempted "
             "B hit when it resumes?", lambda: resume_hit(16),
             "Preemption frees the blocks; they keep their block_hash until reused.",
             explain="V1 recomputes: B looks up the prefix cache and hits its 7 still-cached blocks.",
             mistakes=((0, "V1 does not swap, but its freed blocks stay cached: they hit."),
                       (29, "the num_tokens - 1 cap still applies."))),
    Exercise("quiz.5", "n = 4 parallel-sampling children of one 10-token prompt are admitted. "
             "What is the ref_cnt of their first block?", q5_shared_ref_cnt,
             "Children are separate requests that hit each other's full blocks.",
             explain="The full blocks are shared through the prefix cache: ref_cnt = 4.",
             mistakes=((1, "children share full blocks via the prefix cache, they do not copy them."),)),
    Exercise("quiz.6", "A freed request's cached blocks are hit by get_computed_blocks. What is a "
             "hit block's ref_cnt right after the lookup (before allocate_slots)?",
             q6_ref_cnt_after_lookup, "Which call touches blocks?",
             explain="The lookup is read-only; allocate_slots touches.",
             mistakes=((1, "get_computed_blocks does not touch: allocate_slots does."),)),
    Exercise("quiz.7", "evict_blocks is called on all blocks of a running request. By how many "
             "blocks does get_num_free_blocks() change?", q7_free_blocks_change_on_evict_blocks,
             "evict_blocks removes hashes from the prefix cache; what does it do to ref_cnt?",
             explain="It invalidates cached hashes only; the request keeps its blocks.",
             mistakes=((3, "evict_blocks frees nothing: it is not the LRU eviction."),)),
    Exercise("quiz.8", "The notes' Qwen3-VL example (16-token blocks, 8 KV heads of 128, bf16, 80 "
             "layers, 70 % of 80 GiB): how many blocks does get_num_blocks give?",
             q8_qwen3_vl_blocks, "Divide bytes by bytes: 65,536 bytes per block per layer.",
             explain="60,129,542,144 // 65,536 // 80 = 11,468.",
             mistakes=((10937, "that is 56,000 / 5.12: mixed decimal and binary units."),)),
    Exercise("quiz.9", "A 16-token prompt (blocks of 4) is allocated. How many entries does "
             "cached_block_hash_to_block hold?", q9_map_entries,
             "It is a flat map: one key per cached full block.",
             explain="4 full blocks, 4 keys; the chained hashes make it a prefix index, no tree.",
             mistakes=((1, "it is not a tree with one root: one entry per cached block."),)),
    Exercise("quiz.10", "10-block pool: a (12 tokens, blocks [1, 2, 3]) is freed, then a request "
             "needing 8 blocks is allocated. Which block ids does it get, in order?",
             q10_blocks_taken, "get_new_blocks pops from the head of the free queue.",
             explain="Never-used blocks 4-9 first, then a's blocks tail first: 3, 2.",
             mistakes=(([1, 2, 3, 4, 5, 6, 7, 8], "the queue is not sorted by id."),
                       ([4, 5, 6, 7, 8, 9, 1, 2], "a's blocks were freed tail first."))),
)

for _question in QUESTIONS:
    register(_question)
