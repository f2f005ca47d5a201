"""nano-vllm's BlockManager driven by named operations (lab ``nano_block_manager``).

:class:`NanoSide` holds a BlockManager (the learner's, or ``kvlab.compare.NanoBlockManager``,
kvlab's re-implementation of nano-vllm's) and its sequences; :func:`record_nano_ops` generates a
scheduler-like workload against it: sequences sharing prompts arrive and are allocated when
``can_allocate`` says so, decode one token at a time (``can_append``, ``may_append``; a
sequence that cannot append is preempted, as nano-vllm's scheduler does), and finish.
"""

from __future__ import annotations

import random
from typing import Any

from kvlab.labs.workloads import Recording, Step

__all__ = ["NanoSide", "record_nano_ops"]


class NanoSide:
    """A BlockManager(num_blocks, block_size) and its sequences, by request id.

    Args:
        config: ``{"num_blocks": n, "block_size": bs}``.
        manager_cls: The BlockManager class (default kvlab.compare's NanoBlockManager).
    """

    def __init__(self, config: dict, manager_cls: Any = None) -> None:
        from kvlab.compare import NanoBlockManager, NanoSequence

        self.config = config
        self.mgr = (manager_cls or NanoBlockManager)(config["num_blocks"], config["block_size"])
        self._seq = NanoSequence
        self.seqs: dict[str, Any] = {}

    def call(self, op: str, args: list) -> Any:
        rid = args[0]
        if op == "add":
            self.seqs[rid] = self._seq(rid, list(args[1]), self.config["block_size"])
            return None
        seq = self.seqs[rid]
        if op == "can_allocate":
            return bool(self.mgr.can_allocate(seq))
        if op == "allocate":
            self.mgr.allocate(seq)
            return [list(seq.block_table), seq.num_cached_tokens]
        if op == "deallocate":
            self.mgr.deallocate(seq)
            return None
        if op == "append_token":
            seq.append_token(args[1])
            return None
        if op == "can_append":
            return bool(self.mgr.can_append(seq))
        if op == "may_append":
            self.mgr.may_append(seq)
            return list(seq.block_table)
        raise ValueError(f"unknown operation {op!r}")

    def state(self) -> dict:
        blocks = self.mgr.blocks
        return {
            "free_block_ids": list(self.mgr.free_block_ids),
            "used_block_ids": sorted(self.mgr.used_block_ids),
            "ref_count": [b.ref_count for b in blocks],
            "block hash": [b.hash for b in blocks],
            "token_ids": [list(b.token_ids) for b in blocks],
            "hash_to_block_id": sorted([h, b] for h, b in self.mgr.hash_to_block_id.items()),
            "block_table": {rid: list(s.block_table) for rid, s in self.seqs.items()},
            "num_cached_tokens": {rid: s.num_cached_tokens for rid, s in self.seqs.items()},
        }


def record_nano_ops(side: NanoSide, seed: int, num_ops: int) -> Recording:
    """A random nano-vllm workload on ``side`` (see the module docstring)."""
    r = random.Random(f"nano-{seed}")
    bs = side.config["block_size"]
    rec = Recording("nano", side.config, source="nano-vllm", initial=side.state())
    prompts = [[r.randrange(4) for _ in range(r.randint(1, 3) * bs + r.randint(0, bs - 1))] for _ in range(3)]
    waiting: list[str] = []
    running: list[str] = []
    tokens: dict[str, list[int]] = {}

    def call(op: str, *args: Any) -> Any:
        args_copy = [list(a) if isinstance(a, list) else a for a in args]
        want = side.call(op, list(args_copy))
        rec.steps.append(Step(op, args_copy, want, side.state()))
        return want

    for n in range(num_ops):
        kind = r.choices(["arrive", "admit", "decode", "finish"], [3, 3, 6, 2])[0]
        if kind == "arrive" or (kind == "admit" and not waiting):
            rid = f"s{n}"
            base = r.choice(prompts + [t for t in tokens.values()] if tokens else prompts)
            tokens[rid] = list(base[: r.randint(1, len(base))]) + [r.randrange(4) for _ in range(r.randint(0, bs))]
            waiting.append(rid)
            call("add", rid, tokens[rid])
        elif kind == "admit":
            rid = waiting[0]
            if call("can_allocate", rid):
                call("allocate", rid)
                waiting.remove(rid)
                running.append(rid)
        elif kind == "decode" and running:
            rid = r.choice(running)
            token = r.randrange(4)
            tokens[rid].append(token)
            call("append_token", rid, token)
            while not call("can_append", rid):
                victim = running.pop()  # nano-vllm preempts the newest running sequence
                call("deallocate", victim)
                waiting.insert(0, victim)
                if victim == rid:
                    break
            else:
                call("may_append", rid)
        elif kind == "finish" and running:
            rid = running.pop(r.randrange(len(running)))
            call("deallocate", rid)
    return rec
