"""paged_attention_decode (split-KV): Triton vs the torch reference; the split heuristic.

Tolerances: fp32 <= 1e-4 abs and rel; fp16/bf16 <= 2e-2 abs and rel.
"""

import pytest
import torch

import kvlab.kernels as K
from kvlab.kernels.batch import random_paged_batch
from kvlab.kernels.tiles import MAX_NUM_SPLITS, MIN_KEYS_PER_SPLIT, PROGRAMS_PER_SM

CUDA = torch.cuda.is_available()
needs_cuda = pytest.mark.skipif(not CUDA, reason="needs CUDA")
needs_triton = pytest.mark.skipif(not K.triton_available("cpu"), reason="needs Triton interpreter")
FP32_TOL = dict(atol=1e-4, rtol=1e-4)
HALF_TOL = dict(atol=2e-2, rtol=2e-2)


def decode_batch(seq_lens, gqa, head_dim, block_size, **kw):
    return random_paged_batch(seq_lens, [1] * len(seq_lens), num_q_heads=gqa[0],
                              num_kv_heads=gqa[1], head_dim=head_dim, block_size=block_size, **kw)


def check(batch, scale, sliding_window, tol, **kw):
    expected = K.paged_attention(*batch.attention_args(), scale=scale,
                                 sliding_window=sliding_window, backend="torch")
    got = K.paged_attention_decode(*batch.attention_args(), scale=scale,
                                   sliding_window=sliding_window, **kw)
    torch.testing.assert_close(got, expected, **tol)


@needs_triton
@pytest.mark.parametrize("num_splits", [1, 3, 8])
@pytest.mark.parametrize("gqa", [(2, 2), (6, 2), (8, 2)])
@pytest.mark.parametrize("sliding_window", [None, 20])
def test_splits_match_reference(num_splits, gqa, sliding_window):
    """Contexts from 1 token (most splits empty) to several 16-key tiles per split."""
    batch = decode_batch([1, 50, 130, 17], gqa, 32, 8, seed=num_splits)
    check(batch, 0.2, sliding_window, FP32_TOL, backend="triton", num_splits=num_splits,
          block_n=16)


@needs_triton
@pytest.mark.parametrize("head_dim,block_size", [(64, 4), (128, 16), (80, 32)])
def test_head_dims_and_block_sizes(head_dim, block_size):
    batch = decode_batch([70, 33], (6, 2), head_dim, block_size, seed=head_dim)
    check(batch, head_dim ** -0.5, None, FP32_TOL, backend="triton", num_splits=2, block_n=32)


@needs_triton
def test_default_splits_and_out_buffer():
    batch = decode_batch([600, 5], (4, 2), 32, 16, seed=7)
    out = torch.empty_like(batch.q)
    got = K.paged_attention_decode(*batch.attention_args(), scale=0.1, out=out, backend="triton")
    assert got is out
    torch.testing.assert_close(out, K.paged_attention(*batch.attention_args(), scale=0.1,
                                                      backend="torch"), **FP32_TOL)


@pytest.mark.parametrize("backend", ["torch", pytest.param("triton", marks=needs_triton)])
def test_rejects_prefill_tokens(backend):
    batch = random_paged_batch([5, 4], [2, 1], num_q_heads=2, num_kv_heads=1, head_dim=16,
                               block_size=4)
    with pytest.raises(ValueError, match="one query token per sequence"):
        K.paged_attention_decode(*batch.attention_args(), scale=0.1, backend=backend)
    qsl = torch.tensor([0, 0, 2], dtype=torch.int32)  # two tokens, but 0 + 2 instead of 1 + 1
    args = list(batch.attention_args())
    args[0] = batch.q[:2]
    args[5] = qsl
    with pytest.raises(ValueError, match="every query length to be 1"):
        K.paged_attention_decode(*args, scale=0.1, backend=backend)


@pytest.mark.parametrize("kw,match", [
    (dict(num_splits=0), "num_splits"),
    (dict(num_splits=300), "num_splits"),
    (dict(block_n=24), "block_n"),
    (dict(backend="cuda"), "unknown backend"),
])
def test_bad_options(kw, match):
    batch = decode_batch([5], (2, 1), 16, 4)
    with pytest.raises(ValueError, match=match):
        K.paged_attention_decode(*batch.attention_args(), scale=0.1, **kw)


@pytest.mark.parametrize("num_seqs,num_kv_heads,max_seq_len,sms,expected", [
    (8, 8, 8192, 132, 9),  # ceil(4*132 / 64) = 9
    (64, 8, 8192, 132, 2),  # ceil(528 / 512) = 2
    (64, 3, 8192, 132, 3),  # ceil(528 / 192) = 3
    (1, 1, 100, 132, 1),  # a 100-token context is below MIN_KEYS_PER_SPLIT: no split
    (1, 1, 1 << 20, 132, MAX_NUM_SPLITS),
    (2, 1, 1024, 132, 1024 // MIN_KEYS_PER_SPLIT),  # capped by keys per split
    (512, 8, 8192, 132, 1),  # enough programs already
])
def test_choose_num_splits(num_seqs, num_kv_heads, max_seq_len, sms, expected):
    assert PROGRAMS_PER_SM == 4
    assert K.choose_num_splits(num_seqs, num_kv_heads, max_seq_len, sms) == expected


@needs_cuda
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("gqa,head_dim", [((9, 3), 64), ((32, 8), 128), ((6, 2), 32)])
@pytest.mark.parametrize("sliding_window", [None, 256])
@pytest.mark.parametrize("num_splits", [None, 1, 7])
def test_cuda_decode(dtype, gqa, head_dim, sliding_window, num_splits):
    batch = decode_batch([4000, 1, 777, 2048, 16], gqa, head_dim, 16, dtype=dtype, device="cuda")
    check(batch, head_dim ** -0.5, sliding_window, HALF_TOL, num_splits=num_splits)


@needs_cuda
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_cuda_auto_dispatch_uses_split_kv(dtype, monkeypatch):
    """A small decode batch with long contexts goes through paged_attention to split-KV."""
    import kvlab.kernels.decode_attention as dec
    calls = []
    real = dec.decode_attention_triton
    monkeypatch.setattr(dec, "decode_attention_triton",
                        lambda *a, **k: calls.append(k["num_splits"]) or real(*a, **k))
    batch = decode_batch([8192, 3000], (32, 8), 128, 16, dtype=dtype, device="cuda")
    expected = K.paged_attention(*batch.attention_args(), scale=0.088, backend="torch")
    got = K.paged_attention(*batch.attention_args(), scale=0.088)
    torch.testing.assert_close(got, expected, **HALF_TOL)
    assert len(calls) == 1 and calls[0] > 1
