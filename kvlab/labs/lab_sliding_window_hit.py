"""Lab ``sliding_window_hit``: the learner writes SlidingWindowManager's lookup
(find_longest_cache_hit, right to left), get_num_skipped_tokens and remove_skipped_blocks.

The learner's class is the manager the coordinators build for every sliding-window group;
scheduler workloads over a sliding window alone, beside full attention (one window or two, equal
or mixed block sizes) and with EAGLE are replayed and compared with vLLM 0.22.1 after every call.
Mistakes are recognised by replaying the scenario with a model of each.
"""

from __future__ import annotations

from typing import Any

from kvlab.i18n import N_
from kvlab.labs.common import accept_class, manager_scenarios, recorded
from kvlab.labs.lab_full_attention_hit import _touches
from kvlab.labs.patterns import same_divergence
from kvlab.labs.plug import plugged
from kvlab.labs.registry import Accepted, Lab, Misconception, register
from kvlab.labs.sides import ManagerSide

__all__ = ["LAB", "window_model"]

FAMILIES = ("sw", "full+sw", "full+2sw", "mixed:full8+sw4", "mixed:full4+sw8")
METHODS = ("find_longest_cache_hit", "get_num_skipped_tokens", "remove_skipped_blocks")
NB6, NB4 = "06_sliding_window_and_chunked_local", "04_block_hashes_and_prefix_caching"


def _accept(value: Any) -> Accepted:
    from kvlab.core import SingleTypeKVCacheManager

    accepted = accept_class(value, "SlidingWindowManager", METHODS)
    if not issubclass(accepted.parts["SlidingWindowManager"], SingleTypeKVCacheManager):
        raise ValueError("SlidingWindowManager must subclass SingleTypeKVCacheManager (as in the skeleton)")
    return accepted


def _scenarios(seed: int) -> list:
    out = recorded("manager", lambda rec: rec.config["family"] in FAMILIES)
    out += manager_scenarios(["sw", "full+sw", "mixed:full4+sw8"], seed, 3, 45)
    return out


def _side(rec: Any, cls: Any) -> Any:
    from kvlab.core import SlidingWindowSpec

    return ManagerSide(rec.config, plug=lambda: plugged(managers={SlidingWindowSpec: cls}))


def _learner_side(rec: Any, accepted: Accepted) -> Any:
    return _side(rec, accepted.parts["SlidingWindowManager"])


def _reference_side(rec: Any) -> Any:
    return ManagerSide(rec.config)


# ------------------------------------------------------------------ models of the mistakes
def _cdiv(a: int, b: int) -> int:
    return -(a // -b)


def window_model(*, minus_one: bool = True, eagle_extra: bool = True, reset: bool = True,
                 left_to_right: bool = False, pad: bool = True, skipped_plus_one: bool = True,
                 backward: bool = True) -> Any:
    """kvlab's SlidingWindowManager with one mistake (keyword False / True where vLLM differs)."""
    from kvlab.core import SlidingWindowManager

    def find_longest_cache_hit(cls, block_hashes, max_length, kv_cache_group_ids, block_pool, kv_cache_spec,
                               use_eagle, alignment_tokens, dcp_world_size=1, pcp_world_size=1):  # fmt: skip
        bs = kv_cache_spec.block_size
        need = _cdiv(kv_cache_spec.sliding_window - (1 if minus_one else 0), bs) + (1 if use_eagle and eagle_extra else 0)
        n = max_length // bs
        groups = range(len(kv_cache_group_ids))
        computed = tuple([block_pool.null_block] * n for _ in groups)
        if left_to_right:
            computed = tuple([] for _ in groups)
            for i in range(n):
                hit = block_pool.get_cached_block(block_hashes[i], kv_cache_group_ids)
                if not hit:
                    break
                for c, b in zip(computed, hit):
                    c.append(b)
            found = False
        else:
            run, found = 0, False
            for i in range(n - 1, -1, -1):
                hit = block_pool.get_cached_block(block_hashes[i], kv_cache_group_ids)
                if hit:
                    if run == 0 and bs != alignment_tokens and ((i if use_eagle else i + 1) * bs) % alignment_tokens:
                        continue
                    for c, b in zip(computed, hit):
                        c[i] = b
                    run += 1
                    if run >= need:
                        for c in computed:
                            del c[i + run:]
                        found = True
                        break
                elif reset:
                    run = 0
            if not found:
                for c in computed:
                    del c[run:]

        def align() -> None:
            while bs != alignment_tokens and len(computed[0]) * bs % alignment_tokens:
                for c in computed:
                    c.pop()

        if not found:
            align()
        if use_eagle and computed[0]:
            for c in computed:
                c.pop()
            align()
        if not pad:
            computed = tuple([b for b in c if not b.is_null] for c in computed)
        return computed

    def get_num_skipped_tokens(self, num_computed_tokens):
        return max(0, num_computed_tokens - self.sliding_window + (1 if skipped_plus_one else 0))

    def remove_skipped_blocks(self, request_id, total_computed_tokens):
        skipped = self.get_num_skipped_tokens(total_computed_tokens)
        if skipped <= 0:
            return
        blocks = self.req_to_blocks[request_id]
        order = range(min(skipped // self.block_size, len(blocks)) - 1, -1, -1)
        removed = []
        for i in order:
            if blocks[i] == self._null_block:
                break
            removed.append(blocks[i])
            blocks[i] = self._null_block
        self.block_pool.free_blocks(removed if backward else removed[::-1])

    return type("SlidingWindowManager", (SlidingWindowManager,), {
        "find_longest_cache_hit": classmethod(find_longest_cache_hit),
        "get_num_skipped_tokens": get_num_skipped_tokens, "remove_skipped_blocks": remove_skipped_blocks})


def _model(**flags: Any) -> Any:
    def matches(div: Any) -> bool:
        return same_divergence(div, lambda: _side(div.recording, window_model(**flags)))

    return matches


CATALOGUE = (
    Misconception("sliding_window_hit.touches_on_lookup", N_("the lookup takes no reference"),
                  N_("get_computed_blocks only finds blocks: their ref_cnt and their place in the free queue stay as they are until allocate_slots touches them"),
                  "12_misconceptions", N_("6. \"The lookup takes a reference on the blocks it finds\""), _touches),
    Misconception("sliding_window_hit.window_off_by_one", N_("the next token is inside its own window"),
                  N_("a hit of n tokens lets token n read the sliding_window - 1 tokens before it: the run needs cdiv(sliding_window - 1, block_size) blocks, not cdiv(sliding_window, block_size)"),
                  NB6, N_("Sliding window: the hit is searched right to left"), _model(minus_one=False)),
    Misconception("sliding_window_hit.skipped_off_by_one", N_("which tokens a window skips"),
                  N_("after n computed tokens the next token (index n) reads tokens n - sliding_window + 1 .. n: the tokens before those are skipped, one more than n - sliding_window"),
                  NB6, N_("Sliding window: skipped tokens become null blocks"), _model(skipped_plus_one=False)),
    Misconception("sliding_window_hit.left_to_right", N_("a window's hit is searched right to left"),
                  N_("only the blocks just before the hit's end are read, so the search starts at the longest possible hit and walks back; blocks far left may be long gone (null) without spoiling the hit"),
                  NB6, N_("Sliding window: the hit is searched right to left"), _model(left_to_right=True)),
    Misconception("sliding_window_hit.no_null_padding", N_("skipped positions hold the null block"),
                  N_("the hit lists a block for every position up to its end: the positions before the window are block_pool.null_block, so the hit's length (in tokens) is its number of blocks times block_size"),
                  NB6, N_("Sliding window: skipped tokens become null blocks"), _model(pad=False)),
    Misconception("sliding_window_hit.no_reset_on_miss", N_("the window's blocks are contiguous"),
                  N_("a miss breaks the run: count cached blocks again from zero after a block that is not cached"),
                  NB6, N_("Sliding window: the hit is searched right to left"), _model(reset=False)),
    Misconception("sliding_window_hit.no_eagle_extra", N_("EAGLE needs one more block in the window"),
                  N_("with use_eagle the last matched block is dropped afterwards, so the run must be one block longer for the window to stay complete"),
                  NB4, N_("EAGLE: the last matched block is given back"), _model(eagle_extra=False)),
    Misconception("sliding_window_hit.remove_forward", N_("skipped blocks are freed from the window's edge backwards"),
                  N_("remove_skipped_blocks walks from the last skipped block towards the first and frees them in that order, so the later (longer-prefix) block is evicted first"),
                  NB6, N_("Sliding window: skipped tokens become null blocks"), _model(backward=False)),
)  # fmt: skip

LAB = register(Lab(
    name="sliding_window_hit",
    title=N_("SlidingWindowManager: the right-to-left hit and the skipped blocks"),
    notebook="lab05_sliding_window_hit",
    accept=_accept,
    scenarios=_scenarios,
    learner_side=_learner_side,
    reference_side=_reference_side,
    catalogue=CATALOGUE,
    after=("06_sliding_window_and_chunked_local", "07_hybrid_models_fixed_point"),
))  # fmt: skip
