"""Shared by the scheduler tests: a one-group pool, requests with stop fields, a fake worker.

The fake worker keeps a paged "KV cache" of token ids (written through the scheduler's block
ids, read back to "attend"), and a fake model hashes what it read into the next token.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from kvlab.core.kv_cache_interface import FullAttentionSpec, KVCacheConfig, KVCacheGroupSpec
from kvlab.core.kv_cache_utils import get_request_block_hasher, init_none_hash, sha256
from kvlab.core.request import Request, SamplingParams
from kvlab.core.sched import Scheduler, SchedulerConfig, SchedulerOutput

BLOCK_SIZE = 4
init_none_hash(sha256)
HASHER = get_request_block_hasher(BLOCK_SIZE, sha256)


@dataclass
class GenParams(SamplingParams):
    """SamplingParams plus the stop fields check_stop reads (vLLM's SamplingParams has them)."""

    eos_token_id: int | None = None
    stop_token_ids: list[int] | None = None
    min_tokens: int = 0


def kv_config(num_blocks: int) -> KVCacheConfig:
    spec = FullAttentionSpec(block_size=BLOCK_SIZE, num_kv_heads=1, head_size=8, dtype="float32")
    return KVCacheConfig(
        num_blocks=num_blocks,
        kv_cache_tensors=[],
        kv_cache_groups=[KVCacheGroupSpec(["model.layers.0"], spec)],
    )


def make_request(rid: str, prompt, max_tokens: int = 4, **params) -> Request:
    return Request(
        rid, list(prompt), GenParams(max_tokens=max_tokens, **params), None, block_hasher=HASHER
    )


def make_scheduler(num_blocks: int = 64, recorder=None, **cfg) -> Scheduler:
    args = {"max_num_seqs": 8, "max_num_batched_tokens": 64, "max_model_len": 128}
    args.update(cfg)
    return Scheduler(kv_config(num_blocks), SchedulerConfig(**args), recorder)


def free_ids(sched: Scheduler) -> list[int]:
    queue = sched.kv_cache_manager.block_pool.free_block_queue
    return [b.block_id for b in queue.get_all_free_blocks()]


def step(sched: Scheduler, worker: FakeWorker) -> SchedulerOutput:
    out = sched.schedule()
    sched.update_from_output(out, worker.execute(out))
    return out


# --------------------------------------------------------------------------- fake worker
def next_token(context: list[int]) -> int:
    """The fake model: a deterministic token in [3, 53) from the whole context."""
    h = 17
    for t in context:
        h = (h * 31 + t) % 1_000_003
    return 3 + h % 50


@dataclass
class _ReqState:
    token_ids: list[int]
    block_ids: list[int]


@dataclass
class FakeWorker:
    block_size: int
    cache: dict[int, int] = field(default_factory=dict)  # slot -> token id
    reqs: dict[str, _ReqState] = field(default_factory=dict)

    def _update_states(self, out: SchedulerOutput) -> dict[str, int]:
        for req_id in out.finished_req_ids:
            self.reqs.pop(req_id, None)
        start: dict[str, int] = {}
        for new in out.scheduled_new_reqs:
            self.reqs[new.req_id] = _ReqState(list(new.prompt_token_ids), list(new.block_ids[0]))
            start[new.req_id] = new.num_computed_tokens
        cached = out.scheduled_cached_reqs
        for i, req_id in enumerate(cached.req_ids):
            state = self.reqs[req_id]
            if req_id in cached.all_token_ids:
                state.token_ids = list(cached.all_token_ids[req_id])
            new_ids = cached.new_block_ids[i]
            if req_id in cached.resumed_req_ids:
                state.block_ids = list(new_ids[0])
            elif new_ids is not None:
                state.block_ids.extend(new_ids[0])
            start[req_id] = cached.num_computed_tokens[i]
        return start

    def _slot(self, state: _ReqState, pos: int) -> int:
        return state.block_ids[pos // self.block_size] * self.block_size + pos % self.block_size

    def execute(self, out: SchedulerOutput) -> dict[str, list[int]]:
        """Run one step; return the sampled token per request that finished its prefill."""
        start = self._update_states(out)
        sampled: dict[str, list[int]] = {}
        for req_id, n in out.num_scheduled_tokens.items():
            state, first = self.reqs[req_id], start[req_id]
            for pos in range(first, first + n):
                self.cache[self._slot(state, pos)] = state.token_ids[pos]
            end = first + n
            if end < len(state.token_ids):
                continue  # partial prefill: nothing to sample
            context = [self.cache[self._slot(state, pos)] for pos in range(end)]
            token = next_token(context)
            state.token_ids.append(token)
            sampled[req_id] = [token]
        return sampled


def run_to_completion(sched: Scheduler, worker: FakeWorker, max_steps: int = 500) -> int:
    """Alternate schedule / execute / update_from_output until no request is left; return steps."""
    steps = 0
    while sched.has_unfinished_requests():
        out = sched.schedule()
        sched.update_from_output(out, worker.execute(out))
        steps += 1
        assert steps < max_steps, "scheduler made no progress"
    return steps
