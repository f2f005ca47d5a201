"""Decode attention bandwidth: kvlab's Triton paged kernels vs SDPA vs FlexAttention (GPU only).

Every method computes one decode step (one new query token per sequence) over ``context`` cached
tokens per sequence. Decode attention is memory-bound, so the figure of merit is achieved bandwidth:

    achieved GB/s = bytes of K and V read / time
                  = batch * context * num_kv_heads * head_dim * 2 (K and V) * bytes per element / s

and its fraction of the device's copy bandwidth (``dst.copy_(src)`` on a 1 GiB tensor, counting the
read and the write). Methods, side by side in one run:

* kvlab unified:  ``paged_attention`` forced onto the unified kernel (no split)
* kvlab split-KV: ``paged_attention_decode`` with the default ``choose_num_splits`` heuristic
* SDPA:           ``torch.nn.functional.scaled_dot_product_attention`` on K/V already gathered into
                  contiguous [batch, kv_heads, context, head_dim] (the gather is not timed)
* Flex paged:     ``torch.nn.attention.flex_attention`` (compiled) reading the same paged cache
                  through a BlockMask built from the block table (skipped when unavailable)

Times are medians from ``triton.testing.do_bench`` (which flushes L2 between runs). Results go to
``benchmarks/results/bench_attention_<device>.md`` and ``.csv``.

Usage::

    python benchmarks/bench_attention.py                       # full grid
    python benchmarks/bench_attention.py --quick --no-flex     # one small shape per model
"""

from __future__ import annotations

import argparse
import csv
import re
import sys
import time
from pathlib import Path

import torch

HEADS = {  # name: (num_q_heads, num_kv_heads, head_dim)
    "SmolLM2-135M": (9, 3, 64),
    "Llama-3-8B": (32, 8, 128),
}
BLOCK_SIZE = 16  # tokens per cache block
RESULTS = Path(__file__).resolve().parent / "results"
DTYPES = {"fp16": torch.float16, "bf16": torch.bfloat16}


def copy_bandwidth_gbs(num_bytes: int = 1 << 30) -> float:
    """Device copy bandwidth (GB/s): read + write of a ``num_bytes`` tensor."""
    import triton.testing

    src = torch.empty(num_bytes, dtype=torch.uint8, device="cuda")
    dst = torch.empty_like(src)
    ms = triton.testing.do_bench(lambda: dst.copy_(src), return_mode="median")
    return 2 * num_bytes / (ms * 1e-3) / 1e9


def build_decode_batch(batch: int, context: int, heads: tuple[int, int, int], dtype: torch.dtype,
                       device: str = "cuda", seed: int = 0) -> dict:
    """A decode step: each sequence holds ``context`` tokens (new one included), scattered."""
    num_q_heads, num_kv_heads, head_dim = heads
    gen = torch.Generator(device=device).manual_seed(seed)
    blocks_per_seq = -(-context // BLOCK_SIZE)
    num_blocks = 1 + batch * blocks_per_seq  # block 0 = null_block
    kv_cache = torch.randn(2, num_blocks, BLOCK_SIZE, num_kv_heads, head_dim, generator=gen,
                           device=device, dtype=dtype)
    ids = torch.randperm(num_blocks - 1, generator=gen, device=device) + 1
    block_table = ids.view(batch, blocks_per_seq).to(torch.int32)
    return dict(
        q=torch.randn(batch, num_q_heads, head_dim, generator=gen, device=device, dtype=dtype),
        key_cache=kv_cache[0], value_cache=kv_cache[1], block_table=block_table,
        seq_lens=torch.full((batch,), context, dtype=torch.int32, device=device),
        query_start_loc=torch.arange(batch + 1, dtype=torch.int32, device=device),
        context=context,
    )


def sdpa_fn(b: dict, scale: float):
    """SDPA over K/V gathered once into contiguous [batch, kv_heads, context, head_dim]."""
    import torch.nn.functional as F

    ids = b["block_table"].long()  # (B, n_blocks)
    k = b["key_cache"][ids].flatten(1, 2)[:, :b["context"]].transpose(1, 2).contiguous()
    v = b["value_cache"][ids].flatten(1, 2)[:, :b["context"]].transpose(1, 2).contiguous()
    q = b["q"].unsqueeze(2)  # (B, H_q, 1, D)
    group = q.shape[1] // k.shape[1]
    try:  # enable_gqa: torch >= 2.5
        F.scaled_dot_product_attention(q[:1], k[:1], v[:1], scale=scale, enable_gqa=group > 1)
    except TypeError:
        k, v = k.repeat_interleave(group, 1), v.repeat_interleave(group, 1)
        return lambda: F.scaled_dot_product_attention(q, k, v, scale=scale).squeeze(2)
    return lambda: F.scaled_dot_product_attention(q, k, v, scale=scale,
                                                  enable_gqa=group > 1).squeeze(2)


def flex_paged_fn(b: dict, scale: float, compile_flex: bool = True):
    """FlexAttention over the paged cache itself: K/V = the whole cache as one long sequence.

    Each KV head's group of query heads becomes the query-length axis ([B, H_kv, G, D]), so GQA
    ratios that are not powers of two work. The BlockMask lists each sequence's physical blocks
    (all but a ragged last one as "full"); its mask_mod maps a physical slot back to a logical
    position through a physical-to-logical table (as torch's experimental PagedAttention does).
    """
    from torch.nn.attention.flex_attention import BlockMask, flex_attention

    key_cache, value_cache, bt = b["key_cache"], b["value_cache"], b["block_table"].long()
    num_blocks, block_size, num_kv_heads, head_dim = key_cache.shape
    batch, num_q_heads = b["q"].shape[:2]
    group = num_q_heads // num_kv_heads
    seq_lens = b["seq_lens"].long()
    n_full = seq_lens // block_size  # (B,)
    has_partial = (seq_lens % block_size > 0).long()
    max_blocks = bt.shape[1]
    cols = torch.arange(max_blocks, device=bt.device)
    # NOTE: BlockMask wants its index lists as wide as the KV block count (num_blocks columns).
    full_idx = torch.zeros(batch, num_blocks, dtype=torch.int32, device=bt.device)
    full_idx[:, :max_blocks] = torch.where(cols[None] < n_full[:, None], bt, 0).to(torch.int32)
    part_idx = torch.zeros(batch, num_blocks, dtype=torch.int32, device=bt.device)
    part_idx[:, :1] = bt.gather(1, n_full.clamp(max=max_blocks - 1)[:, None]).to(torch.int32)
    p2l = torch.full((batch, num_blocks), -1, dtype=torch.long, device=bt.device)
    p2l.scatter_(1, bt, cols.expand(batch, -1))

    def mask_mod(b_, h, q_idx, kv_idx):
        logical = p2l[b_, kv_idx // block_size]
        pos = logical * block_size + kv_idx % block_size
        return (logical >= 0) & (pos < seq_lens[b_])

    i32 = torch.int32
    block_mask = BlockMask.from_kv_blocks(
        has_partial.to(i32).view(batch, 1, 1), part_idx.view(batch, 1, 1, num_blocks),
        n_full.to(i32).view(batch, 1, 1), full_idx.view(batch, 1, 1, num_blocks),
        BLOCK_SIZE=(128, block_size), mask_mod=mask_mod,
        seq_lengths=(group, num_blocks * block_size))
    k = key_cache.reshape(1, num_blocks * block_size, num_kv_heads, head_dim).transpose(1, 2)
    v = value_cache.reshape(1, num_blocks * block_size, num_kv_heads, head_dim).transpose(1, 2)
    q = b["q"].view(batch, num_kv_heads, group, head_dim)
    fn = torch.compile(flex_attention, dynamic=False) if compile_flex else flex_attention
    return lambda: fn(q, k, v, block_mask=block_mask, scale=scale).reshape(batch, num_q_heads,
                                                                           head_dim)


def kvlab_fns(b: dict, scale: float) -> dict:
    import kvlab.kernels as K
    from kvlab.kernels.tiles import attention_tiles, num_sms

    args = (b["q"], b["key_cache"], b["value_cache"], b["block_table"], b["seq_lens"],
            b["query_start_loc"])
    group = b["q"].shape[1] // b["key_cache"].shape[2]
    tiles = attention_tiles(b["q"].device, group, 1, b["context"], b["q"].element_size())
    splits = K.choose_num_splits(b["q"].shape[0], b["key_cache"].shape[2], b["context"],
                                 num_sms(b["q"].device))
    common = dict(scale=scale, out=torch.empty_like(b["q"]), max_seq_len=b["context"])
    return {
        "kvlab unified": lambda: K.paged_attention(*args, **common, max_query_len=1, tiles=tiles),
        f"kvlab split-KV ({splits} splits)": lambda: K.paged_attention_decode(*args, **common),
    }


def bench_point(model: str, dtype_name: str, batch: int, context: int,
                use_flex: bool) -> list[dict]:
    """Time every method on one shape; check each against kvlab unified (tolerance 2e-2)."""
    import triton.testing

    heads = HEADS[model]
    b = build_decode_batch(batch, context, heads, DTYPES[dtype_name])
    scale = heads[2] ** -0.5
    kv_bytes = 2 * batch * context * heads[1] * heads[2] * b["q"].element_size()
    methods = kvlab_fns(b, scale)
    methods["SDPA (contiguous K/V)"] = sdpa_fn(b, scale)
    if use_flex:
        try:
            methods["Flex paged"] = flex_paged_fn(b, scale)
        except Exception as exc:  # old torch, unsupported shape: report and go on
            print(f"  Flex paged unavailable: {type(exc).__name__}: {exc}", file=sys.stderr)
    reference = next(iter(methods.values()))().float()
    rows = []
    for name, fn in methods.items():
        try:
            err = (fn().float() - reference).abs().max().item()
            ms = triton.testing.do_bench(fn, return_mode="median")
        except Exception as exc:
            print(f"  {name} failed: {type(exc).__name__}: {str(exc)[:200]}", file=sys.stderr)
            continue
        rows.append(dict(model=model, dtype=dtype_name, batch=batch, context=context, method=name,
                         time_us=ms * 1e3, gbs=kv_bytes / (ms * 1e-3) / 1e9, max_abs_err=err))
    del b, methods
    torch.cuda.empty_cache()
    return rows


def write_tables(rows: list[dict], device: str, copy_gbs: float) -> Path:
    """Write the CSV and a markdown table; return the markdown path."""
    RESULTS.mkdir(parents=True, exist_ok=True)
    slug = re.sub(r"[^A-Za-z0-9]+", "_", device).strip("_")
    for r in rows:
        r["frac_copy"] = r["gbs"] / copy_gbs
    csv_path = RESULTS / f"bench_attention_{slug}.csv"
    with csv_path.open("w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    md = [f"# Decode attention bandwidth on {device}", "",
          f"torch {torch.__version__}; block_size {BLOCK_SIZE} tokens; copy bandwidth "
          f"{copy_gbs:.0f} GB/s (read + write, 1 GiB). K/V bytes read / median time.", "",
          "| model (q/kv heads, head_dim) | dtype | batch (seqs) | context (tokens) | method | "
          "time (us) | achieved (GB/s) | of copy bw (%) | max abs err vs kvlab unified |",
          "|---|---|---:|---:|---|---:|---:|---:|---:|"]
    for r in rows:
        h = HEADS[r["model"]]
        md.append(f"| {r['model']} ({h[0]}/{h[1]}, {h[2]}) | {r['dtype']} | {r['batch']} | "
                  f"{r['context']} | {r['method']} | {r['time_us']:.1f} | {r['gbs']:.0f} | "
                  f"{100 * r['frac_copy']:.0f} | {r['max_abs_err']:.1e} |")
    md_path = RESULTS / f"bench_attention_{slug}.md"
    md_path.write_text("\n".join(md) + "\n")
    print(f"wrote {md_path} and {csv_path}")
    return md_path


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--models", nargs="+", default=list(HEADS), choices=list(HEADS))
    p.add_argument("--dtypes", nargs="+", default=list(DTYPES), choices=list(DTYPES))
    p.add_argument("--batches", nargs="+", type=int, default=[1, 16, 64], help="sequences")
    p.add_argument("--contexts", nargs="+", type=int, default=[1024, 8192], help="tokens")
    p.add_argument("--no-flex", action="store_true", help="skip FlexAttention (slow to compile)")
    p.add_argument("--quick", action="store_true", help="one shape (8 seqs x 2048 tokens), fp16")
    a = p.parse_args(argv)
    if not torch.cuda.is_available():
        print("bench_attention.py needs a CUDA GPU (it times compiled Triton kernels); "
              "none found, nothing to measure.", file=sys.stderr)
        return 2
    if a.quick:
        a.batches, a.contexts, a.dtypes = [8], [2048], ["fp16"]
    device = torch.cuda.get_device_name()
    copy_gbs = copy_bandwidth_gbs()
    print(f"{device}: copy bandwidth {copy_gbs:.0f} GB/s")
    rows = []
    for model in a.models:
        for dtype_name in a.dtypes:
            for batch in a.batches:
                for context in a.contexts:
                    t0 = time.time()
                    point = bench_point(model, dtype_name, batch, context, not a.no_flex)
                    for r in point:
                        print(f"{model:13s} {dtype_name} batch {batch:3d} ctx {context:5d} "
                              f"{r['method']:28s} {r['time_us']:9.1f} us {r['gbs']:7.0f} GB/s "
                              f"({100 * r['gbs'] / copy_gbs:3.0f}% of copy) "
                              f"err {r['max_abs_err']:.1e}")
                    print(f"  ({time.time() - t0:.1f} s)", flush=True)
                    rows += point
    write_tables(rows, device, copy_gbs)
    return 0


if __name__ == "__main__":
    sys.exit(main())
