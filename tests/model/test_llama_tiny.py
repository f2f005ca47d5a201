"""Tiny random-weight models: paged forward vs the dense reference (hybrid sliding window, biases,
Triton interpreter). Fast: 2-4 layers of width 64.
"""

from __future__ import annotations

import pytest
import torch

from kvlab.model import Model, build_attention_metadata, default_kv_cache_group_ids
from kvlab.model.reference import dense_forward, random_weights, tiny_config

WINDOW, BLOCK_SIZE = 6, 4


def hybrid_block_tables(full_blocks, window_blocks, num_computed, window):
    """Per-group block ids as vLLM's managers would hold them before a step starting at
    ``num_computed``: the sliding-window group's blocks that lie wholly before the window of the
    first new token are the null block (block 0)."""
    first_needed = max(num_computed - window + 1, 0)  # oldest position the step still reads
    window_ids = [0 if (j + 1) * BLOCK_SIZE - 1 < first_needed else b
                  for j, b in enumerate(window_blocks)]
    return [full_blocks], [window_ids]


def run_hybrid(model, ids, chunks, full_blocks, window_blocks, garbage_null_block=True):
    kv_caches = model.allocate_kv_caches(num_blocks=24, block_size=BLOCK_SIZE)
    if garbage_null_block:  # the null block holds junk: reading it would change the result
        for t in kv_caches:
            t[:, 0] = 7.0 * torch.randn_like(t[:, 0])
    logits, done = [], 0
    for n in chunks:
        group0, group1 = hybrid_block_tables(full_blocks, window_blocks, done, WINDOW)
        positions, md = build_attention_metadata(group0, [done], [n], BLOCK_SIZE,
                                                 group_block_ids=[group0, group1])
        logits.append(model.forward(torch.tensor(ids[done:done + n]), positions, md, kv_caches,
                                    return_all_logits=True))
        done += n
    return torch.cat(logits)  # (T, V)


def test_gemma3_like_hybrid_matches_dense_reference_with_window():
    config = tiny_config(num_layers=4, sliding_window=(WINDOW, None, WINDOW, None))
    weights = random_weights(config, seed=1)
    model = Model(config, weights, attention_backend="torch")
    assert model.kv_cache_group_ids == [1, 0, 1, 0]
    assert model.kv_cache_groups() == [(None, [1, 3]), (WINDOW, [0, 2])]
    ids = torch.randint(3, config.vocab_size, (21,), generator=torch.Generator().manual_seed(0))
    full_blocks, window_blocks = [9, 4, 17, 2, 12, 20], [5, 22, 8, 14, 1, 11]
    chunks = [9, 5, 1, 1, 5]  # prefill, chunked prefill, decodes, a late chunk
    paged = run_hybrid(model, ids.tolist(), chunks, full_blocks, window_blocks)
    dense = dense_forward(config, weights, ids)
    assert (paged - dense).abs().max() <= 1e-4
    # the window matters: without it the reference differs beyond the first WINDOW positions
    no_window = dense_forward(tiny_config(num_layers=4), weights, ids)
    assert (no_window[:WINDOW] - dense[:WINDOW]).abs().max() <= 1e-4
    assert (no_window[WINDOW:] - dense[WINDOW:]).abs().max() > 1e-2


def test_hybrid_null_blocks_are_never_read():
    """Same hybrid run with a zero vs a junk null block gives identical logits."""
    config = tiny_config(num_layers=2, sliding_window=(WINDOW, None))
    model = Model(config, random_weights(config, seed=2), attention_backend="torch")
    ids = list(range(5, 23))
    args = (ids, [8, 8, 1, 1], [3, 6, 9, 12, 15], [4, 7, 10, 13, 16])
    zero = run_hybrid(model, *args, garbage_null_block=False)
    junk = run_hybrid(model, *args, garbage_null_block=True)
    assert torch.equal(zero, junk)


@pytest.mark.parametrize("architecture,tied", [("qwen2", True), ("llama", False)])
def test_biases_and_untied_head_match_dense_reference(architecture, tied):
    config = tiny_config(architecture=architecture, attention_bias=architecture == "qwen2",
                         tie_word_embeddings=tied, num_kv_heads=1)
    weights = random_weights(config, seed=3)
    assert ("model.layers.0.self_attn.q_proj.bias" in weights) == (architecture == "qwen2")
    assert ("lm_head.weight" in weights) == (not tied)
    model = Model(config, weights)
    ids = [5, 9, 2, 77, 31, 8, 8, 100, 3, 64]
    kv_caches = model.allocate_kv_caches(num_blocks=8, block_size=4)
    positions, md = build_attention_metadata([[6, 2, 5]], [0], [len(ids)], 4)
    paged = model.forward(torch.tensor(ids), positions, md, kv_caches, return_all_logits=True)
    assert (paged - dense_forward(config, weights, torch.tensor(ids))).abs().max() <= 1e-4


def test_triton_interpreter_backend_matches_torch_backend():
    pytest.importorskip("triton")
    from kvlab.kernels import triton_available

    if not triton_available("cpu"):
        pytest.skip("Triton kernels cannot run on CPU tensors in this process")
    config = tiny_config(num_layers=1, sliding_window=None)
    weights = random_weights(config, seed=4)
    ids = [3, 14, 15, 92, 65, 35, 89, 79, 32]
    out = {}
    for backend in ("torch", "triton"):
        model = Model(config, weights, attention_backend=backend)
        kv_caches = model.allocate_kv_caches(num_blocks=8, block_size=4)
        logits = []
        for done, n in ((0, 7), (7, 1), (8, 1)):  # prefill then two decodes
            positions, md = build_attention_metadata([[5, 1, 6]], [done], [n], 4)
            logits.append(model.forward(torch.tensor(ids[done:done + n]), positions, md,
                                        kv_caches, return_all_logits=True))
        out[backend] = (torch.cat(logits), kv_caches[0])
    assert (out["torch"][0] - out["triton"][0]).abs().max() <= 1e-4
    assert torch.allclose(out["torch"][1], out["triton"][1], atol=1e-6)


@pytest.mark.parametrize("dtype,atol", [(torch.float16, 0.02), (torch.bfloat16, 0.1)])
def test_half_precision_stays_close_to_float32_reference(dtype, atol):
    config = tiny_config(sliding_window=(4, None))
    weights = random_weights(config, seed=6)
    model = Model(config, {k: v.to(dtype) for k, v in weights.items()})
    kv_caches = model.allocate_kv_caches(num_blocks=8, block_size=4)
    assert kv_caches[0].dtype == dtype
    ids = torch.arange(3, 13)
    positions, md = build_attention_metadata([[3, 1, 5]], [0], [10], 4)
    logits = model.forward(ids, positions, md, kv_caches, return_all_logits=True)
    assert logits.dtype == torch.float32
    assert (logits - dense_forward(config, weights, ids)).abs().max() <= atol


def test_default_kv_cache_group_ids():
    assert default_kv_cache_group_ids(tiny_config(num_layers=3)) == [0, 0, 0]
    hybrid = tiny_config(num_layers=4, sliding_window=(8, None, 4, 8))
    assert default_kv_cache_group_ids(hybrid) == [2, 0, 1, 2]


def test_model_rejects_bad_weights_and_arguments():
    config = tiny_config()
    weights = random_weights(config)
    with pytest.raises(ValueError, match="attention_backend"):
        Model(config, weights, attention_backend="cuda")
    with pytest.raises(KeyError, match="missing"):
        Model(config, {k: v for k, v in weights.items() if "k_proj" not in k})
    bad = dict(weights, **{"model.norm.weight": torch.ones(3)})
    with pytest.raises(ValueError, match=r"model\.norm\.weight"):
        Model(config, bad)
    with pytest.raises(ValueError, match="kv_cache_group_ids"):
        Model(config, weights, kv_cache_group_ids=[0])
    with pytest.raises(ValueError, match=r"numbered 0\.\.G-1"):
        Model(config, weights, kv_cache_group_ids=[0, 2])
    hybrid = tiny_config(sliding_window=(4, None))
    with pytest.raises(ValueError, match="mixes sliding windows"):
        Model(hybrid, random_weights(hybrid), kv_cache_group_ids=[0, 0])
    assert Model(hybrid, random_weights(hybrid), kv_cache_group_ids=[0, 1]).kv_cache_groups() == \
        [(4, [0]), (None, [1])]
    with pytest.raises(ValueError, match="positive"):
        Model(config, weights).allocate_kv_caches(num_blocks=0, block_size=4)


def test_allocate_kv_caches_layout():
    config = tiny_config(num_layers=3)
    caches = Model(config, random_weights(config)).allocate_kv_caches(5, 4, dtype=torch.float16)
    assert len(caches) == 3
    assert all(t.shape == (2, 5, 4, 2, 16) and t.dtype == torch.float16 for t in caches)
    assert caches[0].data_ptr() != caches[1].data_ptr()


def hybrid_step(ids_by_seq, done, new, full_blocks, window_blocks):
    """Inputs of one packed step over several sequences of a hybrid model (WINDOW, BLOCK_SIZE)."""
    group0, group1 = [], []
    for full, window, num_computed in zip(full_blocks, window_blocks, done):
        (g0,), (g1,) = hybrid_block_tables(full, window, num_computed, WINDOW)
        group0.append(g0)
        group1.append(g1)
    positions, md = build_attention_metadata(group0, done, new, BLOCK_SIZE,
                                             group_block_ids=[group0, group1])
    ids = [t for seq, c, n in zip(ids_by_seq, done, new) for t in seq[c:c + n]]
    return torch.tensor(ids), positions, md


def test_batched_attention_equals_per_sequence_reference_on_mixed_hybrid_batches(monkeypatch):
    """The batched torch path (one plan per step, SDPA per layer) vs the per-sequence reference
    loop (paged_attention_torch per layer): same logits to 1e-5 and same caches, step by step,
    for batches mixing prefill, chunked prefill and decode, with a sliding-window group."""
    config = tiny_config(num_layers=4, sliding_window=(WINDOW, None, WINDOW, None))
    weights = random_weights(config, seed=7)
    batched = Model(config, weights, attention_backend="torch")
    looped = Model(config, weights, attention_backend="torch")
    monkeypatch.setattr(looped, "_uses_torch_attention", lambda: False)
    assert batched._uses_torch_attention()
    gen = torch.Generator().manual_seed(3)
    seqs = [torch.randint(3, config.vocab_size, (n,), generator=gen).tolist() for n in (16, 13, 12)]
    full_blocks = [[9, 4, 17, 2], [12, 20, 6, 1], [3, 14, 22, 8]]
    window_blocks = [[5, 23, 8, 15], [11, 19, 7, 13], [10, 18, 16, 21]]
    steps = [((0, 0, 0), (9, 5, 0)),   # two prefills (seq 2 not yet scheduled)
             ((9, 5, 0), (1, 4, 7)),   # decode, chunk, prefill
             ((10, 9, 7), (1, 1, 1)),  # all decode
             ((11, 10, 8), (5, 1, 4))]  # chunk past the window, decode, chunk
    caches = {m: m.allocate_kv_caches(num_blocks=24, block_size=BLOCK_SIZE)
              for m in (batched, looped)}
    for done, new in steps:
        keep = [i for i, n in enumerate(new) if n]
        inputs = hybrid_step([seqs[i] for i in keep], [done[i] for i in keep],
                             [new[i] for i in keep], [full_blocks[i] for i in keep],
                             [window_blocks[i] for i in keep])
        out = {m: m.forward(*inputs, caches[m], return_all_logits=True) for m in caches}
        assert out[batched].shape == (sum(new), config.vocab_size)
        assert (out[batched] - out[looped]).abs().max() <= 1e-5
        assert torch.equal(caches[batched][0], caches[looped][0])  # same writes, layer 0
        for a, b in zip(caches[batched], caches[looped]):
            assert (a - b).abs().max() <= 1e-5


def test_fused_layer_weights_are_the_named_weights_without_copies():
    config = tiny_config(architecture="qwen2", attention_bias=True)
    weights = random_weights(config, seed=8)
    model = Model(config, weights)
    lw, p = model.layers[1], "model.layers.1."
    names = [p + f"self_attn.{x}_proj.weight" for x in "qkv"]
    assert torch.equal(lw.qkv_proj, torch.cat([weights[n] for n in names]))
    assert torch.equal(lw.qkv_bias, torch.cat([weights[p + f"self_attn.{x}_proj.bias"]
                                               for x in "qkv"]))
    assert torch.equal(lw.gate_up_proj, torch.cat([weights[p + "mlp.gate_proj.weight"],
                                                   weights[p + "mlp.up_proj.weight"]]))
    # the model's named weights are views of the fused tensors; the caller's dict is untouched
    assert model.weights[names[1]].data_ptr() == lw.qkv_proj[config.num_q_heads * 16].data_ptr()
    assert weights[names[0]]._base is None
    # a second Model over the first one's weights shares the fused tensors (no copy)
    again = Model(config, model.weights)
    assert again.layers[1].qkv_proj is lw.qkv_proj
    assert again.layers[1].gate_up_proj is lw.gate_up_proj
