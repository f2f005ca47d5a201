"""Notebook 9's exercises (the worker side: block table, slot mapping, kernel blocks)."""

from __future__ import annotations

import os

import numpy as np

from kvlab.core import (
    FullAttentionSpec,
    KVCacheConfig,
    KVCacheGroupSpec,
    KVCacheManager,
    Request,
    SamplingParams,
    SlidingWindowSpec,
    get_request_block_hasher,
    init_none_hash,
    sha256,
)
from kvlab.course.check import Exercise, register


def _table():
    from kvlab.worker import BlockTable

    table = BlockTable(block_size=4, max_num_reqs=3, max_num_blocks_per_req=4, max_num_batched_tokens=8)
    for row, ids in enumerate([[5, 8], [2, 3, 10], [12]]):
        table.add_row(ids, row)
    return table


def two_requests(positions: tuple[int, ...] = (0, 4, 8, 11)) -> list[int]:
    """Slots of tokens of rows 0, 0, 1, 1 at ``positions`` in notebook 9's table."""
    return _table().compute_slot_mapping(np.array([0, 0, 1, 1]), np.array(positions))[:4].tolist()


def past_the_row() -> str:
    """Exception class name for position 9 of row 0 (which holds 2 blocks of 4)."""
    try:
        _table().compute_slot_mapping(np.array([0]), np.array([9]))
    except Exception as exc:  # noqa: BLE001 - the exercise asks which one
        return type(exc).__name__
    return "none"


def hybrid_after_decoding(num_decode_steps: int = 8) -> list[int]:
    """The sliding-window group's block ids (manager) after h decodes ``num_decode_steps`` tokens."""
    os.environ.setdefault("PYTHONHASHSEED", "0")
    init_none_hash(sha256)
    common = dict(block_size=4, num_kv_heads=1, head_size=2, dtype="float32")
    config = KVCacheConfig(32, [], [KVCacheGroupSpec(["global"], FullAttentionSpec(**common)),
                                    KVCacheGroupSpec(["local"], SlidingWindowSpec(**common, sliding_window=8))])
    manager = KVCacheManager(config, max_model_len=64, hash_block_size=4)
    h = Request("h", list(range(20)), SamplingParams(max_tokens=16), None,
                block_hasher=get_request_block_hasher(4, sha256))  # fmt: skip
    manager.allocate_slots(h, 16)
    h.num_computed_tokens = 16
    manager.allocate_slots(h, 4)
    h.num_computed_tokens = 20
    for step in range(num_decode_steps):
        h.append_output_token_ids(100 + step)
        manager.allocate_slots(h, 1)
        h.num_computed_tokens += 1
    return manager.get_block_ids("h")[1]


def kernel_row(kernel_block_size: int = 8) -> list[int]:
    """Kernel block ids for allocator blocks [7, 3] of 32 tokens."""
    from kvlab.worker import BlockTable

    split = BlockTable(block_size=32, max_num_reqs=1, max_num_blocks_per_req=4,
                       max_num_batched_tokens=8, kernel_block_size=kernel_block_size)  # fmt: skip
    split.add_row([7, 3], 0)
    return list(split.get_row(0))


register(Exercise(
    id="09.1",
    question="One step schedules 4 tokens: rows [0, 0, 1, 1] at positions [0, 4, 8, 11]. Their slots?",
    solve=two_requests,
    hint="slot = row[pos // 4] * 4 + pos % 4, with rows [5, 8] and [2, 3, 10].",
    explain="Each token's slot comes from its own request's row.",
    mistakes=(([20, 32, 8, 11], "position 8 of row 1 is in its 3rd block, block 10."),),
))  # fmt: skip
register(Exercise(
    id="09.2",
    question="compute_slot_mapping for position 9 of row 0 (2 blocks of 4): which exception?",
    solve=past_the_row,
    hint="try it; kvlab checks what a GPU kernel would not.",
    explain="On a GPU the row's padding (block 0) would be used: the write would land in the "
    "null block's memory or another request's, silently.",
    mistakes=(("none", "kvlab refuses a position its row cannot hold."),),
))  # fmt: skip
register(Exercise(
    id="09.3",
    question="In the hybrid example, decode 8 more tokens: which block ids does the "
    "sliding-window group's list (the manager's) name then?",
    solve=hybrid_after_decoding,
    hint="each allocate_slots first nulls the blocks made only of tokens the window (8) will "
    "never read again; print hybrid.get_block_ids('h')[1] after each decode step.",
    explain="Everything before the window is the null block; only the blocks the window still "
    "covers are real.",
    mistakes=(([0, 0, 7, 8, 10], "that is before the 8 decode steps."),),
))  # fmt: skip
register(Exercise(
    id="09.4",
    question="With kernel_block_size = 8 and block_size = 32, what is the kernel row of "
    "allocator blocks [7, 3]?",
    solve=kernel_row,
    hint="each allocator block b becomes 32 // 8 = 4 kernel blocks: 4b, 4b+1, 4b+2, 4b+3.",
    explain="The split renumbers the same memory.",
    mistakes=(([14, 15, 6, 7], "that is the 16-token kernel split."),),
))  # fmt: skip
