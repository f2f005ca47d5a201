"""One KV-cache manager driven by named operations, and its observable state after each.

A lab scenario is a list of operations in the vocabulary of the scheduler's calls into
``KVCacheManager`` (admit a request, run a step, preempt, finish ...). :class:`ManagerSide`
performs them on one manager built from a *namespace* of classes: kvlab's own (with a learner's
piece plugged in, see ``kvlab.labs.plug``), or vLLM 0.22.1's when the lab fixtures are recorded
(``tests/labs/record_lab_fixtures.py`` passes vLLM's classes). The same code therefore makes the
recorded decisions and replays them.

Operations and what they return (plain values; block hashes stay bytes):

=============================  ==============================================================
add_request(rid, tokens, n)    the request's block hashes (``request.block_hashes``)
get_computed_blocks(rid)       ``[num_new_computed_tokens, block ids per group]``
allocate_slots(rid, ...)       the new block ids per group, or None (out of blocks)
set_num_computed_tokens(...)   None
append_tokens(rid, tokens)     the block hashes the new tokens completed
preempt / finish (rid)         None (``KVCacheManager.free``; preempt also resets the request)
cache_blocks(rid, n)           None
remove_skipped_blocks(rid, n)  the request's block ids per group afterwards
evict_blocks(ids)              None
reset_prefix_cache()           True / False
new_step_starts()              None
take_new_block_ids()           block ids
get_num_common_prefix_blocks   one count per group
make_prefix_cache_stats()      ``[[field, value], ...]`` or None
=============================  ==============================================================
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from types import SimpleNamespace
from typing import Any

__all__ = ["STATE_FIELDS", "ManagerSide", "event_tuple", "kvlab_namespace"]

STATS_FIELDS = ("requests", "queries", "hits", "reset", "preempted_requests",
                "preempted_queries", "preempted_hits")  # fmt: skip

STATE_FIELDS = (
    "free queue", "num_free_blocks", "ref_cnt", "block_hash", "cached map", "block ids",
    "block_hashes", "num_cached_block", "events", "usage",
)
"""The observable state compared after every operation, in the order a divergence names them."""


def kvlab_namespace() -> SimpleNamespace:
    """kvlab.core's classes under vLLM's names (what ManagerSide builds a manager from)."""
    from kvlab.core import kv_cache_utils
    from kvlab.core.kv_cache_interface import (
        ChunkedLocalAttentionSpec,
        FullAttentionSpec,
        KVCacheConfig,
        KVCacheGroupSpec,
        SlidingWindowSpec,
    )
    from kvlab.core.kv_cache_manager import KVCacheManager
    from kvlab.core.request import Request
    from kvlab.core.request_params import (
        LoRARequest,
        MultiModalFeatureSpec,
        PlaceholderRange,
        SamplingParams,
    )

    return SimpleNamespace(
        KVCacheManager=KVCacheManager, KVCacheConfig=KVCacheConfig,
        KVCacheGroupSpec=KVCacheGroupSpec, FullAttentionSpec=FullAttentionSpec,
        SlidingWindowSpec=SlidingWindowSpec, ChunkedLocalAttentionSpec=ChunkedLocalAttentionSpec,
        Request=Request, SamplingParams=SamplingParams, LoRARequest=LoRARequest,
        MultiModalFeatureSpec=MultiModalFeatureSpec, PlaceholderRange=PlaceholderRange,
        get_request_block_hasher=kv_cache_utils.get_request_block_hasher,
        init_none_hash=kv_cache_utils.init_none_hash,
        hash_fns={"sha256": kv_cache_utils.sha256, "sha256_cbor": kv_cache_utils.sha256_cbor},
        DTYPE="float32",
    )  # fmt: skip


def event_tuple(ev: Any) -> list:
    """A KV event as a plain list: its type name and every field vLLM 0.22.1 sets."""
    name = type(ev).__name__
    if name == "BlockStored":
        kind = getattr(ev, "kv_cache_spec_kind", None)
        extra = getattr(ev, "extra_keys", None)
        return [name, list(ev.block_hashes), ev.parent_block_hash, list(ev.token_ids),
                ev.block_size, getattr(ev, "lora_id", None), getattr(ev, "medium", None),
                getattr(ev, "lora_name", None),
                None if extra is None else [None if k is None else _plain(k) for k in extra],
                getattr(ev, "group_idx", None),
                None if kind is None else str(getattr(kind, "value", kind)),
                getattr(ev, "kv_cache_spec_sliding_window", None)]  # fmt: skip
    if name == "BlockRemoved":
        return [name, list(ev.block_hashes), getattr(ev, "medium", None), getattr(ev, "group_idx", None)]
    return [name]


def _plain(value: Any) -> Any:
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value


def _ids(kv_blocks: Any) -> list | None:
    return None if kv_blocks is None else [list(g) for g in kv_blocks.get_block_ids()]


class ManagerSide:
    """A KVCacheManager built from ``config`` and driven by the operations of the module docstring.

    Args:
        config: The scenario's configuration (``kvlab.labs.workloads.ManagerConfig.to_dict``):
            groups, num_blocks, hash_block_size, hash_fn, enable_caching, use_eagle,
            max_model_len, max_num_batched_tokens, events, log_stats.
        m: The classes to build from (``kvlab_namespace()`` or vLLM's).
        plug: A context manager factory active while the manager is built (kvlab.labs.plug
            puts the learner's classes in place there); None = nothing plugged.
        hasher_factory: ``get_request_block_hasher``'s replacement (the block_hash lab); None =
            ``m.get_request_block_hasher``.
        manager_cls: ``KVCacheManager``'s replacement (the allocate_slots lab); None = ``m``'s.
    """

    def __init__(
        self,
        config: dict,
        m: SimpleNamespace | None = None,
        plug: Callable[[], AbstractContextManager] | None = None,
        hasher_factory: Callable[..., Any] | None = None,
        manager_cls: Any = None,
    ) -> None:
        self.m = m = m if m is not None else kvlab_namespace()
        self.config = config
        groups = []
        for i, g in enumerate(config["groups"]):
            common = dict(block_size=g["bs"], num_kv_heads=g.get("heads", 1), head_size=1, dtype=m.DTYPE)
            if g["kind"] == "full":
                spec = m.FullAttentionSpec(**common)
            elif g["kind"] == "sw":
                spec = m.SlidingWindowSpec(**common, sliding_window=g["window"])
            elif g["kind"] == "chunked":
                spec = m.ChunkedLocalAttentionSpec(**common, attention_chunk_size=g["chunk"])
            else:
                raise ValueError(f"unknown group kind {g['kind']!r}; allowed: full, sw, chunked")
            groups.append(m.KVCacheGroupSpec([f"layer{i}"], spec, is_eagle_group=bool(g.get("eagle"))))
        kv_cache_config = m.KVCacheConfig(num_blocks=config["num_blocks"], kv_cache_tensors=[],
                                          kv_cache_groups=groups)  # fmt: skip
        with (plug or nullcontext)():
            self.mgr = (manager_cls or m.KVCacheManager)(
                kv_cache_config, max_model_len=config["max_model_len"],
                hash_block_size=config["hash_block_size"],
                max_num_batched_tokens=config["max_num_batched_tokens"],
                enable_caching=config["enable_caching"], use_eagle=config["use_eagle"],
                log_stats=config["log_stats"], enable_kv_cache_events=config["events"],
            )  # fmt: skip
        factory = hasher_factory or m.get_request_block_hasher
        hash_fn = m.hash_fns[config.get("hash_fn", "sha256")]
        self.hasher = factory(config["hash_block_size"], hash_fn) if config["enable_caching"] else None
        self.reqs: dict[str, Any] = {}
        self.live: list[str] = []
        self.hits: dict[str, Any] = {}

    # ------------------------------------------------------------------ operations
    def add_request(self, rid: str, tokens: list[int], max_tokens: int, extra: dict | None = None) -> list:
        m, kwargs = self.m, {}
        extra = extra or {}
        if extra.get("lora"):
            name, int_id = extra["lora"]
            kwargs["lora_request"] = m.LoRARequest(name, int_id, "/lora/" + name)
        if extra.get("cache_salt"):
            kwargs["cache_salt"] = extra["cache_salt"]
        if extra.get("mm"):
            kwargs["mm_features"] = [
                m.MultiModalFeatureSpec(data=None, modality="image", identifier=ident,
                                        mm_position=m.PlaceholderRange(offset=off, length=n))
                for ident, off, n in extra["mm"]
            ]  # fmt: skip
        self.reqs[rid] = m.Request(rid, list(tokens), m.SamplingParams(max_tokens=max_tokens), None,
                                   block_hasher=self.hasher, **kwargs)  # fmt: skip
        self.live.append(rid)
        return list(self.reqs[rid].block_hashes)

    def get_computed_blocks(self, rid: str) -> list:
        blocks, n = self.mgr.get_computed_blocks(self.reqs[rid])
        self.hits[rid] = blocks
        return [n, _ids(blocks)]

    def allocate_slots(self, rid: str, num_new: int, num_new_computed: int, use_hit: bool,
                       lookahead: int, must_fit: bool, ext: int = 0, delay: bool = False) -> list | None:
        hit = self.hits.pop(rid, None) if use_hit else None
        return _ids(self.mgr.allocate_slots(
            self.reqs[rid], num_new, num_new_computed_tokens=num_new_computed, new_computed_blocks=hit,
            num_lookahead_tokens=lookahead, num_external_computed_tokens=ext,
            delay_cache_blocks=delay, full_sequence_must_fit=must_fit))  # fmt: skip

    def set_num_computed_tokens(self, rid: str, n: int) -> None:
        self.reqs[rid].num_computed_tokens = n

    def append_tokens(self, rid: str, tokens: list[int]) -> list:
        req = self.reqs[rid]
        before = len(req.block_hashes)
        req.append_output_token_ids(list(tokens))
        return list(req.block_hashes[before:])

    def preempt(self, rid: str) -> None:
        """What vLLM's ``Scheduler._preempt_request`` does to the KV cache and the request."""
        req = self.reqs[rid]
        self.mgr.free(req)
        req.num_computed_tokens = 0
        req.num_preemptions += 1

    def finish(self, rid: str) -> None:
        self.mgr.free(self.reqs[rid])
        self.live.remove(rid)

    def cache_blocks(self, rid: str, num_computed_tokens: int) -> None:
        self.mgr.cache_blocks(self.reqs[rid], num_computed_tokens)

    def remove_skipped_blocks(self, rid: str, total_computed_tokens: int) -> list:
        self.mgr.remove_skipped_blocks(rid, total_computed_tokens)
        return [list(g) for g in self.mgr.get_block_ids(rid)]

    def evict_blocks(self, ids: list[int]) -> None:
        self.mgr.evict_blocks(set(ids))

    def reset_prefix_cache(self) -> bool:
        return self.mgr.reset_prefix_cache()

    def new_step_starts(self) -> None:
        self.mgr.new_step_starts()

    def take_new_block_ids(self) -> list:
        return list(self.mgr.take_new_block_ids())

    def get_num_common_prefix_blocks(self, rid: str) -> list:
        return list(self.mgr.get_num_common_prefix_blocks(rid))

    def make_prefix_cache_stats(self) -> list | None:
        s = self.mgr.make_prefix_cache_stats()
        return None if s is None else [[f, getattr(s, f)] for f in STATS_FIELDS]

    # ------------------------------------------------------------------ observable state
    def state(self) -> dict:
        """The observable state (``STATE_FIELDS``); drains the KV events (``take_events``)."""
        mgr, pool = self.mgr, self.mgr.block_pool
        cmap = pool.cached_block_hash_to_block
        raw = cmap if isinstance(cmap, dict) else cmap._cache  # vLLM's own attribute name
        managers = mgr.coordinator.single_type_managers
        return {
            "free queue": [b.block_id for b in pool.free_block_queue.get_all_free_blocks()],
            "num_free_blocks": pool.get_num_free_blocks(),
            "ref_cnt": [None if b.is_null else b.ref_cnt for b in pool.blocks],
            "block_hash": [b.block_hash for b in pool.blocks],
            "cached map": {k: list(v) if isinstance(v, dict) else [v.block_id] for k, v in raw.items()},
            "block ids": {rid: [list(g) for g in mgr.get_block_ids(rid)] for rid in self.live},
            "block_hashes": {rid: len(self.reqs[rid].block_hashes) for rid in self.live},
            "num_cached_block": [sorted([r, n] for r, n in stm.num_cached_block.items()) for stm in managers],
            "events": [event_tuple(e) for e in mgr.take_events()],
            "usage": round(mgr.usage, 9),
        }

    def call(self, op: str, args: list) -> Any:
        """Perform operation ``op`` with ``args``; returns its plain result."""
        if op.startswith("_") or op in ("call", "state") or not hasattr(self, op):
            raise ValueError(f"unknown operation {op!r}")
        return getattr(self, op)(*args)
