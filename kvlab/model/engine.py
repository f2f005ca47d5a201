"""The engine: scheduler + KVCacheManager + block table + model + kernels, one step at a time.

Mirrors the shape of vLLM V1's engine core loop (``EngineCore.step``: ``schedule()`` ->
``execute_model`` -> ``update_from_output``) with the worker's input preparation
(``GPUModelRunner._prepare_inputs``: block-table rows, positions, slot mapping) folded in. Every
block the model reads or writes was chosen by ``kvlab.core``'s KVCacheManager, and every
decision the manager made is in ``LLM.trace``::

    step():  SchedulerOutput ──► block table rows (add / append / replace) ──► slot_mapping
                                   │                                           │
             update_from_output ◄── sample ◄── Model.forward(ids, positions, metadata, kv_caches)

Left out (vLLM features beyond the KV cache's story): async scheduling, CUDA graphs, speculative
decoding, logprobs, structured output, LoRA, multimodal inputs, pipeline/tensor parallelism.
"""

from __future__ import annotations

import time
import zlib
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch

from kvlab.core import kv_cache_utils as block_hash_module
from kvlab.core.kv_cache_interface import (
    FullAttentionSpec,
    KVCacheConfig,
    KVCacheGroupSpec,
    SlidingWindowSpec,
)
from kvlab.core.kv_cache_manager import KVCacheManager
from kvlab.core.kv_cache_utils import get_request_block_hasher, init_none_hash, sha256
from kvlab.core.request import Request
from kvlab.core.sched import Scheduler, SchedulerConfig, SchedulerOutput
from kvlab.model.attention_metadata import AttentionMetadata
from kvlab.model.engine_checks import (
    check_positive_int,
    check_prompt_token_ids,
    prompt_too_long_message,
    resolve_max_model_len,
    stall_message,
)
from kvlab.model.llama import ATTENTION_BACKENDS, Model
from kvlab.model.sampling import SamplingParams, sample
from kvlab.worker import MultiGroupBlockTable

__all__ = ["LLM", "RequestOutput", "SamplingParams", "StepStats"]


@dataclass
class RequestOutput:
    """One finished request.

    Attributes:
        request_id: The request id.
        prompt: The prompt text (None when given as token ids).
        prompt_token_ids: The prompt (tokens).
        output_token_ids: The generated tokens, stop token included (tokens).
        text: ``output_token_ids`` decoded, special tokens skipped.
        finish_reason: "stop" (eos / stop token) or "length" (max_tokens / max_model_len).
        num_cached_tokens: Prefix-cache hit at the first admission (tokens).
        num_preemptions: Times the request was preempted and recomputed.
    """

    request_id: str
    prompt: str | None
    prompt_token_ids: list[int]
    output_token_ids: list[int]
    text: str
    finish_reason: str | None
    num_cached_tokens: int
    num_preemptions: int


@dataclass
class StepStats:
    """What one ``step()`` computed: tokens per request and wall time (seconds)."""

    step: int
    num_scheduled_tokens: dict[str, int]
    preempted_req_ids: list[str]
    seconds: float


@dataclass
class _Live:
    prompt: str | None
    request: Request
    row: int | None = None
    generator: torch.Generator | None = None


class LLM:
    """Generate text with a real model whose KV cache is managed by kvlab.core.

    Examples:
        >>> llm = LLM(num_gpu_blocks=64, block_size=16)               # SmolLM2-135M, CPU
        >>> out = llm.generate(["The capital of France is"], SamplingParams(max_tokens=3))
        >>> out[0].text
        ' Paris.'
        >>> llm.trace.calls("allocate_slots")[0]                      # the manager's decisions

    Args:
        model: A ``Model``, a path (GGUF file or Hugging Face folder) or None (SmolLM2-135M).
        block_size: Tokens per KV block (tokens).
        num_gpu_blocks: Blocks in the pool, null block included (blocks).
        max_num_seqs: Most running requests at once.
        max_num_batched_tokens: Token budget of one step (tokens).
        max_model_len: Longest prompt + output (tokens); default: the longest that one request
            can hold in the pool, at most min(model context, 4096) (vLLM's auto-fit).
        enable_prefix_caching: Reuse cached full blocks across requests.
        long_prefill_token_threshold: Cap on one request's tokens per step; 0 = none (tokens).
        attention_backend: "auto" | "triton" | "torch" (see ``kvlab.kernels``).
        record: Record every KV-cache decision into ``self.trace``.
        enable_kv_cache_events: Queue vLLM KV events (drained into ``self.kv_events``).
        device, dtype, progress: Where and how to load the model.

    Raises:
        ValueError: A size that is not a positive int, an unknown attention_backend, a
            max_model_len beyond the model's context, or a pool too small to hold one request of
            max_model_len tokens ("needs N blocks for max_model_len M, the pool has K").
    """

    def __init__(self, model: Model | str | Path | None = None, *, block_size: int = 16,
                 num_gpu_blocks: int = 256, max_num_seqs: int = 8,
                 max_num_batched_tokens: int = 512, max_model_len: int | None = None,
                 enable_prefix_caching: bool = True, long_prefill_token_threshold: int = 0,
                 attention_backend: str = "auto", record: bool = True,
                 enable_kv_cache_events: bool = False, device: str | torch.device = "cpu",
                 dtype: torch.dtype = torch.float32, progress: bool = True) -> None:
        block_size = check_positive_int("block_size", block_size)
        num_gpu_blocks = check_positive_int("num_gpu_blocks (one is the null block)",
                                            num_gpu_blocks, 2)
        max_num_seqs = check_positive_int("max_num_seqs", max_num_seqs)
        max_num_batched_tokens = check_positive_int("max_num_batched_tokens",
                                                    max_num_batched_tokens)
        if max_model_len is not None:
            max_model_len = check_positive_int("max_model_len", max_model_len)
        if attention_backend not in ATTENTION_BACKENDS:
            raise ValueError(f"attention_backend must be one of {', '.join(ATTENTION_BACKENDS)}, "
                             f"got {attention_backend!r}")
        if not isinstance(model, Model):
            model = Model.from_pretrained(model, dtype=dtype, device=device, progress=progress,
                                          attention_backend=attention_backend)
        self.model = model
        self.tokenizer = model.tokenizer
        self.block_size = block_size
        self.kv_cache_config = self._kv_cache_config(num_gpu_blocks)
        self.max_model_len = resolve_max_model_len(
            [g.kv_cache_spec for g in self.kv_cache_config.kv_cache_groups], num_gpu_blocks,
            max_model_len, model.config.max_position_embeddings, max_num_batched_tokens)
        self.kv_cache_manager = KVCacheManager(
            self.kv_cache_config, max_model_len=self.max_model_len, hash_block_size=block_size,
            max_num_batched_tokens=max_num_batched_tokens,
            enable_caching=enable_prefix_caching, log_stats=True,
            enable_kv_cache_events=enable_kv_cache_events)
        self.recorder = None
        if record:
            from kvlab.trace import Recorder

            self.recorder = Recorder().attach(self.kv_cache_manager)
        self.scheduler = Scheduler(
            self.kv_cache_manager,
            SchedulerConfig(max_num_seqs=max_num_seqs, max_num_batched_tokens=max_num_batched_tokens,
                            max_model_len=self.max_model_len, enable_prefix_caching=enable_prefix_caching,
                            long_prefill_token_threshold=long_prefill_token_threshold, log_stats=True),
            recorder=self.recorder)
        num_groups = len(self.kv_cache_config.kv_cache_groups)
        self.block_table = MultiGroupBlockTable(
            max_num_reqs=max_num_seqs, max_model_len=self.max_model_len,
            max_num_batched_tokens=max_num_batched_tokens, pin_memory=False, device="cpu",
            block_sizes=[block_size] * num_groups, kernel_block_sizes=[block_size] * num_groups)
        self.kv_caches = model.allocate_kv_caches(num_gpu_blocks, block_size)
        # NOTE: NONE_HASH is process-wide (set once per vLLM engine process); re-set (random without
        # PYTHONHASHSEED) it would turn every prefix hit of an engine built earlier into a miss.
        if not hasattr(block_hash_module, "NONE_HASH"):
            init_none_hash(sha256)
        self._block_hasher = get_request_block_hasher(block_size, sha256)
        self._live: dict[str, _Live] = {}
        self._free_rows = list(range(max_num_seqs - 1, -1, -1))
        self._next_id = 0
        self.finished: list[RequestOutput] = []
        self.step_stats: list[StepStats] = []
        self.kv_events: list[Any] = []

    # ------------------------------------------------------------------ set-up
    def _kv_cache_config(self, num_gpu_blocks: int) -> KVCacheConfig:
        """One KV-cache group per attention type: full attention, then each sliding window."""
        cfg = self.model.config
        groups = []
        for window, layers in self.model.kv_cache_groups():
            common = dict(block_size=self.block_size, num_kv_heads=cfg.num_kv_heads,
                          head_size=cfg.head_dim, dtype=str(self.model.dtype).replace("torch.", ""))
            spec = (FullAttentionSpec(**common) if window is None
                    else SlidingWindowSpec(**common, sliding_window=window))
            groups.append(KVCacheGroupSpec([f"model.layers.{i}.self_attn" for i in layers], spec))
        return KVCacheConfig(num_blocks=num_gpu_blocks, kv_cache_tensors=[], kv_cache_groups=groups)

    @property
    def trace(self):
        """The recorded ``kvlab.trace.Trace`` so far (None when ``record=False``)."""
        return None if self.recorder is None else self.recorder.trace()

    # ------------------------------------------------------------------ requests in
    def add_request(self, prompt: str | Sequence[int], params: SamplingParams | None = None, *,
                    request_id: str | None = None) -> str:
        """Queue one prompt (text, or token ids) and return its request id.

        Raises:
            TypeError: The prompt is neither a str nor a sequence of int token ids, or params
                is not a SamplingParams.
            ValueError: An empty prompt, a token id outside the vocabulary, a duplicate id, or
                a prompt of max_model_len tokens or more (with one output token it would not
                fit; vLLM's input processor refuses it too). Nothing is queued.
        """
        if params is not None and not isinstance(params, SamplingParams):
            raise TypeError(f"params must be a SamplingParams, got {type(params).__name__}")
        params = (params or SamplingParams()).for_tokenizer(self.tokenizer)
        if isinstance(prompt, str):
            if self.tokenizer is None:
                raise TypeError("this model has no tokenizer: give the prompt as token ids")
            text, token_ids = prompt, self.tokenizer.encode(prompt)
        else:
            text, token_ids = None, check_prompt_token_ids(prompt, self.model.config.vocab_size)
        if not token_ids:
            raise ValueError("the prompt is empty: give at least one token")
        if len(token_ids) >= self.max_model_len:
            raise ValueError(prompt_too_long_message(
                len(token_ids), self.max_model_len, self.kv_cache_config.num_blocks,
                self.block_size))
        auto_id = request_id is None
        if auto_id:
            request_id = f"req-{self._next_id}"
        elif not isinstance(request_id, str):
            raise TypeError(f"request_id must be a str, got {type(request_id).__name__}")
        if request_id in self._live:
            raise ValueError(f"request_id {request_id!r} is already running")
        request = Request(request_id, token_ids, params, None, block_hasher=self._block_hasher)
        self.scheduler.add_request(request)
        if auto_id:
            self._next_id += 1
        gen = None
        if params.temperature > 0:
            # NOTE: crc32, not hash(): str hashes change with PYTHONHASHSEED between processes.
            gen = torch.Generator().manual_seed(params.seed if params.seed is not None
                                                else zlib.crc32(request_id.encode()))
        self._live[request_id] = _Live(text, request, generator=gen)
        return request_id

    # ------------------------------------------------------------------ one step
    def step(self) -> list[RequestOutput]:
        """Schedule, run the model once, sample, and return the requests that finished.

        Raises:
            RuntimeError: The step scheduled nothing although requests wait and none runs (they
                could never run: they are aborted and their blocks freed), or the model failed
                (the step's requests are aborted and freed, and the blocks the step would have
                written leave the prefix cache, so the engine stays usable and correct; the
                model's exception is chained). A KeyboardInterrupt mid-step aborts the same
                way and is re-raised as is.
        """
        t0 = time.perf_counter()
        out = self.scheduler.schedule()
        finished: list[RequestOutput] = []
        sampled: dict[str, list[int]] = {}
        if (out.total_num_scheduled_tokens == 0 and not out.preempted_req_ids
                and self.scheduler.waiting and not self.scheduler.running):
            self.scheduler.update_from_output(out, {})
            self._raise_stuck()
        try:
            self._update_rows(out)
            if out.total_num_scheduled_tokens > 0:
                sampled = self._execute(out)
        except BaseException as exc:
            # NOTE: Ctrl+C (a notebook's "interrupt kernel") too: close the step so the
            # scheduler is not left waiting for update_from_output, free, re-raise as is.
            rids = list(out.num_scheduled_tokens)
            unwritten = self._blocks_not_written(out)
            self.scheduler.update_from_output(out, {})
            self.abort(rids)
            self.kv_cache_manager.evict_blocks(unwritten)
            if not isinstance(exc, Exception):
                raise
            raise RuntimeError(f"step {out.step} failed ({type(exc).__name__}: {exc}); its "
                               f"requests {rids} were aborted and their blocks freed") from exc
        result = self.scheduler.update_from_output(out, sampled)
        self.kv_events.extend(result.kv_events or ())
        for rid in sorted(result.finished_requests, key=list(out.num_scheduled_tokens).index):
            finished.append(self._finish(rid))
        self.step_stats.append(StepStats(out.step, dict(out.num_scheduled_tokens),
                                         sorted(out.preempted_req_ids), time.perf_counter() - t0))
        self.finished.extend(finished)
        return finished

    def _blocks_not_written(self, out: SchedulerOutput) -> list[int]:
        """Block ids (each once) of this step's requests past the tokens computed before it.

        allocate_slots caches a block once its tokens are scheduled, before the model writes its
        KV: after a failed step step() evicts these (as vLLM evicts blocks whose KV failed to
        load, KVCacheManager.evict_blocks), or a later hit would read garbage KV."""
        ids: dict[int, None] = {}
        for rid, num_new in out.num_scheduled_tokens.items():
            request = self.scheduler.requests.get(rid)
            if request is None:
                continue
            first = (request.num_computed_tokens - num_new) // self.block_size  # (blocks)
            for group in self.kv_cache_manager.get_block_ids(rid):
                ids.update(dict.fromkeys(group[first:]))
        return list(ids)

    def _raise_stuck(self) -> None:
        head, waiting = self.scheduler.waiting[0], len(self.scheduler.waiting)
        free = self.kv_cache_manager.block_pool.get_num_free_blocks()
        aborted = self.abort([r.request_id for r in self.scheduler.waiting])
        raise RuntimeError(stall_message(head.request_id, head.num_tokens, self.block_size, free,
                                         waiting, self.scheduler.max_num_scheduled_tokens,
                                         aborted))

    def abort(self, request_ids: str | Sequence[str] | None = None) -> list[str]:
        """Abort unfinished requests: dequeue them, free their blocks and block-table rows.

        Mirrors: vllm/v1/engine/core.py::EngineCore.abort_requests (via Scheduler.finish_requests
        with FINISHED_ABORTED).

        Args:
            request_ids: One id, several, or None for every unfinished request.

        Returns:
            The ids aborted (unknown or finished ids are skipped).
        """
        if isinstance(request_ids, str):
            request_ids = [request_ids]
        done = self.scheduler.finish_requests(
            None if request_ids is None else list(request_ids))
        for rid in done:
            live = self._live.pop(rid, None)
            if live is not None:
                self._release_row_of(live)
        return done

    def _update_rows(self, out: SchedulerOutput) -> None:
        """Mirror the scheduler's block ids into the worker block table (vLLM's _update_states)."""
        for rid in out.preempted_req_ids:
            self._release_row(rid)
        for new in out.scheduled_new_reqs:
            live = self._live[new.req_id]
            if live.row is None:
                live.row = self._free_rows.pop()
            self.block_table.add_row(new.block_ids, live.row)
        cached = out.scheduled_cached_reqs
        for rid, new_ids in zip(cached.req_ids, cached.new_block_ids):
            live = self._live[rid]
            if rid in cached.resumed_req_ids or live.row is None:
                if live.row is None:
                    live.row = self._free_rows.pop()
                self.block_table.add_row(self.kv_cache_manager.get_block_ids(rid), live.row)
            elif new_ids is not None:
                self.block_table.append_row(new_ids, live.row)

    def _release_row(self, rid: str) -> None:
        live = self._live.get(rid)
        if live is not None:
            self._release_row_of(live)

    def _execute(self, out: SchedulerOutput) -> dict[str, list[int]]:
        """Build the packed batch, run the model, sample where a sequence's prefill is complete."""
        rids = list(out.num_scheduled_tokens)
        reqs = [self._live[r].request for r in rids]
        num_new = np.array([out.num_scheduled_tokens[r] for r in rids], dtype=np.int64)
        # num_computed_tokens already advanced in schedule(): the step starts at total - new.
        num_done = np.array([r.num_computed_tokens for r in reqs], dtype=np.int64) - num_new
        rows = np.array([self._live[r].row for r in rids], dtype=np.int64)
        positions = np.concatenate([np.arange(c, c + n) for c, n in zip(num_done, num_new)])
        input_ids = np.concatenate([r.all_token_ids[c:c + n] for r, c, n in zip(reqs, num_done, num_new)])
        req_indices = np.repeat(rows, num_new)                                  # (T,)
        slots = self.block_table.compute_slot_mapping(req_indices, positions)   # per group (T,)
        seq_lens = num_done + num_new                                           # (S,)
        max_blocks = int(-(-seq_lens.max() // self.block_size))
        tables = [torch.from_numpy(bt.get_numpy_array()[rows, :max_blocks].astype(np.int32))
                  for bt in self.block_table.block_tables]
        slot_t = [torch.from_numpy(np.asarray(s, dtype=np.int64)) for s in slots]
        multi = len(tables) > 1
        md = AttentionMetadata(
            slot_mapping=slot_t[0], block_table=tables[0],
            seq_lens=torch.from_numpy(seq_lens.astype(np.int32)),
            query_start_loc=torch.from_numpy(np.concatenate([[0], np.cumsum(num_new)]).astype(np.int32)),
            max_query_len=int(num_new.max()), max_seq_len=int(seq_lens.max()),
            group_slot_mappings=tuple(slot_t) if multi else None,
            group_block_tables=tuple(tables) if multi else None)
        device = self.model.device
        with torch.inference_mode():
            logits = self.model.forward(torch.from_numpy(input_ids).to(device),
                                        torch.from_numpy(positions).to(device),
                                        _to_device(md, device), self.kv_caches)  # (S, V)
        sampled: dict[str, list[int]] = {}
        for i, (rid, req) in enumerate(zip(rids, reqs)):
            if req.num_computed_tokens >= req.num_tokens:  # prefill complete: sample
                live = self._live[rid]
                sampled[rid] = [sample(logits[i], req.sampling_params, live.generator)]
        return sampled

    def _finish(self, rid: str) -> RequestOutput:
        live = self._live.pop(rid)
        self._release_row_of(live)
        req = live.request
        out_ids = list(req.output_token_ids)
        return RequestOutput(
            request_id=rid, prompt=live.prompt, prompt_token_ids=list(req.prompt_token_ids),
            output_token_ids=out_ids,
            text=self.tokenizer.decode(out_ids, skip_special_tokens=True) if self.tokenizer else "",
            finish_reason=_finish_reason(req), num_cached_tokens=max(req.num_cached_tokens, 0),
            num_preemptions=req.num_preemptions)

    def _release_row_of(self, live: _Live) -> None:
        if live.row is not None:
            self.block_table.clear_row(live.row)
            self._free_rows.append(live.row)
            live.row = None

    # ------------------------------------------------------------------ the loop
    def generate(self, prompts: str | Sequence[str | Sequence[int]],
                 params: SamplingParams | Sequence[SamplingParams] | None = None, *,
                 use_chat_template: bool = False, system_prompt: str | None = None,
                 callback: Any = None) -> list[RequestOutput]:
        """Run prompts to completion with continuous batching; outputs in prompt order.

        Args:
            prompts: Texts or token-id lists (a single string is one prompt).
            params: One SamplingParams for all, or one per prompt; default greedy, 16 tokens.
            use_chat_template: Wrap each text as a user turn with the model's chat template.
            system_prompt: With the chat template, a shared system turn (a shared prefix).
            callback: Called as ``callback(llm, finished_outputs)`` after every step (progress).

        Returns:
            One RequestOutput per prompt, in the order given.

        Raises:
            TypeError, ValueError: A bad prompt or params (see ``add_request``); the prompts of
                this call queued before it are aborted.
            RuntimeError: A step failed or could schedule nothing (see ``step``); every
                unfinished request of this call is aborted and its blocks freed.
        """
        if isinstance(prompts, str):
            prompts = [prompts]
        if not isinstance(prompts, Sequence) or isinstance(prompts, bytes):
            raise TypeError(f"prompts must be a str or a list of prompts (str or token-id "
                            f"lists), got {type(prompts).__name__}")
        prompts = list(prompts)
        if params is None or isinstance(params, SamplingParams):
            params = [params] * len(prompts)
        if len(params) != len(prompts):
            raise ValueError(f"got {len(params)} SamplingParams for {len(prompts)} prompts")
        ids: list[str] = []
        done: dict[str, RequestOutput] = {}
        try:
            for prompt, p in zip(prompts, params):
                if use_chat_template and isinstance(prompt, str):
                    prompt = self.chat_prompt([{"role": "user", "content": prompt}], system_prompt)
                ids.append(self.add_request(prompt, p))
            while self.scheduler.has_unfinished_requests():
                finished = self.step()
                done.update((o.request_id, o) for o in finished)
                if callback is not None:
                    callback(self, finished)
        except BaseException:
            # NOTE: a bad prompt, a failed step or Ctrl+C: nothing of this call stays queued.
            self.abort([i for i in ids if i in self._live])
            raise
        return [done[i] for i in ids]

    def chat_prompt(self, messages: list[dict[str, str]], system_prompt: str | None = None) -> str:
        """Render chat messages (plus an optional system turn) with the model's chat template."""
        if system_prompt is not None:
            messages = [{"role": "system", "content": system_prompt}, *messages]
        return self.tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)


def _finish_reason(request: Request) -> str | None:
    from kvlab.core.sched import get_finished_reason

    return get_finished_reason(request.status)


def _to_device(md: AttentionMetadata, device: torch.device) -> AttentionMetadata:
    if device.type == "cpu":
        return md
    move = lambda t: t.to(device, non_blocking=True)  # noqa: E731
    return AttentionMetadata(
        move(md.slot_mapping), move(md.block_table), move(md.seq_lens), move(md.query_start_loc),
        md.max_query_len, md.max_seq_len,
        None if md.group_slot_mappings is None else tuple(map(move, md.group_slot_mappings)),
        None if md.group_block_tables is None else tuple(map(move, md.group_block_tables)))
