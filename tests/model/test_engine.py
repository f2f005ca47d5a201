"""The engine ties scheduler, KVCacheManager, block table, model and kernels: tokens must not depend
on how the cache was used (cold / prefix hit / chunked / preempted / batched), and the trace must
replay to the live state."""

from __future__ import annotations

import pytest
import torch

from kvlab.model import Model
from kvlab.model.engine import LLM, SamplingParams
from kvlab.model.reference import dense_forward, random_weights, tiny_config
from kvlab.trace import EventKind, KVState, check_invariants

PROMPTS = [
    "The capital of France is",
    "List three colours of the rainbow:",
    "def fibonacci(n):",
]


@pytest.fixture(scope="module")
def smollm() -> Model:
    torch.set_num_threads(1)
    return Model.from_pretrained(progress=False)


def _llm(model: Model, **kw) -> LLM:
    kw.setdefault("num_gpu_blocks", 64)
    kw.setdefault("block_size", 16)
    return LLM(model, **kw)


def _tokens(outputs) -> list[list[int]]:
    return [o.output_token_ids for o in outputs]


@pytest.mark.model
def test_greedy_paris(smollm: Model) -> None:
    (out,) = _llm(smollm).generate(["The capital of France is"], SamplingParams(max_tokens=2))
    assert out.text == " Paris."
    assert out.finish_reason == "length"
    assert out.num_cached_tokens == 0


@pytest.mark.model
def test_prefix_hit_chunked_batched_and_preempted_runs_match_cold(smollm: Model) -> None:
    params = SamplingParams(max_tokens=8, ignore_eos=True)
    cold = [_tokens(_llm(smollm).generate([p], params))[0] for p in PROMPTS]

    warm_llm = _llm(smollm)
    first = warm_llm.generate([PROMPTS[0] * 4], params)           # 24 tokens: one full block
    again = warm_llm.generate([PROMPTS[0] * 4], params)
    assert again[0].num_cached_tokens == 16                         # the full block was hit
    assert _tokens(again) == _tokens(first)

    batched = _llm(smollm).generate(PROMPTS, params)
    assert _tokens(batched) == cold

    chunked = _llm(smollm, max_num_batched_tokens=4).generate(PROMPTS, params)
    assert _tokens(chunked) == cold

    # 6 usable blocks of 4 tokens: three growing requests cannot all fit -> preemption.
    tiny = _llm(smollm, num_gpu_blocks=7, block_size=4, max_num_batched_tokens=64)
    preempted = tiny.generate(PROMPTS, params)
    assert sum(o.num_preemptions for o in preempted) >= 1
    assert any(s.preempted_req_ids for s in tiny.step_stats)
    assert _tokens(preempted) == cold


@pytest.mark.model
def test_trace_replays_to_the_live_state(smollm: Model) -> None:
    llm = _llm(smollm, num_gpu_blocks=9, block_size=4)
    llm.generate(PROMPTS[:2], SamplingParams(max_tokens=6, ignore_eos=True))
    trace = llm.trace
    assert trace.find(EventKind.STEP) is not None
    live = KVState.from_manager(llm.kv_cache_manager)
    replayed = trace.check_replay(lambda state, i: check_invariants(state, trace.in_transit(i)))
    assert replayed.diff(live) == []
    assert replayed.free_queue == live.free_queue
    check_invariants(llm.kv_cache_manager)
    # every request finished: all blocks are back in the free queue, in LRU order
    assert len(live.free_queue) == 8


@pytest.mark.model
def test_bad_requests_change_nothing(smollm: Model) -> None:
    llm = _llm(smollm)
    with pytest.raises(ValueError):
        llm.add_request([])
    llm.add_request([1, 2, 3], request_id="a")
    with pytest.raises(ValueError, match="already running"):
        llm.add_request([4, 5], request_id="a")
    with pytest.raises(ValueError):
        SamplingParams(temperature=-1.0)
    assert llm.scheduler.get_request_counts() == (0, 1)


def test_hybrid_sliding_window_engine_matches_dense_reference() -> None:
    """Gemma-3-like: alternate layers use a sliding window -> two KV-cache groups (full + SW),
    the HybridKVCacheCoordinator, null blocks left behind the window; greedy tokens must equal a
    dense cache-free forward with the same windows."""
    torch.manual_seed(0)
    config = tiny_config(num_layers=4, sliding_window=[8, None, 8, None], vocab_size=96)
    weights = random_weights(config, seed=3)
    model = Model(config, weights, tokenizer=None)
    prompt = [int(t) for t in torch.randint(3, 96, (21,), generator=torch.Generator().manual_seed(1))]
    llm = LLM(model, num_gpu_blocks=32, block_size=4, max_num_batched_tokens=8, max_model_len=104)
    assert len(llm.kv_cache_config.kv_cache_groups) == 2
    (out,) = llm.generate([prompt], SamplingParams(max_tokens=10, ignore_eos=True))

    seq = list(prompt)
    for _ in range(10):
        logits = dense_forward(config, weights, torch.tensor(seq))
        seq.append(int(logits[-1].argmax()))
    assert out.output_token_ids == seq[len(prompt):]
    # the sliding-window group released blocks behind the window
    assert llm.trace.find(EventKind.REQ_BLOCKS_NULLED) is not None


def test_triton_backend_under_the_interpreter_matches_torch() -> None:
    """The same engine run with the Triton kernels (interpreted on a CPU) and the torch reference."""
    config = tiny_config(num_layers=2, vocab_size=64)
    weights = random_weights(config, seed=5)
    prompts = [[5, 9, 13, 2 + i, 7, 11, 3, 8, 21] for i in range(2)]
    outs = {}
    for backend in ("torch", "triton"):
        model = Model(config, weights, tokenizer=None, attention_backend=backend)
        llm = LLM(model, num_gpu_blocks=16, block_size=4, max_num_batched_tokens=16, max_model_len=60)
        outs[backend] = _tokens(llm.generate(prompts, SamplingParams(max_tokens=5, ignore_eos=True)))
    assert outs["triton"] == outs["torch"]


@pytest.mark.model
def test_the_issue_pools_refuse_at_once_instead_of_hanging(smollm: Model) -> None:
    """LLM(num_gpu_blocks=8) with a 120-token prompt hung (memory growing ~60 MB/s): now the pool
    sets max_model_len (7 usable blocks x 16 = 112 tokens) and the prompt is refused at once."""
    llm = _llm(smollm, num_gpu_blocks=8)
    assert llm.max_model_len == 112
    prompt = list(range(1000, 1120))
    with pytest.raises(ValueError, match=r"120 tokens; with at least 1 output token that is "
                                         r"more than max_model_len 112 \(allowed 1..111"):
        llm.generate([prompt], SamplingParams(max_tokens=4))
    assert llm.scheduler.get_request_counts() == (0, 0)
    (out,) = llm.generate([prompt[:100]], SamplingParams(max_tokens=50, ignore_eos=True))
    assert len(out.output_token_ids) == 12 and out.finish_reason == "length"   # 100 + 12 = 112
    with pytest.raises(ValueError, match="needs 64 blocks for max_model_len 1024, the pool has 7"):
        _llm(smollm, num_gpu_blocks=8, max_model_len=1024)
