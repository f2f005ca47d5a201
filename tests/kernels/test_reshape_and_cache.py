"""reshape_and_cache: Triton (interpreter on CPU, compiled on CUDA) vs the torch reference, a loop.

Tolerance: exact (the kernel copies bytes; no arithmetic).
"""

import pytest
import torch

import kvlab.kernels as K

CUDA = torch.cuda.is_available()
needs_cuda = pytest.mark.skipif(not CUDA, reason="needs CUDA")
needs_triton = pytest.mark.skipif(not K.triton_available("cpu"), reason="needs Triton interpreter")


def make_step(num_tokens, num_kv_heads, head_dim, block_size, num_blocks, *, pad_every=0,
              dtype=torch.float32, device="cpu", seed=0):
    """kv_cache [2, num_blocks, block_size, H, D] plus a step of new keys/values, distinct slots."""
    gen = torch.Generator().manual_seed(seed)
    kv_cache = torch.randn(2, num_blocks, block_size, num_kv_heads, head_dim, generator=gen)
    # key/value as strided views of one fused projection output, as a model produces them.
    qkv = torch.randn(num_tokens, 3, num_kv_heads, head_dim, generator=gen)
    slots = torch.randperm(num_blocks * block_size, generator=gen)[:num_tokens]
    if pad_every:
        slots[::pad_every] = -1
    kv_cache = kv_cache.to(device=device, dtype=dtype)
    qkv = qkv.to(device=device, dtype=dtype)
    return kv_cache, qkv[:, 1], qkv[:, 2], slots.to(device)


def loop_write(kv_cache, key, value, slots):
    """The definition, one token at a time."""
    expected = kv_cache.clone()
    block_size = kv_cache.shape[2]
    for t, slot in enumerate(slots.tolist()):
        if slot >= 0:
            expected[0, slot // block_size, slot % block_size] = key[t]
            expected[1, slot // block_size, slot % block_size] = value[t]
    return expected


@pytest.mark.parametrize("num_tokens,num_kv_heads,head_dim,block_size,pad_every", [
    (1, 1, 32, 16, 0),
    (7, 3, 64, 4, 3),
    (37, 2, 128, 16, 5),
    (70, 4, 32, 32, 0),
    (5, 3, 48, 8, 2),  # head_dim not a power of two
])
@pytest.mark.parametrize("backend", ["torch", pytest.param("triton", marks=needs_triton)])
def test_matches_loop(backend, num_tokens, num_kv_heads, head_dim, block_size, pad_every):
    num_blocks = -(-num_tokens // block_size) + 4
    kv_cache, key, value, slots = make_step(num_tokens, num_kv_heads, head_dim, block_size,
                                            num_blocks, pad_every=pad_every)
    expected = loop_write(kv_cache, key, value, slots)
    K.reshape_and_cache(key, value, kv_cache[0], kv_cache[1], slots, backend=backend)
    assert torch.equal(kv_cache, expected)


@needs_triton
def test_triton_small_tiles_cover_every_token():
    """Several token tiles and several (head, dim) tiles per token."""
    kv_cache, key, value, slots = make_step(19, 3, 64, 8, 6, pad_every=4, seed=3)
    expected = loop_write(kv_cache, key, value, slots)
    from kvlab.kernels.cache_write import reshape_and_cache_triton
    reshape_and_cache_triton(key, value, kv_cache[0], kv_cache[1], slots, block_t=4, block_hd=64)
    assert torch.equal(kv_cache, expected)


def test_padding_only_step_writes_nothing():
    kv_cache, key, value, _ = make_step(4, 2, 32, 16, 2)
    before = kv_cache.clone()
    slots = torch.full((4,), -1, dtype=torch.int64)
    K.reshape_and_cache(key, value, kv_cache[0], kv_cache[1], slots)
    assert torch.equal(kv_cache, before)


@pytest.mark.parametrize("mutate,exc,match", [
    (lambda a: a.update(key=a["key"].to(torch.float16)), TypeError, "dtype"),
    (lambda a: a.update(key=a["key"][:, :1]), ValueError, "must match"),
    (lambda a: a.update(slot_mapping=a["slot_mapping"][:-1]), ValueError, "slot_mapping has"),
    (lambda a: a.update(slot_mapping=a["slot_mapping"].float()), TypeError, "slot_mapping dtype"),
    (lambda a: a.update(key_cache=a["key_cache"][0]), ValueError, "4 dims"),
    (lambda a: a["slot_mapping"].__setitem__(0, 10_000), ValueError, r"\[-1, 64\)"),
])
def test_bad_input_raises_and_leaves_cache_unchanged(mutate, exc, match):
    kv_cache, key, value, slots = make_step(5, 2, 32, 16, 4)
    before = kv_cache.clone()
    args = dict(key=key, value=value, key_cache=kv_cache[0], value_cache=kv_cache[1],
                slot_mapping=slots.clone())
    mutate(args)
    with pytest.raises(exc, match=match):
        K.reshape_and_cache(**args, backend="torch")
    assert torch.equal(kv_cache, before)


def test_unknown_backend():
    kv_cache, key, value, slots = make_step(2, 1, 32, 16, 1)
    with pytest.raises(ValueError, match="unknown backend 'cuda'"):
        K.reshape_and_cache(key, value, kv_cache[0], kv_cache[1], slots, backend="cuda")


@needs_cuda
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("block_size", [16, 32])
def test_cuda_matches_reference(dtype, block_size):
    kv_cache, key, value, slots = make_step(300, 8, 128, block_size, 40, pad_every=7, dtype=dtype,
                                            device="cuda")
    expected = kv_cache.clone()
    K.reshape_and_cache(key, value, expected[0], expected[1], slots, backend="torch")
    K.reshape_and_cache(key, value, kv_cache[0], kv_cache[1], slots)  # auto -> Triton on CUDA
    assert torch.equal(kv_cache, expected)
