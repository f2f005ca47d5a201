"""paged_attention: reference vs SDPA, Triton (interpreter on CPU / compiled on CUDA) vs reference.

Tolerances: fp32 <= 1e-4 abs and rel; fp16/bf16 <= 2e-2 abs and rel.
"""

import pytest
import torch
import torch.nn.functional as F

import kvlab.kernels as K
from kvlab.kernels.batch import random_paged_batch

CUDA = torch.cuda.is_available()
needs_cuda = pytest.mark.skipif(not CUDA, reason="needs CUDA")
needs_triton = pytest.mark.skipif(not K.triton_available("cpu"), reason="needs Triton interpreter")
FP32_TOL = dict(atol=1e-4, rtol=1e-4)
HALF_TOL = dict(atol=2e-2, rtol=2e-2)

# (seq_lens, query_lens): prefill (q == seq), chunked prefill (q < seq, q > 1), decode (q == 1).
CASES = {
    "prefill": ([7, 20], [7, 20]),
    "decode": ([1, 17, 33], [1, 1, 1]),
    "mixed": ([19, 40, 23, 9], [19, 5, 1, 1]),
}
GQA = [(2, 2), (6, 2), (8, 2)]  # (num_q_heads, num_kv_heads): ratios 1, 3, 4


def sdpa_attention(batch, scale, sliding_window):
    """Independent reference: whole blocks copied per block_table entry, then SDPA with a mask."""
    outs = []
    qsl = batch.query_start_loc.tolist()
    block_size = batch.key_cache.shape[1]
    group = batch.q.shape[1] // batch.key_cache.shape[2]
    for i, seq_len in enumerate(batch.seq_lens.tolist()):
        n_blocks = -(-seq_len // block_size)
        ids = batch.block_table[i, :n_blocks].long()
        k = batch.key_cache[ids].flatten(0, 1)[:seq_len]  # (S, H_kv, D)
        v = batch.value_cache[ids].flatten(0, 1)[:seq_len]
        q = batch.q[qsl[i]:qsl[i + 1]]  # (Q, H_q, D)
        q_pos = torch.arange(seq_len - q.shape[0], seq_len)[:, None]
        k_pos = torch.arange(seq_len)[None, :]
        mask = k_pos <= q_pos
        if sliding_window is not None:
            mask &= q_pos - k_pos < sliding_window
        o = F.scaled_dot_product_attention(
            q.transpose(0, 1).float(), k.transpose(0, 1).float().repeat_interleave(group, 0),
            v.transpose(0, 1).float().repeat_interleave(group, 0), attn_mask=mask, scale=scale)
        outs.append(o.transpose(0, 1).to(batch.q.dtype))
    return torch.cat(outs)


def make(case, gqa, head_dim, block_size, **kw):
    seq_lens, query_lens = CASES[case] if isinstance(case, str) else case
    return random_paged_batch(seq_lens, query_lens, num_q_heads=gqa[0], num_kv_heads=gqa[1],
                              head_dim=head_dim, block_size=block_size, **kw)


@pytest.mark.parametrize("case", list(CASES))
@pytest.mark.parametrize("gqa", GQA)
@pytest.mark.parametrize("block_size", [4, 16])
@pytest.mark.parametrize("sliding_window", [None, 5])
def test_reference_matches_sdpa(case, gqa, block_size, sliding_window):
    batch = make(case, gqa, 32, block_size, seed=1)
    got = K.paged_attention(*batch.attention_args(), scale=0.2, sliding_window=sliding_window,
                            backend="torch")
    torch.testing.assert_close(got, sdpa_attention(batch, 0.2, sliding_window), atol=1e-5,
                               rtol=1e-5)


def check_triton(batch, scale, sliding_window, **kw):
    expected = K.paged_attention(*batch.attention_args(), scale=scale,
                                 sliding_window=sliding_window, backend="torch")
    got = K.paged_attention(*batch.attention_args(), scale=scale, sliding_window=sliding_window,
                            backend="triton", **kw)
    torch.testing.assert_close(got, expected, **FP32_TOL)


@needs_triton
@pytest.mark.parametrize("case", list(CASES))
@pytest.mark.parametrize("block_size,sliding_window", [(4, None), (16, 6), (32, None), (8, 3)])
def test_triton_matches_reference(case, block_size, sliding_window):
    """Every batch kind x block sizes smaller/larger than the key tile x window on/off."""
    check_triton(make(case, (6, 2), 64, block_size, seed=2), 0.125, sliding_window)


@needs_triton
@pytest.mark.parametrize("gqa", GQA)
@pytest.mark.parametrize("head_dim", [32, 64, 128])
def test_triton_gqa_and_head_dim(gqa, head_dim):
    window = None if head_dim == 64 else head_dim // 8
    check_triton(make("mixed", gqa, head_dim, 8, seed=head_dim), head_dim ** -0.5, window)


@needs_triton
@pytest.mark.parametrize("tiles", [
    K.AttentionTiles(block_m=16, block_q=5, block_n=16),  # G=3: 15 of 16 rows used
    K.AttentionTiles(block_m=16, block_q=2, block_n=32),  # several q tiles per sequence
    K.AttentionTiles(block_m=32, block_q=10, block_n=64),
])
@pytest.mark.parametrize("sliding_window", [None, 7])
def test_triton_gpu_sized_tiles(tiles, sliding_window):
    """GPU-like tiles: many query tiles and key loops; block_size 32 > block_n 16, and 8 < 32."""
    for block_size in (8, 32):
        batch = make(([21, 38, 12, 70], [21, 6, 1, 3]), (9, 3), 64, block_size, seed=3)
        check_triton(batch, 0.125, sliding_window, tiles=tiles)


@needs_triton
@pytest.mark.parametrize("gqa,element_size", [((2, 2), 2), ((6, 2), 2), ((8, 2), 4), ((9, 3), 2)])
def test_gpu_default_tiles_run_under_interpreter(gqa, element_size, monkeypatch):
    """The tiles attention_tiles picks for a GPU (decode and prefill sizes) give correct results."""
    from kvlab.kernels.tiles import attention_tiles
    monkeypatch.setenv("TRITON_INTERPRET", "0")  # for the tile choice; kernels stay interpreted
    batch = make(([40, 24, 9], [40, 5, 1]), gqa, 32, 16, seed=6)
    for max_query_len in (1, 40):
        tiles = attention_tiles(torch.device("cuda"), gqa[0] // gqa[1], max_query_len, 40,
                                element_size)
        assert tiles.block_m >= 16 and tiles.block_q * gqa[0] // gqa[1] <= tiles.block_m
        monkeypatch.setenv("TRITON_INTERPRET", "1")
        check_triton(batch, 0.17, 11, tiles=tiles)
        monkeypatch.setenv("TRITON_INTERPRET", "0")


@needs_triton
def test_triton_odd_head_dim_and_empty_query():
    """head_dim 48 (padded to 64 inside the kernel) and a sequence with no new token this step."""
    batch = make(([10, 6, 30], [3, 0, 2]), (4, 2), 48, 4, seed=4)
    check_triton(batch, 48 ** -0.5, None)


@needs_triton
def test_out_buffer_written_in_place_and_maxima_trusted():
    batch = make("mixed", (6, 2), 32, 16, seed=5)
    out = torch.full_like(batch.q, float("nan"))
    got = K.paged_attention(*batch.attention_args(), scale=0.1, out=out, backend="triton",
                            max_query_len=batch.max_query_len, max_seq_len=batch.max_seq_len)
    assert got is out
    expected = K.paged_attention(*batch.attention_args(), scale=0.1, backend="torch")
    torch.testing.assert_close(out, expected, **FP32_TOL)


def test_auto_on_cpu_runs_reference(monkeypatch):
    import kvlab.kernels.api as api
    calls = []
    real = api.reference.paged_attention_torch
    monkeypatch.setattr(api.reference, "paged_attention_torch",
                        lambda *a, **k: calls.append(1) or real(*a, **k))
    batch = make("decode", (2, 2), 32, 16)
    K.paged_attention(*batch.attention_args(), scale=0.1)
    assert calls == [1]


@pytest.mark.parametrize("change,exc,match", [
    (dict(backend="flash"), ValueError, "unknown backend"),
    (dict(sliding_window=0), ValueError, "sliding_window"),
    (dict(scale=-1.0), ValueError, "scale"),
    (dict(q=lambda b: b.q[:, :3]), ValueError, "multiple of num_kv_heads"),
    (dict(q=lambda b: b.q.half()), TypeError, "q dtype"),
    (dict(seq_lens=lambda b: b.seq_lens - 2), ValueError, "seq_len >= query len"),
    (dict(query_start_loc=lambda b: b.query_start_loc[:-1]), ValueError, "num_seqs \\+ 1"),
    (dict(block_table=lambda b: b.block_table[:, :2]), ValueError, "block_table capacity"),
    (dict(block_table=lambda b: b.block_table.float()), TypeError, "block_table dtype"),
])
@pytest.mark.parametrize("backend", ["torch", pytest.param("triton", marks=needs_triton)])
def test_bad_input(change, exc, match, backend):
    batch = make("mixed", (6, 2), 32, 4)
    args = dict(zip(["q", "key_cache", "value_cache", "block_table", "seq_lens",
                     "query_start_loc"], batch.attention_args(), strict=True))
    kw = dict(scale=0.1, backend=backend)
    for name, value in change.items():
        if callable(value):
            args[name] = value(batch)
        else:
            kw[name] = value
    with pytest.raises(exc, match=match):
        K.paged_attention(**args, **kw)


def test_import_without_triton_and_interpret_flag():
    """In a fresh interpreter: no triton -> import works, torch backend works, triton raises."""
    import subprocess
    import sys
    code = (
        "import os, sys; os.environ.pop('TRITON_INTERPRET', None); sys.modules['triton'] = None\n"
        "import torch, kvlab.kernels as K\n"
        "from kvlab.kernels.batch import random_paged_batch\n"
        "assert torch.cuda.is_available() or os.environ['TRITON_INTERPRET'] == '1'\n"
        "assert not K.triton_available('cpu')\n"
        "b = random_paged_batch([3], [3], num_q_heads=2, num_kv_heads=1, head_dim=16,\n"
        "                       block_size=4)\n"
        "K.paged_attention(*b.attention_args(), scale=0.25, backend='torch')\n"
        "try:\n    K.paged_attention(*b.attention_args(), scale=0.25, backend='triton')\n"
        "except RuntimeError as e:\n    assert 'triton' in str(e); print('ok')\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.stdout.strip() == "ok", done.stderr


@needs_cuda
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("gqa,head_dim", [((9, 3), 64), ((32, 8), 128), ((4, 4), 32)])
@pytest.mark.parametrize("block_size", [16, 32])
@pytest.mark.parametrize("sliding_window", [None, 100])
def test_cuda_mixed_batch(dtype, gqa, head_dim, block_size, sliding_window):
    seq_lens = [300, 1000, 57, 513, 1, 2048]
    query_lens = [300, 128, 1, 1, 1, 64]
    batch = make((seq_lens, query_lens), gqa, head_dim, block_size, dtype=dtype, device="cuda")
    kw = dict(scale=head_dim ** -0.5, sliding_window=sliding_window)
    expected = K.paged_attention(*batch.attention_args(), **kw, backend="torch")
    got = K.paged_attention(*batch.attention_args(), **kw)  # auto -> Triton on CUDA
    torch.testing.assert_close(got, expected, **HALF_TOL)
