"""Replay recorded vLLM 0.22.1 decisions through kvlab.core (no vLLM needed).

Each fixture record holds one seed's config and its steps: ``["c", method, args, result]`` (a call
and vLLM's return value) and ``["s", delta]`` (the observable state after an operation, as a delta).
``replay_record`` builds kvlab's manager for the config, makes the same calls in the same order and
raises ``ReplayMismatch`` at the first return value or state field that differs.
"""
from __future__ import annotations

import gzip
import os
from pathlib import Path
from typing import Any

import cbor2

from kvlab.core import kv_cache_utils as _block_hash
from kvlab.core import kv_cache_utils as kcu
from kvlab.core.kv_cache_interface import (
    ChunkedLocalAttentionSpec,
    FullAttentionSpec,
    KVCacheConfig,
    KVCacheGroupSpec,
    SlidingWindowSpec,
)
from kvlab.core.kv_cache_manager import KVCacheManager
from kvlab.core.request import Request, SamplingParams

try:  # the tests directory is not a package: import the codec as a sibling module
    from oracle_codec import FORMAT_VERSION, Interner, apply_state_delta, norm
except ImportError:  # pragma: no cover - imported as tests.oracle.oracle_replay
    from .oracle_codec import FORMAT_VERSION, Interner, apply_state_delta, norm

FIXTURES = Path(__file__).resolve().parent / "fixtures"
_STATS_FIELDS = ("requests", "queries", "hits", "reset",
                 "preempted_requests", "preempted_queries", "preempted_hits")


class ReplayMismatch(AssertionError):
    """kvlab decided differently from the recorded vLLM decision."""


def load_fixture(path: Path) -> dict:
    doc = cbor2.loads(gzip.decompress(path.read_bytes()))
    if doc.get("format") != FORMAT_VERSION:
        raise ValueError(f"{path.name}: fixture format {doc.get('format')}, replay reads {FORMAT_VERSION}")
    return doc


def _ids(kv_blocks):
    return None if kv_blocks is None else [list(g) for g in kv_blocks.get_block_ids()]


def _event(ev) -> tuple:
    name = type(ev).__name__
    if name == "BlockStored":
        kind = getattr(ev, "kv_cache_spec_kind", None)
        extra = getattr(ev, "extra_keys", None)
        return (name, tuple(ev.block_hashes), ev.parent_block_hash, tuple(ev.token_ids), ev.block_size,
                getattr(ev, "lora_id", None), getattr(ev, "medium", None), getattr(ev, "lora_name", None),
                None if extra is None else tuple(None if k is None else tuple(k) for k in extra),
                getattr(ev, "group_idx", None),
                None if kind is None else str(getattr(kind, "value", kind)),
                getattr(ev, "kv_cache_spec_sliding_window", None))
    if name == "BlockRemoved":
        return (name, tuple(ev.block_hashes), getattr(ev, "medium", None), getattr(ev, "group_idx", None))
    return (name,)


class KvlabSide:
    """One kvlab KV-cache manager driven by recorded calls (the oracle's operations, by name)."""

    def __init__(self, cfg: dict):
        self.cfg = cfg
        groups = []
        for i, g in enumerate(cfg["groups"]):
            common = dict(block_size=g["bs"], num_kv_heads=g.get("heads", 1), head_size=1, dtype="float32")
            if g["kind"] == "full":
                spec = FullAttentionSpec(**common)
            elif g["kind"] == "sw":
                spec = SlidingWindowSpec(**common, sliding_window=g["window"])
            elif g["kind"] == "chunked":
                spec = ChunkedLocalAttentionSpec(**common, attention_chunk_size=g["chunk"])
            else:
                raise ValueError(f"unknown group kind {g['kind']!r}")
            groups.append(KVCacheGroupSpec([f"layer{i}"], spec, is_eagle_group=bool(g.get("eagle"))))
        config = KVCacheConfig(num_blocks=cfg["num_blocks"], kv_cache_tensors=[], kv_cache_groups=groups)
        self.mgr = KVCacheManager(
            config, max_model_len=cfg["max_model_len"], hash_block_size=cfg["hash_block_size"],
            max_num_batched_tokens=cfg["max_num_batched_tokens"], enable_caching=cfg["enable_caching"],
            use_eagle=cfg["use_eagle"], log_stats=cfg["log_stats"], enable_kv_cache_events=cfg["events"])
        self.hasher = (kcu.get_request_block_hasher(cfg["hash_block_size"], kcu.sha256)
                       if cfg["enable_caching"] else None)
        self.reqs: dict[str, Request] = {}
        self.live: list[str] = []
        self.hits: dict[str, Any] = {}

    # ---- the oracle's operations ------------------------------------------------------------
    def add_request(self, rid, tokens, max_tokens):
        self.reqs[rid] = Request(rid, list(tokens), SamplingParams(max_tokens=max_tokens), None,
                                 block_hasher=self.hasher)
        self.live.append(rid)
        return len(self.reqs[rid].block_hashes)

    def get_computed_blocks(self, rid):
        blocks, n = self.mgr.get_computed_blocks(self.reqs[rid])
        self.hits[rid] = blocks
        return (n, _ids(blocks))

    def allocate_slots(self, rid, num_new, num_new_computed, use_hit, lookahead, must_fit):
        hit = self.hits.pop(rid, None) if use_hit else None
        return _ids(self.mgr.allocate_slots(
            self.reqs[rid], num_new, num_new_computed_tokens=num_new_computed, new_computed_blocks=hit,
            num_lookahead_tokens=lookahead, full_sequence_must_fit=must_fit))

    def set_num_computed_tokens(self, rid, n):
        self.reqs[rid].num_computed_tokens = n

    def append_tokens(self, rid, toks):
        self.reqs[rid].append_output_token_ids(list(toks))
        return len(self.reqs[rid].block_hashes)

    def preempt(self, rid):  # Scheduler._preempt_request's KV-cache part
        req = self.reqs[rid]
        self.mgr.free(req)
        req.num_computed_tokens = 0
        req.num_preemptions += 1

    def finish(self, rid):
        self.mgr.free(self.reqs[rid])
        self.live.remove(rid)

    def cache_blocks(self, rid, num_computed_tokens):
        self.mgr.cache_blocks(self.reqs[rid], num_computed_tokens)

    def remove_skipped_blocks(self, rid, total_computed_tokens):
        self.mgr.remove_skipped_blocks(rid, total_computed_tokens)
        return [list(g) for g in self.mgr.get_block_ids(rid)]

    def evict_blocks(self, ids):
        self.mgr.evict_blocks(set(ids))

    def reset_prefix_cache(self):
        return self.mgr.reset_prefix_cache()

    def new_step_starts(self):
        self.mgr.new_step_starts()

    def take_new_block_ids(self):
        return list(self.mgr.take_new_block_ids())

    def get_num_common_prefix_blocks(self, rid):
        return list(self.mgr.get_num_common_prefix_blocks(rid))

    def make_prefix_cache_stats(self):
        s = self.mgr.make_prefix_cache_stats()
        return None if s is None else [[f, getattr(s, f)] for f in _STATS_FIELDS]

    def take_events(self):
        return [_event(e) for e in self.mgr.take_events()]

    # ---- observable state (the same fields, in the same shape, as recorded) -------------------
    def snapshot(self) -> dict:
        mgr, pool = self.mgr, self.mgr.block_pool
        cmap = pool.cached_block_hash_to_block
        cmap = cmap if isinstance(cmap, dict) else cmap._cache
        return {
            "num_free_blocks": pool.get_num_free_blocks(),
            "free_queue(head->tail)": [b.block_id for b in pool.free_block_queue.get_all_free_blocks()],
            "blocks(ref_cnt,hash)": [(None if b.is_null else b.ref_cnt, b.block_hash) for b in pool.blocks],
            "null_block": [b.block_id for b in pool.blocks if b.is_null],
            "cached_map(key->block ids)": {
                k: list(v) if isinstance(v, dict) else [v.block_id] for k, v in cmap.items()},
            "usage": mgr.usage,
            "req_block_ids": {rid: [list(g) for g in mgr.get_block_ids(rid)] for rid in self.live},
            "req_block_hashes": {rid: len(self.reqs[rid].block_hashes) for rid in self.live},
            "internal:null_ref_cnt": pool.null_block.ref_cnt,
            "internal:num_cached_block": [sorted(stm.num_cached_block.items())
                                          for stm in mgr.coordinator.single_type_managers],
            "internal:req_to_blocks(nonempty rids)": [
                sorted(r for r, bl in stm.req_to_blocks.items() if bl)
                for stm in mgr.coordinator.single_type_managers],
        }


def _describe(cfg: dict) -> str:
    keys = ("num_blocks", "hash_block_size", "enable_caching", "use_eagle", "lookahead",
            "max_model_len", "max_num_batched_tokens", "events", "log_stats", "must_fit")
    return f"groups={cfg['groups']} " + " ".join(f"{k}={cfg[k]}" for k in keys)


def replay_record(rec: dict) -> int:
    """Replay one seed; returns the number of steps checked, raises ``ReplayMismatch``."""
    old_seed, old_none = os.environ.get("PYTHONHASHSEED"), getattr(_block_hash, "NONE_HASH", None)
    os.environ["PYTHONHASHSEED"] = "0"  # vLLM seeds NONE_HASH from it; the fixtures used "0"
    try:
        kcu.init_none_hash(kcu.sha256)
        return _replay(rec)
    finally:
        if old_seed is None:
            os.environ.pop("PYTHONHASHSEED", None)
        else:
            os.environ["PYTHONHASHSEED"] = old_seed
        if old_none is None:
            vars(_block_hash).pop("NONE_HASH", None)
        else:
            _block_hash.NONE_HASH = old_none


def _replay(rec: dict) -> int:
    side = KvlabSide(rec["config"])
    intern = Interner(expected=rec["hashes"])
    state: dict = {}
    history: list[str] = []
    for n, step in enumerate(rec["steps"]):
        where = f"seed {rec['seed']} ({rec['family']}) step {n}"
        if step[0] == "c":
            _, method, args, want = step
            history.append(f"{method}{tuple(args)} -> {want}")
            try:
                got = norm(getattr(side, method)(*args), intern)
            except ReplayMismatch:
                raise
            except Exception as ex:  # noqa: BLE001 - vLLM did not raise here
                raise ReplayMismatch(f"{where}: {method}{tuple(args)} raised {type(ex).__name__}: {ex} "
                                     f"(vLLM returned {want!r})\n{_context(rec, history)}") from ex
            if got != want:
                raise ReplayMismatch(f"{where}: return value of {method}{tuple(args)}: kvlab {got!r} != "
                                     f"vLLM {want!r}\n{_context(rec, history)}")
        else:
            state = apply_state_delta(state, step[1])
            got_state = {k: norm(v, intern) for k, v in side.snapshot().items()}
            for key, want in state.items():
                got = got_state.get(key, "<missing>")
                if got != want:
                    raise ReplayMismatch(f"{where}: state {key}: kvlab {got!r} != vLLM {want!r}\n"
                                         f"{_context(rec, history)}")
    if intern.table != rec["hashes"]:
        raise ReplayMismatch(f"seed {rec['seed']}: kvlab saw {len(intern.table)} distinct hashes, "
                             f"vLLM {len(rec['hashes'])}")
    return len(rec["steps"])


def _context(rec: dict, history: list[str]) -> str:
    last = "\n".join(f"    {h}" for h in history[-8:])
    return f"  config: {_describe(rec['config'])}\n  last calls (vLLM's results):\n{last}"
