"""SmolLM2-135M on the paged KV cache vs transformers: prefill, chunks, decode, greedy, batching.

Every comparison runs through the paged cache with hand-made block tables whose block ids are
non-contiguous and shuffled, so a forward that ignored the block table could not pass.
"""

from __future__ import annotations

import pytest
import torch

from kvlab.model import build_attention_metadata

pytestmark = [pytest.mark.slow, pytest.mark.model]

ATOL = 1e-3  # max |logit difference| vs transformers, float32


def run_chunks(model, ids, chunk_lens, block_ids, block_size, kv_caches):
    """Feed ``ids`` through the cache chunk by chunk; logits of every position, [T, V]."""
    logits, done = [], 0
    for n in chunk_lens:
        positions, md = build_attention_metadata([block_ids], [done], [n], block_size)
        logits.append(model.forward(torch.tensor(ids[done:done + n]), positions, md, kv_caches,
                                    return_all_logits=True))
        done += n
    assert done == len(ids)
    return torch.cat(logits)  # (T, V)


def greedy(model, ids, num_tokens, block_ids, block_size):
    kv_caches = model.allocate_kv_caches(num_blocks=24, block_size=block_size)
    positions, md = build_attention_metadata([block_ids], [0], [len(ids)], block_size)
    logits = model.forward(torch.tensor(ids), positions, md, kv_caches)  # (1, V)
    out, num_computed = [], len(ids)
    for _ in range(num_tokens):
        out.append(int(logits[0].argmax()))
        positions, md = build_attention_metadata([block_ids], [num_computed], [1], block_size)
        logits = model.forward(torch.tensor(out[-1:]), positions, md, kv_caches)
        num_computed += 1
    return out


def test_config_is_smollm2_135m(smollm):
    c = smollm.config
    assert (c.architecture, c.num_layers, c.hidden_size, c.num_q_heads, c.num_kv_heads) == \
        ("llama", 30, 576, 9, 3)
    assert (c.head_dim, c.intermediate_size, c.vocab_size, c.max_position_embeddings) == \
        (64, 1536, 49152, 8192)
    assert c.rope_theta == 100000.0 and c.tie_word_embeddings and "lm_head.weight" not in \
        smollm.weights
    assert (c.bos_token_id, c.eos_token_ids) == (1, (2,))


def test_full_prefill_matches_transformers(smollm, hf_reference):
    ids = hf_reference["long_ids"]
    block_size = 16
    block_ids = [11, 3, 7, 14, 5][: -(-len(ids) // block_size)]
    kv_caches = smollm.allocate_kv_caches(num_blocks=16, block_size=block_size)
    logits = run_chunks(smollm, ids, [len(ids)], block_ids, block_size, kv_caches)
    assert logits.shape == hf_reference["long_logits"].shape
    assert (logits - hf_reference["long_logits"]).abs().max() <= ATOL
    # the keys landed exactly in the named blocks, nowhere else
    written = kv_caches[0][0].abs().sum(dim=(1, 2, 3)).nonzero().flatten().tolist()
    assert sorted(written) == sorted(block_ids)


def test_chunked_prefill_matches_transformers(smollm, hf_reference):
    ids, block_size = hf_reference["long_ids"], 8
    num_blocks_needed = -(-len(ids) // block_size)
    block_ids = torch.randperm(40, generator=torch.Generator().manual_seed(3))[:num_blocks_needed]
    kv_caches = smollm.allocate_kv_caches(num_blocks=40, block_size=block_size)
    chunks = [7, 13, len(ids) - 20]  # boundaries fall inside blocks
    logits = run_chunks(smollm, ids, chunks, block_ids.tolist(), block_size, kv_caches)
    assert (logits - hf_reference["long_logits"]).abs().max() <= ATOL


def test_decode_steps_match_transformers(smollm, hf_reference):
    ids, block_size = hf_reference["long_ids"], 16
    block_ids = [2, 9, 4, 12][: -(-len(ids) // block_size)]
    kv_caches = smollm.allocate_kv_caches(num_blocks=16, block_size=block_size)
    num_decode = 3
    logits = run_chunks(smollm, ids, [len(ids) - num_decode] + [1] * num_decode, block_ids,
                        block_size, kv_caches)
    ref = hf_reference["long_logits"]
    assert (logits[-num_decode:] - ref[-num_decode:]).abs().max() <= ATOL


def test_greedy_tokens_match_transformers(smollm, hf_reference):
    for ids, expected in hf_reference["greedy"]:
        assert greedy(smollm, ids, len(expected), [6, 1, 19], block_size=16) == expected
    _paris_ids, paris = hf_reference["greedy"][0]
    assert smollm.tokenizer.decode(paris).startswith(" Paris.")


def test_mixed_batch_equals_each_sequence_alone(smollm):
    tok, block_size = smollm.tokenizer, 4
    a = tok.encode("Blocks of four tokens each.")
    b = tok.encode("The capital of France is")
    c = tok.encode("One two three four five six")
    blocks = {"a": [17, 2, 9, 30, 5, 21], "b": [8, 26, 13], "c": [3, 28, 11, 19]}
    kv_caches = smollm.allocate_kv_caches(num_blocks=32, block_size=block_size)
    for name, ids in (("b", b), ("c", c)):  # earlier steps: b and c already prefilled
        run_chunks(smollm, ids, [len(ids)], blocks[name], block_size, kv_caches)
    before = [t.clone() for t in kv_caches]
    next_b, next_c = 1234, 567
    positions, md = build_attention_metadata([blocks["a"], blocks["b"], blocks["c"]],
                                             [0, len(b), len(c)], [len(a), 1, 1], block_size)
    batched = smollm.forward(torch.tensor([*a, next_b, next_c]), positions, md, kv_caches)

    alone = []
    for name, ids, done in (("a", a, 0), ("b", [next_b], len(b)), ("c", [next_c], len(c))):
        caches = [t.clone() for t in before]
        positions, md = build_attention_metadata([blocks[name]], [done], [len(ids)], block_size)
        alone.append(smollm.forward(torch.tensor(ids), positions, md, caches)[0])
    assert batched.shape == (3, smollm.config.vocab_size)
    assert (batched - torch.stack(alone)).abs().max() <= 1e-4


def test_forward_rejects_bad_inputs_and_writes_nothing(smollm):
    kv_caches = smollm.allocate_kv_caches(num_blocks=4, block_size=16)
    positions, md = build_attention_metadata([[1]], [0], [3], 16)
    with pytest.raises(ValueError, match="one tensor per layer"):
        smollm.forward(torch.tensor([1, 2, 3]), positions, md, kv_caches[:-1])
    with pytest.raises(ValueError, match="same length"):
        smollm.forward(torch.tensor([1, 2]), positions[:2], md, kv_caches)
    with pytest.raises(TypeError, match="1-D int tensor"):
        smollm.forward(torch.tensor([1.0, 2.0, 3.0]), positions, md, kv_caches)
    assert all(int(t.count_nonzero()) == 0 for t in kv_caches)


def test_batched_attention_equals_per_sequence_reference(smollm, monkeypatch):
    """SmolLM2's batched torch attention (a plan per step, SDPA per layer) vs the per-sequence
    reference loop: a prefill, a chunk and two decodes in one step give the same logits (5e-5)."""
    tok, block_size = smollm.tokenizer, 4
    prompts = [tok.encode("Blocks of four tokens each."), tok.encode("The capital of France is"),
               tok.encode("One two three four five six"), tok.encode("Water boils at")]
    blocks = [[17, 2, 9, 30, 5, 21], [8, 26, 13], [3, 28, 11, 19], [6, 14, 23]]
    done = [0, len(prompts[1]) - 1, 2, len(prompts[3]) - 1]
    new = [len(prompts[0]), 1, len(prompts[2]) - 2, 1]
    ids = torch.tensor([t for p, c, n in zip(prompts, done, new) for t in p[c:c + n]])
    logits = {}
    for path in ("batched", "looped"):
        if path == "looped":
            monkeypatch.setattr(smollm, "_uses_torch_attention", lambda: False)
        kv_caches = smollm.allocate_kv_caches(num_blocks=32, block_size=block_size)
        for i in (1, 2, 3):  # the earlier steps: each sequence's first done tokens
            run_chunks(smollm, prompts[i][:done[i]], [done[i]], blocks[i], block_size, kv_caches)
        positions, md = build_attention_metadata(blocks, done, new, block_size)
        logits[path] = smollm.forward(ids, positions, md, kv_caches, return_all_logits=True)
    assert logits["batched"].shape == (len(ids), smollm.config.vocab_size)
    # float32 rounding through 30 layers, logits up to ~20: 3.3e-5 seen (a few ulp of 20)
    assert (logits["batched"] - logits["looped"]).abs().max() <= 5e-5
    assert torch.equal(logits["batched"].argmax(-1), logits["looped"].argmax(-1))
