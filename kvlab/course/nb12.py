"""Notebook 12's exercises (misconceptions, disproved live)."""

from __future__ import annotations

from kvlab.core import (
    Request,
    SamplingParams,
    get_request_block_hasher,
    sha256,
)
from kvlab.course.lab_setup import full_attention_manager
from kvlab.course.check import Exercise, register

_BLOCK_SIZE = 4


def _manager(num_blocks: int):
    from kvlab.trace import Recorder

    manager = full_attention_manager(num_blocks, _BLOCK_SIZE, layer="layers")
    return manager, Recorder().attach(manager), get_request_block_hasher(_BLOCK_SIZE, sha256)


def resume_hit(num_blocks: int = 13) -> int:
    """Tokens B hits when it resumes after its preemption (notebook 12, section 1)."""
    from kvlab.core.sched import Scheduler, SchedulerConfig

    manager, recorder, hasher = _manager(num_blocks)
    config = SchedulerConfig(max_num_seqs=4, max_num_batched_tokens=64, max_model_len=128)
    scheduler = Scheduler(manager, config, recorder=recorder)
    for name, start in (("A", 100), ("B", 200)):
        prompt = list(range(start, start + 20))
        scheduler.add_request(Request(name, prompt, SamplingParams(max_tokens=10), None,
                                      block_hasher=hasher))  # fmt: skip
    while scheduler.has_unfinished_requests():
        output = scheduler.schedule()
        scheduler.update_from_output(output, {r: [7] for r in output.num_scheduled_tokens})
    lookups = recorder.trace().calls("get_computed_blocks", request="B")
    return lookups[-1].result["num_new_computed_tokens"]


def children_blocks(prompt_len: int = 13, n: int = 4) -> int:
    """Blocks in use after the prefill of ``n`` parallel-sampling children of one prompt."""
    manager, _, hasher = _manager(16)
    for i in range(n):
        child = Request(f"{i}_req", list(range(300, 300 + prompt_len)), SamplingParams(max_tokens=8),
                        None, block_hasher=hasher)  # fmt: skip
        hit_blocks, num_hit = manager.get_computed_blocks(child)
        manager.allocate_slots(child, child.num_tokens - num_hit, num_hit, hit_blocks)
    return 15 - manager.block_pool.get_num_free_blocks()


register(Exercise(
    id="12.1",
    question="With a 13-block pool, how many tokens does the preempted B hit when it resumes?",
    solve=resume_hit,
    hint="B's freed blocks keep their hashes only until get_new_blocks pops them for A: count "
    "which of B's full blocks are still cached when B looks up again.",
    explain="Preemption frees and recomputes; whatever stayed cached is a hit, the rest is recomputed.",
    mistakes=((28, "that is the 16-block pool: with 13 blocks A took some of B's freed blocks."),
              (0, "B's freed blocks stay in the free queue with their block_hash until reused.")),
))  # fmt: skip
register(Exercise(
    id="12.2",
    question="Four children of one 13-token prompt (blocks of 4 tokens): how many blocks are in "
    "use after their prefill?",
    solve=children_blocks,
    hint="Only full blocks are shared through the prefix cache; each child's partial tail block is its own.",
    explain="3 full blocks shared (ref_cnt 4) + 4 tail blocks, one per child: no copy-on-write.",
    mistakes=((16, "full blocks are shared, not copied per child."),
              (4, "each child needs its own block for the partial tail.")),
))  # fmt: skip
