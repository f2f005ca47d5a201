"""Notebook 13's exercises (the layers, and a block's life)."""

from __future__ import annotations

import sys

from kvlab.core import (
    Request,
    SamplingParams,
    get_request_block_hasher,
    sha256,
)
from kvlab.course.lab_setup import admit as _admit
from kvlab.course.lab_setup import full_attention_manager, request_factory
from kvlab.course.check import Exercise, register

_LAYERS = ("KVCacheManager", "KVCacheCoordinator", "SingleTypeKVCacheManager", "BlockPool")


def _setup():
    """Notebook 13's manager (10 blocks of 4 tokens) and an admit() that looks up, then allocates."""
    manager = full_attention_manager(10, 4, layer="layers")
    make = request_factory(4)
    hasher = get_request_block_hasher(4, sha256)

    def admit(request_id: str, prompt: list[int]) -> Request:
        req = make(request_id, prompt)
        _admit(manager, req)
        return req

    return manager, admit, hasher


def touch_caller() -> str:
    """The layer whose method calls BlockPool.touch in one live allocate_slots (profiled)."""
    manager, admit, hasher = _setup()
    admit("a", list(range(10)))
    b = Request("b", list(range(8)) + [50, 51, 52, 53, 54], SamplingParams(max_tokens=8), None,
                block_hasher=hasher)  # fmt: skip
    hit_blocks, num_hit = manager.get_computed_blocks(b)
    stack: list[str] = []
    found: list[str] = []

    def profile(frame, event, arg):
        owner = frame.f_code.co_qualname.partition(".")[0]
        if event == "call":
            if owner == "BlockPool" and frame.f_code.co_name == "touch":
                found.append(next(o for o in reversed(stack) if o in _LAYERS))
            stack.append(owner)
        elif event == "return" and stack:
            stack.pop()

    sys.setprofile(profile)
    try:
        manager.allocate_slots(b, b.num_tokens - num_hit, num_hit, hit_blocks)
    finally:
        sys.setprofile(None)
    return found[0]


def common_prefix() -> list[int]:
    """get_num_common_prefix_blocks("a") with a, b (a's first 8 tokens) and e (all of a's) running."""
    manager, admit, _ = _setup()
    admit("a", list(range(10)))
    admit("b", list(range(8)) + [50, 51, 52, 53, 54])
    admit("e", list(range(10)))
    return manager.get_num_common_prefix_blocks("a")


register(Exercise(
    id="13.1",
    question="Which layer's method calls BlockPool.touch in b's allocate_slots?",
    solve=touch_caller,
    hint="Find BlockPool.touch in the printed call tree and read the line it is indented under.",
    explain="The single-type manager (here FullAttentionManager, a SingleTypeKVCacheManager) "
    "touches the hit blocks in allocate_new_computed_blocks; the coordinator only fans out.",
    mistakes=(("KVCacheManager", "the manager never touches blocks itself: it calls the coordinator."),
              ("KVCacheCoordinator", "the coordinator fans out to one manager per group.")),
))  # fmt: skip
register(Exercise(
    id="13.2",
    question="With a, b and e running, what does get_num_common_prefix_blocks('a') return?",
    solve=common_prefix,
    hint="e's lookup stops at num_tokens - 1 = 9 tokens, so it hits only a's two full blocks; a "
    "block is common when all three requests hold it.",
    explain="Blocks 1 and 2 have ref_cnt 3; a's third block is its own partial block.",
    mistakes=(([3], "e does not hit a's third block: it is partial, never cached."),
              ([1], "that was with c, which shared only 4 tokens.")),
))  # fmt: skip


def gated_path() -> tuple[str, ...]:
    """allocate_slots_flow(...).steps of a 40-token request asking for its first 4 tokens with
    full_sequence_must_fit=True, after notebook 13's a and b."""
    from kvlab.trace import Recorder
    from kvlab.viz import allocate_slots_flow

    manager, admit, _ = _setup()
    recorder = Recorder().attach(manager)
    admit("a", list(range(10)))
    admit("b", list(range(8)) + [50, 51, 52, 53, 54])
    huge = Request("huge", list(range(1000, 1040)), SamplingParams(max_tokens=8), None,
                   block_hasher=get_request_block_hasher(4, sha256))  # fmt: skip
    manager.allocate_slots(huge, 4, full_sequence_must_fit=True)
    trace = recorder.trace()
    return allocate_slots_flow(trace, trace.calls("allocate_slots", request="huge")[-1]).steps


register(Exercise(
    id="13.3",
    question="After a and b, a 40-token request asks allocate_slots for its first 4 tokens with "
    "full_sequence_must_fit=True. What is its path (allocate_slots_flow(...).steps)?",
    solve=gated_path,
    hint="4 tokens fit in the free blocks, but the gate asks about the whole request first.",
    explain="The admission gate refuses before remove_skipped_blocks: the whole request needs 10 "
    "blocks and 4 are free.",
    mistakes=((("remove_skipped_blocks", "fits", "return_none"), "that is a refusal by the "
               "free-blocks check; the gate comes first."),
              (("full_sequence_must_fit", "remove_skipped_blocks", "fits", "allocate_new_blocks",
                "cache_blocks", "return_blocks"), "the gate checks the whole request, not the "
               "4 tokens of this step.")),
))  # fmt: skip
