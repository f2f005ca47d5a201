"""The recorder sees every change of req_to_blocks: replaying the req_* hooks rebuilds it.

A seeded scheduler-like workload (admission with hits, chunked prefill, decode with
lookahead, preemption, finish, evictions, resets) runs on several KV cache layouts. A
replaying recorder applies each ``req_blocks_add`` / ``req_blocks_null`` / ``req_free`` to its
own copy and compares that group's copy with the live ``req_to_blocks`` at every such event;
structural invariants are checked after every call.
"""

from __future__ import annotations

import random

import pytest
from _core_top_helpers import (  # noqa: F401 (none_hash is an autouse fixture)
    check_invariants,
    chunked_spec,
    full_spec,
    make_request,
    mamba_spec,
    manager,
    none_hash,
    sw_spec,
)


class ReplayRecorder:
    """Replays the manager-level hooks and checks them against the live managers."""

    def __init__(self, mgr) -> None:
        self.mgr = mgr
        self.replay: list[dict[str, list[int]]] = [{} for _ in mgr.coordinator.single_type_managers]
        self.open_calls: list[str] = []
        self.num_events = 0

    def _check(self, group: int) -> None:
        live = self.mgr.coordinator.single_type_managers[group].req_to_blocks
        assert {r: [b.block_id for b in bl] for r, bl in live.items()} == self.replay[group]
        self.num_events += 1

    def req_blocks_add(self, request_id, group, block_ids) -> None:
        self.replay[group].setdefault(request_id, []).extend(block_ids)
        self._check(group)

    def req_blocks_null(self, request_id, group, indices) -> None:
        for i in indices:
            self.replay[group][request_id][i] = 0
        self._check(group)

    def req_free(self, request_id, group) -> None:
        self.replay[group].pop(request_id, None)  # core reports every free, held or not
        self._check(group)

    def begin_call(self, name, request_id, args) -> None:
        assert all(isinstance(a, int) for a in args)
        self.open_calls.append(name)

    def end_call(self, name, result) -> None:
        assert self.open_calls.pop() == name

    def __getattr__(self, name):  # pool / queue / coordinator hooks: not replayed here
        if name.startswith("_"):
            raise AttributeError(name)
        return lambda *args: None


LAYOUTS = {
    "full": lambda: (full_spec(4),),
    "full+sw": lambda: (full_spec(4), sw_spec(4, 10)),
    "full+2sw": lambda: (full_spec(4), sw_spec(4, 8), sw_spec(4, 12)),
    "sw": lambda: (sw_spec(4, 9),),
    "chunked": lambda: (chunked_spec(4, 8),),
    "full+mamba": lambda: (full_spec(4), mamba_spec(4)),
    "mixed": lambda: (full_spec(8), sw_spec(4, 10)),
}


def _workload(mgr, rng: random.Random, num_ops: int) -> None:
    prompts = [[rng.randrange(3) for _ in range(rng.randint(4, 20))] for _ in range(3)]
    waiting, running, next_id = [], [], 0
    for _ in range(num_ops):
        op = rng.choice(["arrive", "admit", "admit", "run", "run", "run", "finish", "misc"])
        if op == "arrive" or (op == "admit" and not waiting):
            tokens = rng.choice(prompts) + [rng.randrange(3) for _ in range(rng.randint(1, 9))]
            waiting.append(make_request(f"r{next_id}", tokens, mgr.block_pool.hash_block_size))
            next_id += 1
        elif op == "admit":
            req = waiting[0]
            blocks, hit = mgr.get_computed_blocks(req)
            num_new = rng.randint(1, req.num_tokens - hit)
            if mgr.allocate_slots(req, num_new, hit, blocks) is not None:
                req.num_computed_tokens = hit + num_new
                running.append(waiting.pop(0))
                if req.num_computed_tokens == req.num_tokens:
                    req.append_output_token_ids(rng.randrange(3))
        elif op == "run" and running:
            req = rng.choice(running)
            pending = req.num_tokens - req.num_computed_tokens
            num_new = rng.randint(1, pending) if pending > 1 else 1
            lookahead = 0 if pending > 1 else rng.randint(0, 2)
            while mgr.allocate_slots(req, num_new, num_lookahead_tokens=lookahead) is None:
                victim = running.pop()
                mgr.free(victim)
                victim.num_computed_tokens = 0
                victim.num_preemptions += 1
                waiting.insert(0, victim)
                if victim is req:
                    break
            else:
                req.num_computed_tokens += num_new
                if req.num_computed_tokens == req.num_tokens:
                    req.append_output_token_ids(rng.randrange(3))
        elif op == "finish" and running:
            req = running.pop(rng.randrange(len(running)))
            mgr.remove_skipped_blocks(req.request_id, req.num_computed_tokens)
            mgr.free(req)
        elif op == "misc":
            _misc(mgr, rng, running)
        check_invariants(mgr)
    for req in running + waiting:
        mgr.free(req)
    check_invariants(mgr)


def _misc(mgr, rng: random.Random, running: list) -> None:
    choice = rng.randrange(4)
    if choice == 0:
        mgr.evict_blocks({rng.randrange(mgr.block_pool.num_gpu_blocks) for _ in range(2)})
    elif choice == 1:
        mgr.reset_prefix_cache()
    elif choice == 2:
        mgr.new_step_starts()
        if running:
            mgr.get_num_common_prefix_blocks(running[0].request_id)
    elif running:
        req = rng.choice(running)
        mgr.cache_blocks(req, req.num_computed_tokens)


@pytest.mark.parametrize("layout", sorted(LAYOUTS))
@pytest.mark.parametrize("seed", range(3))
def test_replaying_the_hooks_rebuilds_req_to_blocks(layout, seed):
    rng = random.Random(f"{layout}-{seed}")
    eagle = layout != "chunked" and rng.random() < 0.5  # vLLM: no EAGLE with chunked local
    mgr = manager(rng.randint(12, 30), *LAYOUTS[layout](), use_eagle=eagle)
    rec = ReplayRecorder(mgr)
    mgr.set_recorder(rec)
    _workload(mgr, rng, 150)
    assert rec.open_calls == []
    assert rec.num_events > 20
    assert all(replay == {} for replay in rec.replay)
