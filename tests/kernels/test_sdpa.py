"""The batched torch path (plan once, index_copy_ write, one SDPA call per part) vs the per-sequence
reference: paged_attention_batched == paged_attention_torch to 1e-5 (fp32), write_kv ==
reshape_and_cache_torch exactly, the plan's exact gathers, and its errors (nothing written).
"""

import pytest
import torch

import kvlab.kernels as K
from kvlab.kernels.batch import random_paged_batch

TOL = dict(atol=1e-5, rtol=1e-5)

# (seq_lens, query_lens): prefill (q == seq), chunked (1 < q < seq), decode (q == 1), none (q == 0)
LAYOUTS = {
    "decode, equal lengths": ([21, 21, 21], [1, 1, 1]),
    "decode, ragged": ([1, 17, 33, 8], [1, 1, 1, 1]),
    "prefill": ([7, 20], [7, 20]),
    "mixed, decode first": ([40, 23, 19, 9], [1, 1, 19, 5]),
    "mixed, interleaved": ([19, 40, 23, 9, 12], [19, 1, 5, 1, 12]),
    "with an empty query": ([11, 6, 30], [3, 0, 1]),
    "one long chunk": ([70], [25]),
}


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("heads", [(2, 2), (9, 3)])  # GQA group 1, 3
@pytest.mark.parametrize("sliding_window", [None, 1, 5, 16])
@pytest.mark.parametrize("block_size", [4, 16])
def test_batched_equals_per_sequence_reference(layout, heads, sliding_window, block_size):
    seq_lens, query_lens = LAYOUTS[layout]
    batch = random_paged_batch(seq_lens, query_lens, num_q_heads=heads[0], num_kv_heads=heads[1],
                               head_dim=16, block_size=block_size, seed=len(seq_lens))
    args = batch.attention_args()
    ref = K.paged_attention_torch(*args, scale=0.3, sliding_window=sliding_window)
    out = K.paged_attention_batched(*args, scale=0.3, sliding_window=sliding_window)
    assert out.shape == ref.shape and out.dtype == ref.dtype
    torch.testing.assert_close(out, ref, **TOL)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_half_caches_match_reference(dtype):
    batch = random_paged_batch([19, 40, 9], [19, 1, 4], num_q_heads=6, num_kv_heads=2,
                               head_dim=16, block_size=4, dtype=dtype)
    ref = K.paged_attention_torch(*batch.attention_args(), scale=0.25)
    out = K.paged_attention_batched(*batch.attention_args(), scale=0.25, out=torch.empty_like(ref))
    assert out.dtype == dtype
    torch.testing.assert_close(out.float(), ref.float(), atol=1e-2, rtol=1e-2)


def test_plan_gathers_exact_slots_and_masks():
    # seq 0: decode at position 5 (blocks 7, 2); seq 1: prefill of 3 (block 5). block_size 4.
    block_table = torch.tensor([[7, 2], [5, 0]], dtype=torch.int32)
    plan = K.plan_paged_attention(block_table, torch.tensor([6, 3]), torch.tensor([0, 1, 4]),
                                  block_size=4, num_blocks=8, num_queries_per_kv=1,
                                  slot_mapping=torch.tensor([9, 20, 21, 22]))
    decode, prefill = plan.parts
    assert decode.kv_slots.tolist() == [[28, 29, 30, 31, 8, 9]]
    assert decode.attn_mask is None                       # one decode sees all its keys
    assert decode.q_rows.tolist() == [0] and decode.out_rows.tolist() == [0]
    assert prefill.kv_slots.tolist() == [[20, 21, 22]]
    assert prefill.attn_mask[0, 0].tolist() == [[True, False, False], [True, True, False],
                                                [True, True, True]]
    assert prefill.q_rows.tolist() == [1, 2, 3] and prefill.out_rows.tolist() == [1, 2, 3]
    assert plan.write_slots.tolist() == [9, 20, 21, 22] and plan.write_rows is None


def test_plan_pads_queries_and_keys_and_skips_the_window_prefix():
    # decode part: ragged lengths 3 and 6 -> keys padded to 6 by repeating seq 0's last key.
    plan = K.plan_paged_attention(torch.tensor([[1, 0], [2, 3]]), torch.tensor([3, 6]),
                                  torch.tensor([0, 1, 2]), block_size=4, num_blocks=4,
                                  num_queries_per_kv=2)
    (decode,) = plan.parts
    assert decode.kv_slots.tolist() == [[4, 5, 6, 6, 6, 6], [8, 9, 10, 11, 12, 13]]
    assert decode.attn_mask.shape == (2, 1, 2, 6)  # G = 2 query rows per KV head
    assert decode.attn_mask[0, 0, 0].tolist() == [True] * 3 + [False] * 3
    assert decode.q_rows is None and decode.pad_rows is None and decode.out_rows is None
    assert plan.write_slots is None
    # window 3, chunk of 2 new tokens at positions 6, 7: keys from position 4 on are gathered.
    plan = K.plan_paged_attention(torch.tensor([[0, 3]]), torch.tensor([8]), torch.tensor([0, 2]),
                                  block_size=4, num_blocks=4, num_queries_per_kv=1,
                                  sliding_window=3)
    (chunk,) = plan.parts
    assert chunk.kv_slots.tolist() == [[12, 13, 14, 15]]  # block 0 (null) never read
    assert chunk.attn_mask[0, 0].tolist() == [[True, True, True, False],
                                              [False, True, True, True]]


def test_write_kv_equals_reshape_and_cache_with_padding():
    gen = torch.Generator().manual_seed(0)
    key, value = torch.randn(5, 2, 8, generator=gen), torch.randn(5, 2, 8, generator=gen)
    slots = torch.tensor([3, -1, 17, 0, -1])
    caches = [torch.randn(2, 6, 4, 2, 8, generator=gen) for _ in range(2)]
    caches[1].copy_(caches[0])
    K.reshape_and_cache_torch(key, value, caches[0][0], caches[0][1], slots)
    plan = K.plan_paged_attention(torch.zeros(1, 2, dtype=torch.int32), torch.tensor([5]),
                                  torch.tensor([0, 5]), block_size=4, num_blocks=6,
                                  num_queries_per_kv=1, slot_mapping=slots)
    assert plan.write_slots.tolist() == [3, 17, 0] and plan.write_rows.tolist() == [0, 2, 3]
    K.write_kv(plan, key, value, caches[1][0], caches[1][1])
    assert torch.equal(caches[0], caches[1])


@pytest.mark.parametrize("change, message", [
    (dict(block_table=torch.tensor([[1, 9]])), r"block_table entries in use must lie in \[0, 4\)"),
    (dict(slot_mapping=torch.tensor([0, 16])), r"slot_mapping values must lie in \[-1, 16\)"),
    (dict(slot_mapping=torch.tensor([0])), r"slot_mapping must be \[num_tokens=2\]"),
    (dict(seq_lens=torch.tensor([1])), "seq_len >= query len"),
    (dict(seq_lens=torch.tensor([9])), "exceed the block_table capacity"),
    (dict(sliding_window=0), "sliding_window must be None or a positive int"),
    (dict(num_blocks=0), "must be positive ints"),
])
def test_plan_rejects_bad_layouts(change, message):
    args = dict(block_table=torch.tensor([[1, 2]]), seq_lens=torch.tensor([6]),
                query_start_loc=torch.tensor([0, 2]), block_size=4, num_blocks=4,
                num_queries_per_kv=1, slot_mapping=torch.tensor([4, 9]))
    args.update(change)
    block_table, seq_lens, qsl = (args.pop(k) for k in ("block_table", "seq_lens",
                                                         "query_start_loc"))
    with pytest.raises(ValueError, match=message):
        K.plan_paged_attention(block_table, seq_lens, qsl, **args)


def test_write_and_attention_reject_mismatches_and_write_nothing():
    batch = random_paged_batch([6, 3], [1, 3], num_q_heads=2, num_kv_heads=2, head_dim=8,
                               block_size=4)
    plan = K.plan_paged_attention(batch.block_table, batch.seq_lens, batch.query_start_loc,
                                  block_size=4, num_blocks=batch.key_cache.shape[0],
                                  num_queries_per_kv=1)
    key = torch.zeros(4, 2, 8)
    before = batch.key_cache.clone()
    with pytest.raises(ValueError, match="without a slot_mapping"):
        K.write_kv(plan, key, key, batch.key_cache, batch.value_cache)
    with pytest.raises(ValueError, match="q has 3 tokens, the plan 4"):
        K.paged_attention_sdpa(batch.q[:3], batch.key_cache, batch.value_cache, plan, scale=1.0)
    plan = K.plan_paged_attention(batch.block_table, batch.seq_lens, batch.query_start_loc,
                                  block_size=4, num_blocks=batch.key_cache.shape[0],
                                  num_queries_per_kv=1, slot_mapping=torch.tensor([1, 2, 3, 4]))
    strided = batch.key_cache.transpose(0, 1)
    with pytest.raises(ValueError, match="contiguous"):
        K.write_kv(plan, key, key, strided, strided)
    assert torch.equal(batch.key_cache, before)
    with pytest.raises(TypeError, match="q dtype"):  # the checked wrapper runs the usual checks
        K.paged_attention_batched(batch.q.half(), *batch.attention_args()[1:], scale=1.0)
