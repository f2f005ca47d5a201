"""Notebook 7's exercises (hybrid models, the fixed-point cache hit)."""

from __future__ import annotations

import os

from kvlab.core import (
    FullAttentionSpec,
    KVCacheConfig,
    KVCacheGroupSpec,
    KVCacheManager,
    MambaSpec,
    Request,
    SamplingParams,
    SlidingWindowSpec,
    VllmConfig,
    get_kv_cache_config,
    get_kv_cache_groups,
    get_request_block_hasher,
    init_none_hash,
    sha256,
)
from kvlab.course.check import Exercise, register


def _full(block_size: int = 4, num_kv_heads: int = 1) -> FullAttentionSpec:
    return FullAttentionSpec(block_size=block_size, num_kv_heads=num_kv_heads, head_size=1,
                             dtype="float32")  # fmt: skip


def _window(sliding_window: int, block_size: int = 4, num_kv_heads: int = 1) -> SlidingWindowSpec:
    return SlidingWindowSpec(block_size=block_size, num_kv_heads=num_kv_heads, head_size=1,
                             dtype="float32", sliding_window=sliding_window)  # fmt: skip


MAX_MODEL_LEN = 48
"""Tokens. vLLM's get_kv_cache_configs checks one max_model_len request against the pool that
num_gpu_blocks_override gives: 48 tokens fit 80 blocks of the Gemma-3-like model (12 full-attention
blocks + 5 window groups x 13) and 40 blocks of the three-group model (12 + 13 + 13)."""


def _manager_from_layers(kv_cache_spec: dict, num_blocks: int = 80):
    """Notebook 7's ``build_from_layers``: vLLM's grouping and tensors, ``num_blocks`` blocks."""
    os.environ.setdefault("PYTHONHASHSEED", "0")
    init_none_hash(sha256)
    vllm_config = VllmConfig(max_model_len=MAX_MODEL_LEN, num_gpu_blocks_override=num_blocks)
    config = get_kv_cache_config(vllm_config, kv_cache_spec, available_memory=1 << 20)
    return KVCacheManager(config, max_model_len=MAX_MODEL_LEN, hash_block_size=4)


def _make(request_id: str, prompt: list[int]) -> Request:
    return Request(request_id, prompt, SamplingParams(max_tokens=8), None,
                   block_hasher=get_request_block_hasher(4, sha256))  # fmt: skip


def _gemma_layers() -> dict:
    return {f"layers.{i}": _full() if i % 6 == 5 else _window(8) for i in range(12)}


def gemma_hit_after_evicting_full_block(block_index: int = 1) -> int:
    """b's hit (tokens) when the full-attention copy of a's block ``block_index`` is evicted."""
    manager = _manager_from_layers(_gemma_layers())
    a = _make("a", list(range(21)))
    manager.allocate_slots(a, 21)
    full_group = next(i for i, g in enumerate(manager.kv_cache_config.kv_cache_groups)
                      if isinstance(g.kv_cache_spec, FullAttentionSpec))  # fmt: skip
    victim = manager.get_block_ids("a")[full_group][block_index]
    manager.free(a)
    manager.evict_blocks({victim})
    return manager.get_computed_blocks(_make("b", list(range(21)) + [9, 9, 9]))[1]


def num_rounds(window_12_first: bool = True) -> int:
    """Rounds of the fixed point for notebook 7's three-group lookup (window 12 evicted)."""
    from kvlab.trace import Recorder
    from kvlab.viz import fixed_point_rows

    layers = {"global": _full(), "local-8": _window(8), "local-12": _window(12)}
    if window_12_first:
        layers = {"local-12": layers["local-12"], "global": _full(), "local-8": _window(8)}
    manager = _manager_from_layers(layers, num_blocks=40)
    recorder = Recorder().attach(manager)
    a = _make("a", list(range(21)))
    manager.allocate_slots(a, 21)
    w12 = [g.layer_names for g in manager.kv_cache_config.kv_cache_groups].index(["local-12"])
    victim = manager.get_block_ids("a")[w12][3]
    manager.free(a)
    manager.evict_blocks({victim})
    manager.get_computed_blocks(_make("b", list(range(21))))
    trace = recorder.trace()
    rows = fixed_point_rows(trace, trace.calls("get_computed_blocks")[-1])
    return max(row.iteration for row in rows) + 1


def jamba_same_step() -> tuple[int, bool]:
    """(b's hit in tokens, whether allocate_slots refused it) without new_step_starts()."""
    os.environ.setdefault("PYTHONHASHSEED", "0")
    init_none_hash(sha256)
    mamba = MambaSpec(block_size=4, shapes=((1, 1),), dtypes=("float32",))
    config = KVCacheConfig(40, [], [KVCacheGroupSpec(["attention layers"], _full()),
                                    KVCacheGroupSpec(["mamba layers"], mamba)])  # fmt: skip
    manager = KVCacheManager(config, max_model_len=256, hash_block_size=4)
    a = _make("a", list(range(21)))
    manager.allocate_slots(a, 21)
    a.num_computed_tokens = 21
    b = _make("b", list(range(20)) + [5, 5, 5])
    blocks, num_hit = manager.get_computed_blocks(b)
    return num_hit, manager.allocate_slots(b, b.num_tokens - num_hit, num_hit, blocks) is None


def mixed_hits(full_block_size: int = 16) -> list[int]:
    """Hits (tokens) of the 13-, 21- and 37-token probes with full(block_size=16) and a
    4-token-block window whose page size equals it (num_kv_heads = 16 // 4)."""
    manager = _manager_from_layers(
        {"global": _full(full_block_size),
         "local": _window(8, block_size=4, num_kv_heads=full_block_size // 4)}, num_blocks=40)  # fmt: skip
    manager.allocate_slots(_make("a", list(range(40))), 40)
    return [manager.get_computed_blocks(_make(f"probe-{n}", list(range(n))))[1] for n in (13, 21, 37)]


register(Exercise(
    id="07.1",
    question="In the Gemma-3-like model, evict the full-attention copy of a's block 1 instead: "
    "how many tokens does b hit?",
    solve=gemma_hit_after_evicting_full_block,
    hint="full attention scans left to right and stops at the first miss; then the window "
    "groups check that length.",
    explain="Full attention shortens first, to 1 block; the window groups accept it.",
    mistakes=((12, "12 was the hit when a window copy was evicted."),
              (0, "block 0 is still cached in every group.")),
))  # fmt: skip
register(Exercise(
    id="07.2",
    question="In the three-group model, put the window-12 layer first: how many rounds does the "
    "fixed point take now?",
    solve=num_rounds,
    hint="read the iteration numbers of fixed_point_rows: the fixed point stops after a round "
    "in which nobody shortened.",
    explain="Still 2: window 12 now shortens earlier in round 0, but any shortening in a round "
    "starts another round, which confirms 12.",
    mistakes=((1, "a round in which some group shortened is always followed by another."),),
))  # fmt: skip
register(Exercise(
    id="07.3",
    question="Jamba-like, without new_step_starts(): b's hit (tokens), and is its allocate_slots "
    "refused? Answer (num_hit, refused).",
    solve=jamba_same_step,
    hint="the lookup finds the Mamba state block; allocate_slots asks for num_gpu_blocks + 1 "
    "blocks when that block was cached in this very step.",
    explain="The state block cached this step may not be written yet: the request waits a step.",
    mistakes=(((20, False), "look at what allocate_slots returns: a refused allocation is None."),
              ((0, True), "the lookup itself does hit.")),
))  # fmt: skip
register(Exercise(
    id="07.4",
    question="Mixed block sizes with full(block_size=16) and a window of 4-token blocks (4 KV "
    "heads, so the page sizes match): the hits of the 13-, 21- and 37-token probes? Answer a list.",
    solve=mixed_hits,
    hint="every hit is a multiple of lcm(16, 4) = 16 and at most num_tokens - 1.",
    explain="The full group's 16-token blocks round every hit down to a multiple of 16.",
    mistakes=(([8, 16, 32], "those were the hits with 8-token full-attention blocks."),),
))  # fmt: skip


def doc_bad_ratio(num_full: int = 20, num_sw: int = 30) -> list[int]:
    """Real layers per KV cache group vLLM 0.22.1 builds for num_full full + num_sw SW layers."""
    layers = {**{f"full.{i}": _full(16) for i in range(num_full)},
              **{f"sw.{i}": _window(32, 16) for i in range(num_sw)}}  # fmt: skip
    return [len(g.layer_names) for g in get_kv_cache_groups(VllmConfig(), layers)]


register(Exercise(
    id="07.5",
    question="The hybrid design doc admits its grouping is poor for 20 full + 30 sliding-window "
    "layers. How many real layers does each group vLLM 0.22.1 builds hold? Answer a list.",
    solve=doc_bad_ratio,
    hint="the group size is the smallest layer count (20) unless the largest is under 1.5 times "
    "it; a type's layers are dealt out with layers[i::num_groups].",
    explain="20 layers a group: 1 full group, and cdiv(30, 20) = 2 sliding-window groups of 15 "
    "real layers plus 5 padding slots each.",
    mistakes=(([10, 10, 10, 10, 10], "that is the group size the doc says it should use, not "
               "what vLLM 0.22.1 builds."),
              ([20, 20, 10], "layers are dealt out interleaved, not sliced: the two groups are "
               "equal.")),
))  # fmt: skip
