"""Randomized, scheduler-like workloads for the labs: configurations and operation sequences.

A workload is generated against one live side (kvlab's reference, or vLLM when fixtures are
recorded): each operation is chosen from the scheduler model's state and the answers the side
gave (hit lengths, allocation failures). The result is a :class:`Recording`: the operations with
their arguments, the side's return values and the observable state after each one, replayable
on any other side (``kvlab.labs.engine``).

The scheduler model follows vLLM 0.22.1's ``Scheduler`` where it touches the KV cache: new
requests are looked up (``get_computed_blocks``) and admitted with a chunk of their prompt
(``allocate_slots``, optionally with ``full_sequence_must_fit``, KV-connector tokens and
``delay_cache_blocks``); running requests continue their prefill or decode with lookahead slots
and partly accepted draft tokens; on allocation failure the newest running request is preempted
(``free``; recomputed later); requests finish, are aborted, have out-of-window blocks removed;
``evict_blocks``, ``reset_prefix_cache``, ``new_step_starts`` and the statistics are called now
and then. Prompts share system prompts, continue earlier conversations or repeat earlier prompts,
over a tiny vocabulary, so that prefix-cache hits, duplicates and evictions are frequent.

Examples:
    >>> cfg = manager_config("full", random.Random(0))
    >>> cfg["groups"][0]["kind"], cfg["enable_caching"]
    ('full', True)
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

__all__ = ["FAMILIES", "Recording", "Step", "manager_config", "record_workload"]


def _g(kind: str, bs: int, **kw: Any) -> dict:
    return {"kind": kind, "bs": bs, **kw}


def _window(r: random.Random, bs: int) -> int:
    # 2 to 3 blocks, often not a multiple of the block size: cdiv(window - 1, block_size) matters.
    return r.randint(2 * bs - 1, 3 * bs + 1)


FAMILIES: dict[str, Callable[[random.Random], list[dict]]] = {
    "full": lambda r: [_g("full", r.choice([4, 4, 16]))],
    "sw": lambda r: [_g("sw", (bs := r.choice([2, 4, 4])), window=_window(r, bs))],
    "chunked": lambda r: [_g("chunked", (bs := r.choice([4, 4, 16])), chunk=bs * r.choice([2, 3]))],
    "full+sw": lambda r: [_g("full", (bs := r.choice([4, 4, 16]))), _g("sw", bs, window=_window(r, bs))],
    "full+2sw": lambda r: [_g("full", (bs := 4)), _g("sw", bs, window=r.randint(5, 8)),
                           _g("sw", bs, window=r.randint(9, 13))],
    "full+chunked": lambda r: [_g("full", (bs := 4)), _g("chunked", bs, chunk=bs * r.choice([2, 3]))],
    "mixed:full8+sw4": lambda r: [_g("full", 8), _g("sw", 4, window=_window(r, 4))],
    "mixed:full4+sw8": lambda r: [_g("full", 4), _g("sw", 8, window=_window(r, 8))],
    "full+full(heads)": lambda r: [_g("full", (bs := r.choice([4, 8]))), _g("full", bs, heads=2)],
}  # fmt: skip
"""Config families: a builder of the KV cache groups (kind full / sw / chunked, block size bs,
sliding window or attention chunk in tokens, heads)."""


def manager_config(family: str, r: random.Random, **overrides: Any) -> dict:
    """A random KVCacheManager configuration of ``family``.

    Args:
        family: A key of :data:`FAMILIES`.
        r: The random source.
        **overrides: Fields to force (``enable_caching=True``, ``use_eagle=False``,
            ``extras=True`` for LoRA / multimodal / cache_salt requests, ``external=True`` for
            KV-connector tokens, ``hash_fn="sha256_cbor"``, ...).

    Returns:
        The configuration as a plain dict (what ``ManagerSide`` and the fixtures take).

    Raises:
        KeyError: For an unknown family.
    """
    groups = FAMILIES[family](r)
    if len(groups) > 1 and r.random() < 0.3:
        r.shuffle(groups)  # full attention need not be group 0
    use_eagle = overrides.pop("use_eagle", r.random() < 0.3)
    if use_eagle and any(g["kind"] == "chunked" for g in groups):
        # Chunked local attention refuses EAGLE: flag another group, or turn EAGLE off.
        others = [g for g in groups if g["kind"] != "chunked"]
        if others:
            r.choice(others)["eagle"] = True
        else:
            use_eagle = False
    elif use_eagle and len(groups) > 1 and r.random() < 0.5:
        r.choice(groups)["eagle"] = True
    sizes = [g["bs"] for g in groups]
    lcm_bs = math.lcm(*sizes)
    cfg = {
        "family": family, "groups": groups, "num_blocks": r.randint(10, 40),
        "enable_caching": True, "use_eagle": use_eagle,
        "lookahead": 0 if r.random() < 0.6 else r.randint(1, 3),
        "max_model_len": r.randint(8, 24) * lcm_bs,
        "max_num_batched_tokens": r.choice([None, None, 2 * lcm_bs, 8 * lcm_bs]),
        "events": r.random() < 0.8, "log_stats": r.random() < 0.8, "must_fit": r.random() < 0.3,
        "hash_fn": "sha256", "extras": False, "external": False,
    }  # fmt: skip
    cfg.update(overrides)
    # vLLM's resolve_kv_cache_block_sizes: hashes at the GCD of the block sizes with caching on.
    cfg["hash_block_size"] = math.gcd(*sizes) if cfg["enable_caching"] else lcm_bs
    cfg["lcm_bs"] = lcm_bs
    return cfg


@dataclass
class Step:
    """One operation of a recording.

    Attributes:
        op: The operation's name (a method of the side).
        args: Its arguments (plain values).
        want: What the recorded side returned.
        state: The recorded side's observable state after it (only the fields that changed
            since the previous step are stored in fixtures; in memory it is complete).
    """

    op: str
    args: list
    want: Any
    state: dict


@dataclass
class Recording:
    """A workload as one side ran it: configuration, steps and the state before the first step."""

    kind: str
    config: dict
    steps: list[Step] = field(default_factory=list)
    initial: dict = field(default_factory=dict)
    source: str = "kvlab"


class _Req:
    __slots__ = ("rid", "tokens", "num_prompt", "computed", "max_tokens", "extra", "loading")

    def __init__(self, rid: str, tokens: list[int], max_tokens: int, extra: dict | None) -> None:
        self.rid, self.tokens, self.num_prompt = rid, list(tokens), len(tokens)
        self.computed, self.max_tokens, self.extra, self.loading = 0, max_tokens, extra, False


OP_WEIGHTS = {"arrive": 14, "admit": 22, "run": 36, "finish": 8, "cache": 3, "preempt": 3,
              "abort": 2, "evict": 3, "reset": 1, "drain_reset": 1, "step": 5, "stats": 2}  # fmt: skip


class _Scheduler:
    """The scheduler model: picks each operation and keeps the requests' bookkeeping."""

    def __init__(self, side: Any, cfg: dict, seed: int, rec: Recording) -> None:
        self.side, self.cfg, self.rec = side, cfg, rec
        r = random.Random(f"workload-{seed}")
        self.r = r
        bs = cfg["lcm_bs"]
        self.vocab = r.choice([2, 3, 4])
        self.sys_prompts = [[r.randrange(self.vocab) for _ in range(r.randint(1, 3) * bs + r.randint(0, bs - 1))]
                            for _ in range(r.randint(2, 3))]  # fmt: skip
        self.waiting: list[_Req] = []
        self.running: list[_Req] = []
        self.done: list[_Req] = []
        self.next_id = 0
        self.state = side.state()
        rec.initial = self.state

    def call(self, op: str, *args: Any) -> Any:
        want = self.side.call(op, list(args))
        self.state = self.side.state()
        self.rec.steps.append(Step(op, list(args), want, self.state))
        return want

    # ------------------------------------------------------------------ helpers
    def _tokens(self, n: int) -> list[int]:
        return [self.r.randrange(self.vocab) for _ in range(n)]

    def _budget(self) -> int:
        return self.cfg["max_num_batched_tokens"] or 10**9

    def _finish(self, req: _Req) -> None:
        for queue in (self.running, self.waiting):
            if req in queue:
                queue.remove(req)
        self.call("finish", req.rid)
        self.done.append(req)

    def _preempt(self, req: _Req) -> None:
        self.running.remove(req)
        self.call("preempt", req.rid)
        req.computed, req.loading = 0, False
        self.waiting.insert(0, req)

    def _sample(self, req: _Req, n: int) -> None:
        n = min(n, self.cfg["max_model_len"] - len(req.tokens))
        if n > 0:
            toks = self._tokens(n)
            req.tokens += toks
            self.call("append_tokens", req.rid, toks)
        if len(req.tokens) - req.num_prompt >= req.max_tokens or len(req.tokens) >= self.cfg["max_model_len"]:
            self._finish(req)

    def _extra(self) -> dict | None:
        if not self.cfg.get("extras") or self.r.random() < 0.4:
            return None
        r, extra = self.r, {}
        if r.random() < 0.4:
            extra["lora"] = r.choice([["sql-lora", 1], ["chat-lora", 2]])
        if r.random() < 0.3:
            extra["cache_salt"] = r.choice(["tenant-a", "tenant-b"])
        if r.random() < 0.5:
            extra["mm"] = "mm"  # placed once the prompt length is known
        return extra or None

    # ------------------------------------------------------------------ operations
    def op_arrive(self) -> None:
        r, bs = self.r, self.cfg["lcm_bs"]
        pool = self.done + self.running + self.waiting
        style = r.choices(["sys", "cont", "dup", "prefix", "rand"], [40, 25, 12, 8, 15])[0]
        if style != "sys" and style != "rand" and not pool:
            style = "sys"
        if style == "sys":
            toks = list(r.choice(self.sys_prompts)) + self._tokens(r.randint(0, 2 * bs))
        elif style == "cont":
            toks = list(r.choice(pool).tokens) + self._tokens(r.randint(1, bs + 3))
        elif style == "dup":
            base = r.choice(pool)
            toks = list(base.tokens[: base.num_prompt])
        elif style == "prefix":
            base = r.choice(pool).tokens
            toks = list(base[: r.randint(1, len(base))])
        else:
            toks = self._tokens(r.randint(1, 4 * bs))
        toks = toks[: self.cfg["max_model_len"] - 2] or self._tokens(1)
        extra = self._extra()
        if extra and extra.get("mm"):
            start = r.randrange(len(toks))
            items, pos = [], start
            while pos < len(toks) and len(items) < 2:
                n = r.randint(1, 2 * self.cfg["hash_block_size"])
                items.append([r.choice(["img-cat", "img-dog", "img-sea"]), pos, min(n, len(toks) - pos)])
                pos += n + r.randint(0, 3)
            extra["mm"] = items
        rid = f"r{self.next_id}"
        self.next_id += 1
        req = _Req(rid, toks, r.randint(1, 3 * bs), extra)
        self.waiting.append(req)
        self.call("add_request", rid, toks, req.max_tokens, extra)

    def op_admit(self) -> None:
        if not self.waiting:
            return self.op_arrive()
        r, cfg = self.r, self.cfg
        req = self.waiting[0] if r.random() < 0.8 else r.choice(self.waiting)
        n_hit, _ = self.call("get_computed_blocks", req.rid)
        remaining = len(req.tokens) - n_hit
        ext, delay = 0, False
        if cfg.get("external") and remaining > 2 and r.random() < 0.3:
            ext = r.randint(1, remaining - 1)  # tokens a KV connector will provide
            delay = r.random() < 0.5
        num_new = 0 if delay else max(1, min(remaining - ext if r.random() < 0.5 else r.randint(1, remaining - ext), self._budget()))
        new = self.call("allocate_slots", req.rid, num_new, n_hit, True, 0, cfg["must_fit"], ext, delay)
        if new is None:
            return None
        self.waiting.remove(req)
        self.running.append(req)
        req.computed = n_hit + ext + num_new
        req.loading = delay
        if delay:  # the KV arrives later; then vLLM caches it (Scheduler._update_waiting_for_remote_kv)
            self.call("set_num_computed_tokens", req.rid, req.computed)
            self.call("cache_blocks", req.rid, req.computed)
            req.loading = False
            return None
        self.call("set_num_computed_tokens", req.rid, req.computed)
        if req.computed == len(req.tokens):
            self._sample(req, 1)
        return None

    def op_run(self) -> None:
        if not self.running:
            return self.op_admit()
        r, cfg = self.r, self.cfg
        req = r.choice(self.running)
        pending = len(req.tokens) - req.computed
        spec = 0
        if pending > 1:
            num_new = min(pending if r.random() < 0.6 else r.randint(1, pending), self._budget())
        else:
            if cfg["lookahead"] and r.random() < 0.7:
                spec = r.randint(0, cfg["lookahead"])
            num_new = 1 + spec
        num_new = max(1, min(num_new, cfg["max_model_len"] - 1 - req.computed))
        spec = min(spec, num_new - 1)
        while True:
            new = self.call("allocate_slots", req.rid, num_new, 0, False, cfg["lookahead"], False, 0, False)
            if new is not None:
                break
            victim = self.running[-1]  # FCFS: the newest running request is preempted
            self._preempt(victim)
            if victim is req:
                return None
        if pending > 1:
            req.computed += num_new
            self.call("set_num_computed_tokens", req.rid, req.computed)
            if req.computed == len(req.tokens):
                self._sample(req, 1)
        else:
            accepted = r.randint(0, spec)
            req.computed += 1 + accepted
            self.call("set_num_computed_tokens", req.rid, req.computed)
            self._sample(req, accepted + 1)
        return None

    def op_finish(self) -> None:
        if not self.running:
            return self.op_run()
        req = self.r.choice(self.running)
        if self.r.random() < 0.3:  # the KV-connector path drops out-of-window blocks first
            self.call("remove_skipped_blocks", req.rid, req.computed)
        self._finish(req)
        return None

    def op_cache(self) -> None:
        if not self.running:
            return self.op_run()
        req = self.r.choice(self.running)
        self.call("cache_blocks", req.rid, req.computed)
        return None

    def op_preempt(self) -> None:
        if not self.running:
            return self.op_admit()
        self._preempt(self.running[-1] if self.r.random() < 0.5 else self.r.choice(self.running))
        return None

    def op_abort(self) -> None:
        if not self.waiting:
            return self.op_arrive()
        self._finish(self.r.choice(self.waiting))
        return None

    def op_evict(self) -> None:
        hashes = self.state["block_hash"]
        cached = [i for i, h in enumerate(hashes) if h is not None]
        ids = set()
        for _ in range(self.r.randint(1, 3)):
            ids.add(self.r.choice(cached) if cached and self.r.random() < 0.75 else self.r.randrange(len(hashes)))
        self.call("evict_blocks", sorted(ids))

    def op_reset(self) -> None:
        self.call("reset_prefix_cache")

    def op_drain_reset(self) -> None:
        for req in list(self.running):
            self._finish(req)
        self.call("reset_prefix_cache")

    def op_step(self) -> None:
        self.call("new_step_starts")
        self.call("take_new_block_ids")
        if self.running:
            self.call("get_num_common_prefix_blocks", self.r.choice(self.running).rid)

    def op_stats(self) -> None:
        self.call("make_prefix_cache_stats")

    def execute(self, num_ops: int, weights: dict[str, int]) -> None:
        kinds = list(weights)
        for kind in self.r.choices(kinds, [weights[k] for k in kinds], k=num_ops):
            getattr(self, "op_" + kind)()
        for req in list(self.running) + list(self.waiting):
            self._finish(req)
        self.call("make_prefix_cache_stats")


def record_workload(side: Any, cfg: dict, seed: int, num_ops: int,
                    weights: dict[str, int] | None = None, source: str = "kvlab") -> Recording:
    """Run a generated workload on ``side`` and record every call, answer and state.

    Args:
        side: A ``ManagerSide`` (kvlab's reference, or vLLM's classes when recording fixtures).
        cfg: Its configuration (:func:`manager_config`).
        seed: The workload's seed (same seed and answers -> same operations).
        num_ops: Scheduler operations to draw (each makes one or more calls).
        weights: Operation weights (default :data:`OP_WEIGHTS`).
        source: Who made the decisions: ``"kvlab"`` or ``"vLLM 0.22.1"``.

    Returns:
        The recording.
    """
    rec = Recording("manager", cfg, source=source)
    _Scheduler(side, cfg, seed, rec).execute(num_ops, weights or OP_WEIGHTS)
    return rec
