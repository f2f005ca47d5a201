"""Notebook 3's exercises (the LRU free queue)."""

from __future__ import annotations

from kvlab.core import (
    BlockPool,
)
from kvlab.course.lab_setup import admit as _admit
from kvlab.course.lab_setup import full_attention_manager, request_factory
from kvlab.course.check import Exercise, register


def _setup():
    """Notebook 3's manager, recorder and admit(), with x and a admitted, a and x freed, b admitted."""
    from kvlab.trace import Recorder

    manager = full_attention_manager(15, 4)
    recorder = Recorder().attach(manager)
    make = request_factory(4)

    def admit(request_id, prompt):
        req = make(request_id, prompt)
        return req, _admit(manager, req)

    x, _ = admit("x", list(range(1000, 1036)))
    a, _ = admit("a", list(range(20)))
    manager.free(a)
    manager.free(x)
    b, _ = admit("b", list(range(12)) + [500, 501, 502, 503, 504])
    return manager, recorder, admit, b


def hit_of_c() -> int:
    """Tokens hit by c = a's 20 tokens, admitted after b (tokens)."""
    return _setup()[2]("c", list(range(20)))[1]


def free_b() -> tuple[list[int], list[int]]:
    """(order in which b's blocks join the queue, those of them that keep a block_hash)."""
    manager, _, _, b = _setup()
    before = {blk.block_id for blk in manager.block_pool.free_block_queue.get_all_free_blocks()}
    manager.free(b)
    queue = [blk.block_id for blk in manager.block_pool.free_block_queue.get_all_free_blocks()]
    joined = [i for i in queue if i not in before]
    return joined, [i for i in joined if manager.block_pool.blocks[i].block_hash is not None]


def first_three_reused() -> tuple[list[int], list[int]]:
    """Blocks a fresh 3-block request takes after free(a), free(x): vLLM's reversed order, and
    what a forward order would give."""
    taken = []
    for reverse in (True, False):
        pool = BlockPool(num_gpu_blocks=15, enable_caching=True, hash_block_size=4)
        x_blocks, a_blocks = pool.get_new_blocks(9), pool.get_new_blocks(5)
        for blocks in (a_blocks, x_blocks):
            pool.free_blocks(reversed(blocks) if reverse else blocks)
        taken.append([blk.block_id for blk in pool.get_new_blocks(3)])
    return taken[0], taken[1]


def call_that_removes_block_12() -> str:
    """Name of the call in which block 12 leaves the free queue (REMOVE event)."""
    from kvlab.trace import EventKind

    trace = _setup()[1].trace()
    for i in trace.filter(EventKind.REMOVE):
        if trace[int(i)].fields["block_id"] == 12:
            return trace.call(int(i)).name
    return ""


register(Exercise(
    id="03.1",
    question="Admit a request c with all of a's 20 tokens after b: how many tokens does it hit?",
    solve=hit_of_c,
    hint="b's allocate_slots evicted two of a's cached blocks (lazy eviction), and the "
    "num_tokens - 1 cap would stop at 16 anyway.",
    explain="Blocks 10-12 are still cached (b holds them); a's 4th block was evicted for b.",
    mistakes=((20, "the last token is always recomputed: at most num_tokens - 1."),
              (16, "a's 4th block (tokens 12-15) was evicted when b popped block 14.")),
))  # fmt: skip
register(Exercise(
    id="03.2",
    question="Free b: in which order do its blocks join the queue, and which of them keep a "
    "block_hash? Answer (order, hashed).",
    solve=free_b,
    hint="free() passes a request's blocks reversed (tail first); only full blocks were cached.",
    explain="b's last, partial block joins first; its full blocks keep their hashes.",
    mistakes=((([10, 11, 12, 14, 13], [10, 11, 12, 14]), "free appends a request's blocks reversed."),),
))  # fmt: skip
register(Exercise(
    id="03.3",
    question="After free(a) and free(x), a request sharing nothing takes 3 new blocks. Which "
    "blocks, with vLLM's reversed order; and with a forward order? Answer (reversed, forward).",
    solve=first_three_reused,
    hint="popleft_n takes from the head; free_blocks appends in the order it is given.",
    explain="Reversed order sacrifices a's tail and keeps its head (the shareable prefix) longest.",
    mistakes=((([10, 11, 12], [14, 13, 12]), "you swapped them: vLLM frees tail first."),),
))  # fmt: skip
register(Exercise(
    id="03.4",
    question="In which call does block 12 leave the free queue (the REMOVE event)?",
    solve=call_that_removes_block_12,
    hint="trace.call(i).name for the REMOVE event of block 12; the lookup only reads the cache.",
    explain="allocate_slots touches the hit blocks; get_computed_blocks never changes the pool.",
    mistakes=(("get_computed_blocks", "the lookup touches nothing; the touch comes later."),),
))  # fmt: skip


def design_doc_time_7(num_shared: int = 12) -> list[int]:
    """vLLM's prefix-caching design doc example up to Time 7, request 2 sharing ``num_shared``
    of request 0's tokens: request 2's blocks, numbered as the doc does (block_id - 1)."""
    manager, make = full_attention_manager(11, 4), request_factory(4)
    req0 = make("req0", list(range(200, 215)))
    _admit(manager, req0)
    for token in (215, 216):  # Time 2 and 3: two decode steps
        req0.append_output_token_ids(token)
        manager.allocate_slots(req0, 1)
        req0.num_computed_tokens += 1
    req1 = make("req1", list(range(200, 210)) + [300, 301, 302, 303])
    _admit(manager, req1)
    manager.free(req0)
    manager.free(req1)
    shared = req0.all_token_ids[:num_shared]
    req2 = make("req2", shared + list(range(400, 400 + 29 - num_shared)))
    _admit(manager, req2)
    return [i - 1 for i in manager.get_block_ids("req2")[0]]


register(Exercise(
    id="03.5",
    question="In the design doc's example, let request 2 share the first 16 tokens of request 0 "
    "(not 12; still 29 tokens). Which blocks does it get (the doc's numbering, block_id - 1)?",
    solve=lambda num_shared=16: design_doc_time_7(num_shared),
    hint="request 0's 16th token (its first generated one) filled block 3 at Time 2, so block 3 "
    "is cached too; then count the new blocks and pop them from the queue's head.",
    explain="4 hits are touched out of the queue (0, 1, 2, 3); the 4 new blocks come from the head "
    "(7, 8, 9, 4), and nothing cached is evicted this time.",
    mistakes=(([0, 1, 2, 7, 8, 9, 4, 3], "that is the doc's case, with 12 shared tokens."),),
))  # fmt: skip
