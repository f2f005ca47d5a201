"""Notebook 5's exercises (anatomy of allocate_slots)."""

from __future__ import annotations

from kvlab.course.lab_setup import full_attention_manager, request_factory
from kvlab.course.check import Exercise, register

SYSTEM_PROMPT = list(range(100, 116))


def _manager(num_blocks: int = 20):
    return (full_attention_manager(num_blocks, 4, max_model_len=256),
            request_factory(4, max_tokens=16))  # fmt: skip


def _with_sys_and_b(first_chunk: int):
    manager, make = _manager()
    sys_req = make("sys", SYSTEM_PROMPT)
    manager.allocate_slots(sys_req, 16)
    sys_req.num_computed_tokens = 16
    b = make("b", SYSTEM_PROMPT[:12] + list(range(500, 509)))
    hit_blocks, num_hit = manager.get_computed_blocks(b)
    new = manager.allocate_slots(b, first_chunk, num_hit, hit_blocks)
    b.num_computed_tokens = num_hit + first_chunk
    return manager, make, b, new


def first_chunk_of_8(num_new_tokens: int = 8) -> tuple[int, int]:
    """(new blocks b gets, b's blocks with a block_hash after the call)."""
    manager, _, _, new = _with_sys_and_b(num_new_tokens)
    held = manager.get_block_ids("b")[0]
    return len(new.get_block_ids()[0]), sum(manager.block_pool.blocks[i].block_hash is not None for i in held)


def after_rejected_drafts(num_lookahead_tokens: int = 5) -> list[int]:
    """Block ids allocate_slots(b, 1) returns the step after a decode with lookahead slots
    whose drafts were all rejected."""
    manager, _, b, _ = _with_sys_and_b(6)
    manager.allocate_slots(b, 3)
    b.num_computed_tokens += 3
    b.append_output_token_ids(7)
    manager.allocate_slots(b, 1, num_lookahead_tokens=num_lookahead_tokens)
    b.num_computed_tokens += 1
    b.append_output_token_ids(8)
    return manager.allocate_slots(b, 1).get_block_ids()[0]


def zero_new_tokens() -> tuple[str, str, int]:
    """(exception class name without a hit, with a 12-token hit, change in free blocks) for
    ``allocate_slots(x, 0)``: a prefix-cache hit does not make zero new tokens legal."""
    manager, make = _manager()
    sys_req = make("sys", SYSTEM_PROMPT)
    manager.allocate_slots(sys_req, 16)
    before = manager.block_pool.get_num_free_blocks()
    names = []
    for request_id, prompt in (("x", list(range(40, 48))), ("y", SYSTEM_PROMPT[:12] + [1, 2])):
        req = make(request_id, prompt)
        hit_blocks, num_hit = manager.get_computed_blocks(req)
        try:
            manager.allocate_slots(req, 0, num_hit, hit_blocks)
            names.append("none")
        except Exception as exc:  # noqa: BLE001 - the exercise asks which one
            names.append(type(exc).__name__)
    return names[0], names[1], manager.block_pool.get_num_free_blocks() - before


def popped_after_touch() -> int:
    """The block popleft takes for q, whose hit block sits at the head of the free queue."""
    manager, make = _manager(num_blocks=3)
    for request_id, prompt in (("p1", [1, 2, 3, 4]), ("p2", [5, 6, 7, 8])):
        req = make(request_id, prompt)
        manager.allocate_slots(req, 4)
        req.num_computed_tokens = 4
        manager.free(req)
    q = make("q", [1, 2, 3, 4, 9, 9, 9, 9])
    hit_blocks, num_hit = manager.get_computed_blocks(q)
    return manager.allocate_slots(q, 8 - num_hit, num_hit, hit_blocks).get_block_ids()[0][-1]


register(Exercise(
    id="05.1",
    question="Give b's first chunk num_new_tokens=8 instead of 6: how many new blocks does it "
    "get, and how many of b's blocks are cached (have a block_hash) after the call? Answer (new, cached).",
    solve=first_chunk_of_8,
    hint="tokens 12-19 fill blocks 3 and 4 completely; allocate_slots caches every block that "
    "became full.",
    explain="2 new blocks, both full: 3 hit blocks + 2 new ones are cached.",
    mistakes=(((2, 4), "with 8 new tokens, the 5th block (tokens 16-19) is full too."),),
))  # fmt: skip
register(Exercise(
    id="05.2",
    question="Decode with num_lookahead_tokens=5; next step the drafts were all rejected. Which "
    "block ids does allocate_slots(b, 1) return?",
    solve=after_rejected_drafts,
    hint="the lookahead slots' blocks stay with the request until free(); does token 23 need a new one?",
    explain="The blocks for the draft slots are kept; the next token fits in them.",
    mistakes=(([9], "no new block is needed: the lookahead blocks are still held."),),
))  # fmt: skip
register(Exercise(
    id="05.3",
    question="allocate_slots(x, 0) for a request with no hit, then allocate_slots(y, 0, 12, "
    "hit_blocks) for a request whose 12-token prefix-cache hit is passed in: which exception "
    "each time, and by how many blocks does the number of free blocks change? Answer "
    "(class name without the hit, class name with the hit, change).",
    solve=zero_new_tokens,
    hint="vLLM's allocate_slots raises when num_new_tokens == 0 and num_external_computed_tokens "
    "== 0; bad input leaves every structure as it was.",
    explain="Zero new tokens are legal only with external tokens (an asynchronous KV load, "
    "num_external_computed_tokens > 0); a prefix-cache hit is irrelevant. Nothing changes.",
    mistakes=((("ValueError", "none", 0), "a prefix-cache hit does not make zero new tokens "
               "legal: only num_external_computed_tokens > 0 does."),
              (("none", "none", 0), "look at what the calls raise.")),
))  # fmt: skip
register(Exercise(
    id="05.4",
    question="Blocks 1 (p1's, cached) and 2 are free, 1 at the head. q hits block 1 and needs "
    "one new block: which block does popleft take?",
    solve=popped_after_touch,
    hint="allocate_slots touches the hit blocks (removing them from the queue) before popleft.",
    explain="Touch first: the hit block leaves the queue, so popleft cannot hand it out (and "
    "evict its hash) while q is about to read it.",
    mistakes=((1, "block 1 was touched first: it is no longer in the free queue."),),
))  # fmt: skip
