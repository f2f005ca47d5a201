"""build_attention_metadata / AttentionMetadata: exact slots, tables, lengths of mixed batches."""

from __future__ import annotations

import pytest
import torch

from kvlab.model import AttentionMetadata, build_attention_metadata


def test_mixed_batch_layout():
    # seq 0: prefill of 5 tokens into blocks [7, 2]; seq 1: decode at position 3 of block 5;
    # seq 2: 2nd chunk (positions 4..9) of a prompt in blocks [1, 9, 3]
    positions, md = build_attention_metadata([[7, 2], [5], [1, 9, 3]], [0, 3, 4], [5, 1, 6],
                                             block_size=4)
    assert positions.tolist() == [0, 1, 2, 3, 4, 3, 4, 5, 6, 7, 8, 9]
    assert md.slot_mapping.tolist() == [28, 29, 30, 31, 8, 23, 36, 37, 38, 39, 12, 13]
    assert md.block_table.tolist() == [[7, 2, 0], [5, 0, 0], [1, 9, 3]]
    assert md.seq_lens.tolist() == [5, 4, 10]
    assert md.query_start_loc.tolist() == [0, 5, 6, 12]
    assert (md.max_query_len, md.max_seq_len, md.num_seqs, md.num_tokens) == (6, 10, 3, 12)
    assert md.slot_mapping.dtype == torch.int64 and md.block_table.dtype == torch.int32
    assert md.seq_lens.dtype == torch.int32 and md.query_start_loc.dtype == torch.int32
    assert md.tables_for_group(0) == (md.slot_mapping, md.block_table)
    assert md.num_kv_cache_groups is None


def test_per_group_tables():
    full, window = [[4, 6]], [[0, 8]]  # the window group's 1st block already became the null block
    _, md = build_attention_metadata(full, [5], [2], 4, group_block_ids=[full, window])
    assert md.num_kv_cache_groups == 2
    slots0, table0 = md.tables_for_group(0)
    slots1, table1 = md.tables_for_group(1)
    assert (slots0.tolist(), table0.tolist()) == ([25, 26], [[4, 6]])
    assert (slots1.tolist(), table1.tolist()) == ([33, 34], [[0, 8]])
    with pytest.raises(KeyError, match="kv_cache_group_id 2"):
        md.tables_for_group(2)
    with pytest.raises(ValueError, match="must equal group 0"):
        build_attention_metadata(window, [5], [2], 4, group_block_ids=[full, window])
    with pytest.raises(ValueError, match="1 block lists per group"):
        build_attention_metadata(full, [5], [2], 4, group_block_ids=[full, []])


@pytest.mark.parametrize("args,match", [
    (([[1]], [0], [5], 4), "needs 2 blocks"),
    (([[1], [2]], [0], [1], 4), "one entry per sequence"),
    (([], [], [], 4), "at least one sequence"),
    (([[1]], [0], [0], 4), "num_new_tokens must be >= 1"),
    (([[1]], [-1], [1], 4), ">= 0"),
])
def test_bad_batches_are_rejected(args, match):
    with pytest.raises(ValueError, match=match):
        build_attention_metadata(*args)


def test_metadata_checks_shapes():
    ok = {"slot_mapping": torch.zeros(2, dtype=torch.int64),
              "block_table": torch.zeros(1, 1, dtype=torch.int32),
              "seq_lens": torch.tensor([2], dtype=torch.int32),
              "query_start_loc": torch.tensor([0, 2], dtype=torch.int32), "max_query_len": 2,
              "max_seq_len": 2}
    AttentionMetadata(**ok)
    with pytest.raises(ValueError, match="query_start_loc"):
        AttentionMetadata(**dict(ok, query_start_loc=torch.tensor([0, 1, 2], dtype=torch.int32)))
    with pytest.raises(ValueError, match="block_table"):
        AttentionMetadata(**dict(ok, block_table=torch.zeros(2, 1, dtype=torch.int32)))
    with pytest.raises(ValueError, match="both"):
        AttentionMetadata(**ok, group_block_tables=(ok["block_table"],))
