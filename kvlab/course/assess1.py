"""Session 1's pre-test and the new items of its exit quiz (blocks, the free queue, prefix caching).

Pre-test items are parallel forms of exit items (same skill, other numbers), so the pair
measures what a session taught. Keys are computed by running kvlab; the lesson plan
(docs/how-to/teach-a-class.md, ``kvlab.course.sessions``) lists them with the objectives.
"""

from __future__ import annotations

from kvlab.core import FullAttentionSpec, VllmConfig, get_num_blocks
from kvlab.course.lab_setup import admit, full_attention_manager, request_factory
from kvlab.course.check import Exercise, register
from kvlab.course.rubric import Rubric, explain_item


def _lab(num_blocks: int):
    return full_attention_manager(num_blocks, 4, max_model_len=256, layer="layers"), request_factory(4)


def _queue(manager) -> list[int]:
    return [b.block_id for b in manager.block_pool.free_block_queue.get_all_free_blocks()]


def pool_blocks(num_layers: int = 24, num_kv_heads: int = 2, head_size: int = 64, gib: int = 1) -> int:
    """get_num_blocks for 16-token fp16 blocks of ``num_layers`` layers in ``gib`` GiB (blocks)."""
    spec = FullAttentionSpec(block_size=16, num_kv_heads=num_kv_heads, head_size=head_size, dtype="float16")
    return get_num_blocks(VllmConfig(), num_layers, gib * 1024**3, spec.page_size_bytes)


def queue_after_free(num_blocks: int = 6) -> list[int]:
    """The free queue, head first, after a request holding blocks 1-3 (12 tokens) is freed."""
    manager, make = _lab(num_blocks)
    a = make("a", list(range(12)))
    admit(manager, a)
    manager.free(a)
    return _queue(manager)


def blocks_taken_after_free(num_blocks: int = 6, needed: int = 4) -> list[int]:
    """Block ids a request needing ``needed`` blocks gets after ``queue_after_free``."""
    manager, make = _lab(num_blocks)
    a = make("a", list(range(12)))
    admit(manager, a)
    manager.free(a)
    fresh = make("fresh", list(range(500, 500 + 4 * needed)))
    admit(manager, fresh)
    return manager.get_block_ids("fresh")[0]


def hit_of_same_prompt(num_tokens: int = 13) -> int:
    """Tokens get_computed_blocks reports for a ``num_tokens`` prompt computed before."""
    manager, make = _lab(16)
    admit(manager, make("first", list(range(num_tokens))))
    return manager.get_computed_blocks(make("again", list(range(num_tokens))))[1]


def ref_cnt_lookup_then_allocate() -> tuple[int, int]:
    """ref_cnt of a running request's first block after another request's lookup, then after
    that request's allocate_slots."""
    manager, make = _lab(16)
    admit(manager, make("running", list(range(12))))
    other = make("other", list(range(12)) + [77])
    hit_blocks, num_hit = manager.get_computed_blocks(other)
    after_lookup = hit_blocks.blocks[0][0].ref_cnt
    manager.allocate_slots(other, other.num_tokens - num_hit, num_hit, hit_blocks)
    return after_lookup, hit_blocks.blocks[0][0].ref_cnt


def queue_after_touch() -> list[int]:
    """8-block pool: a (blocks 1, 2) and b (3, 4) computed and freed in that order; c hits a's
    first block and needs one new block. The free queue, head first."""
    manager, make = _lab(8)
    a, b = make("a", list(range(8))), make("b", list(range(100, 108)))
    admit(manager, a)
    admit(manager, b)
    manager.free(a)
    manager.free(b)
    admit(manager, make("c", list(range(4)) + [900, 901, 902]))
    return _queue(manager)


def why_reverse_and_lazy() -> str:
    """The model answer, with the orders kvlab computes."""
    order = queue_after_free(num_blocks=4)
    return (f"free() appends a request's blocks in reverse (tail first): after freeing blocks [1, 2, 3] "
            f"the queue is {order}, and popleft takes the head, so the tail block is evicted first. "
            "The first blocks of a prompt (a system prompt, a shared document) are the most likely to "
            "be hit again, so they stay longest. Eviction is lazy: a freed block keeps its block_hash "
            "and can still be hit until get_new_blocks pops it for reuse; only then is its hash "
            "removed from the prefix cache.")


WHY_REVERSE = Rubric((
    ("freed blocks go to the tail in reverse order, so a prompt's last block is reused first",
     (r"revers", r"tail first", r"last block.*first", r"倒序", r"逆序", r"尾部.*先")),
    ("a prompt's first blocks are the most likely to be shared or hit again, so they stay longest",
     (r"shar", r"prefix", r"system prompt", r"hit again", r"reus", r"共享", r"前缀", r"再次命中")),
    ("eviction is lazy: a free block keeps its hash until it is popped for reuse",
     (r"lazy", r"lazily", r"until .*pop", r"keeps? (its|the) (block_)?hash", r"惰性", r"弹出.*才")),
))  # fmt: skip

ITEMS = (
    Exercise("pre1.1", "16-token blocks, 2 KV heads of 64 values, fp16, 24 layers, a 1 GiB KV "
             "budget: how many blocks does get_num_blocks give?", pool_blocks,
             "bytes per block per layer = 2 (K and V) x 16 x 2 x 64 x 2 bytes; divide the budget "
             "by that and by the layers.", explain="1 GiB // 8,192 bytes // 24 layers.",
             mistakes=((5086, "1 GiB is 1024^3 bytes, not 10^9."),)),
    Exercise("pre1.2", "A 6-block pool (block 0 is the null block). A request holding blocks "
             "[1, 2, 3] is freed. What is the free queue, head first?", queue_after_free,
             "Never-used blocks are at the head; free() appends a request's blocks tail first.",
             mistakes=(([1, 2, 3, 4, 5], "the queue is not sorted by id."),
                       ([4, 5, 1, 2, 3], "free() appends in reverse."))),
    Exercise("pre1.3", "Same pool, then a request needing 4 blocks is allocated. Which block ids "
             "does it get, in order?", blocks_taken_after_free,
             "get_new_blocks pops from the head of the free queue.",
             mistakes=(([1, 2, 3, 4], "the freed blocks are behind the never-used ones."),)),
    Exercise("pre1.4", "A 13-token prompt (blocks of 4) was computed. The same 13 tokens again: "
             "how many tokens does get_computed_blocks report as hit?", hit_of_same_prompt,
             "Full blocks only, and at most num_tokens - 1 tokens.",
             mistakes=((13, "the last token is always computed."),)),
    Exercise("pre1.5", "A running request holds blocks for 12 tokens; another request with the same "
             "12 tokens and one more looks them up, then is allocated. The first block's ref_cnt "
             "after the lookup, and after allocate_slots? Answer (after lookup, after allocate).",
             ref_cnt_lookup_then_allocate, "Which of the two calls touches?",
             mistakes=(((2, 2), "get_computed_blocks does not touch."),)),
    Exercise("exit1.1", "An 8-block pool: a (8 tokens, blocks [1, 2]) and b (8 tokens, [3, 4]) are "
             "computed and freed, a first. c shares a's first 4 tokens and adds 3: it hits one block "
             "and needs one new one. Build the free queue after c's allocate_slots, head first.",
             queue_after_touch, "free: reverse order, a's blocks before b's; the hit is touched "
             "(removed from the middle) before popleft takes the head.",
             explain="touch takes block 1 from the middle; popleft takes block 5 from the head.",
             mistakes=(([5, 6, 7, 2, 4, 3], "popleft took the head block for c's new tokens."),
                       ([6, 7, 2, 1, 4, 3], "the hit block 1 left the queue (touch)."),
                       ([6, 7, 1, 2, 3, 4], "free() appends each request's blocks in reverse."))),
    explain_item("exit1.2", "Explain why free() hands a request's blocks to the free queue in "
                 "reverse order, and why a freed block's hash is not dropped at once.",
                 why_reverse_and_lazy, WHY_REVERSE,
                 mistakes=(("blocks are evicted by their last-access timestamp", "there is no "
                            "timestamp: name the order free() appends in, what stays longest, and "
                            "when a hash is really dropped."),)),
)  # fmt: skip

for _item in ITEMS:
    register(_item)
