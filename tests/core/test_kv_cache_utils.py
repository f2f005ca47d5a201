"""KVCacheBlock, FreeKVCacheBlockQueue, hash keys, extra keys, request block hashing.

Scenarios follow vLLM 0.22.1's tests/v1/core/test_kv_cache_utils.py (rewritten); expected
values are derived from the hash definition (hash_fn((parent, tokens, extra_keys))).
"""

from __future__ import annotations

import hashlib

import pytest

from kvlab.core import kv_cache_utils as bh
from kvlab.core import kv_cache_utils
from kvlab.core.kv_cache_utils import (
    BlockHash,
    BlockHashListWithBlockSize,
    FreeKVCacheBlockQueue,
    KVCacheBlock,
    generate_block_hash_extra_keys,
    get_block_hash,
    get_group_id,
    get_request_block_hasher,
    hash_block_tokens,
    init_none_hash,
    make_block_hash_with_group_id,
    maybe_convert_block_hash,
    need_extra_keys,
    sha256,
    sha256_cbor,
)
from kvlab.core.request import (
    LoRARequest,
    MultiModalFeatureSpec,
    PlaceholderRange,
    Request,
    SamplingParams,
)


@pytest.fixture(autouse=True)
def _keep_none_hash():
    """Tests may re-seed NONE_HASH; put the previous value back afterwards."""
    had = hasattr(bh, "NONE_HASH")
    old = getattr(bh, "NONE_HASH", None)
    if not had:
        init_none_hash(sha256)
    yield
    if had:
        bh.NONE_HASH = old


def make_request(tokens, block_size=4, hash_fn=sha256, mm=None, **kwargs) -> Request:
    mm_features = [
        MultiModalFeatureSpec(identifier=ident, mm_position=PlaceholderRange(off, length))
        for ident, off, length in (mm or [])
    ]
    return Request(
        "r",
        list(tokens),
        SamplingParams(max_tokens=8),
        None,
        mm_features=mm_features,
        block_hasher=get_request_block_hasher(block_size, hash_fn),
        **kwargs,
    )


def queue_ids(queue: FreeKVCacheBlockQueue) -> list[int]:
    return [b.block_id for b in queue.get_all_free_blocks()]


# --- KVCacheBlock ----------------------------------------------------------------------


def test_kv_cache_block_hash_set_once_and_reset():
    block = KVCacheBlock(block_id=3)
    assert (block.ref_cnt, block.block_hash, block.is_null) == (0, None, False)
    key = make_block_hash_with_group_id(BlockHash(b"abc"), 0)
    block.block_hash = key
    assert block.block_hash == key
    with pytest.raises(ValueError, match="already has a block_hash"):
        block.block_hash = make_block_hash_with_group_id(BlockHash(b"xyz"), 0)
    assert block.block_hash == key  # unchanged by the refused assignment
    block.reset_hash()
    assert block.block_hash is None


def test_kv_cache_block_uses_slots_and_repr_uses_ids():
    a, b = KVCacheBlock(0), KVCacheBlock(1)
    assert not hasattr(a, "__dict__")
    with pytest.raises(AttributeError):
        a.unexpected_field = True
    FreeKVCacheBlockQueue([a, b])
    assert "next_free_block=1" in repr(a) and "prev_free_block=-1" in repr(a)


# --- FreeKVCacheBlockQueue -------------------------------------------------------------


def test_free_queue_initial_links():
    blocks = [KVCacheBlock(i) for i in range(3)]
    q = FreeKVCacheBlockQueue(blocks)
    assert q.num_free_blocks == 3
    assert q.fake_free_list_head.next_free_block is blocks[0]
    assert blocks[0].prev_free_block is q.fake_free_list_head
    assert blocks[2].next_free_block is q.fake_free_list_tail
    assert q.fake_free_list_tail.prev_free_block is blocks[2]
    empty = FreeKVCacheBlockQueue([])
    assert empty.fake_free_list_head.next_free_block is empty.fake_free_list_tail
    assert empty.get_all_free_blocks() == []


def test_free_queue_popleft_remove_append_order():
    blocks = [KVCacheBlock(i) for i in range(5)]
    q = FreeKVCacheBlockQueue(blocks)
    assert q.popleft() is blocks[0]
    assert (blocks[0].prev_free_block, blocks[0].next_free_block) == (None, None)
    q.remove(blocks[2])
    assert blocks[1].next_free_block is blocks[3] and blocks[3].prev_free_block is blocks[1]
    assert queue_ids(q) == [1, 3, 4]
    q.append(blocks[2])
    assert queue_ids(q) == [1, 3, 4, 2] and q.num_free_blocks == 4
    assert blocks[2].next_free_block is q.fake_free_list_tail
    assert [q.popleft().block_id for _ in range(4)] == [1, 3, 4, 2]
    assert q.fake_free_list_head.next_free_block is q.fake_free_list_tail
    with pytest.raises(ValueError, match="^No free blocks available$"):
        q.popleft()
    assert q.num_free_blocks == 0


def test_free_queue_remove_unlinked_block_raises_and_changes_nothing():
    blocks = [KVCacheBlock(i) for i in range(3)]
    q = FreeKVCacheBlockQueue(blocks)
    outsider = q.popleft()
    with pytest.raises(RuntimeError, match="invalid block"):
        q.remove(outsider)
    assert queue_ids(q) == [1, 2] and q.num_free_blocks == 2


def test_free_queue_append_n_keeps_given_order():
    q = FreeKVCacheBlockQueue([])
    blocks = [KVCacheBlock(i) for i in range(6)]
    q.append_n([])
    assert q.num_free_blocks == 0
    q.append_n(blocks[0:1])
    q.append_n(blocks[4:6])
    q.append_n(blocks[1:4])
    assert queue_ids(q) == [0, 4, 5, 1, 2, 3] and q.num_free_blocks == 6
    # links are consistent in both directions
    back, node = [], q.fake_free_list_tail.prev_free_block
    while node is not q.fake_free_list_head:
        back.append(node.block_id)
        node = node.prev_free_block
    assert back == [3, 2, 1, 5, 4, 0]


def test_free_queue_append_n_on_corrupted_tail_asserts_like_vllm():
    q = FreeKVCacheBlockQueue([])
    q.fake_free_list_tail.prev_free_block = None
    with pytest.raises(AssertionError):
        q.append_n([KVCacheBlock(0)])
    assert q.num_free_blocks == 0


def test_free_queue_popleft_n_orders_and_unlinks():
    blocks = [KVCacheBlock(i) for i in range(6)]
    q = FreeKVCacheBlockQueue([blocks[i] for i in (1, 3, 5, 4, 0, 2)])
    assert q.popleft_n(0) == [] and q.num_free_blocks == 6
    assert [b.block_id for b in q.popleft_n(1)] == [1]
    popped = q.popleft_n(2)
    assert [b.block_id for b in popped] == [3, 5]
    assert all(b.prev_free_block is None and b.next_free_block is None for b in popped)
    assert queue_ids(q) == [4, 0, 2] and q.num_free_blocks == 3
    assert [b.block_id for b in q.popleft_n(3)] == [4, 0, 2]
    assert q.fake_free_list_head.next_free_block is q.fake_free_list_tail
    assert q.fake_free_list_tail.prev_free_block is q.fake_free_list_head


@pytest.mark.parametrize("n", [-1, 4])
def test_free_queue_popleft_n_bad_count_raises_and_changes_nothing(n):
    q = FreeKVCacheBlockQueue([KVCacheBlock(i) for i in range(3)])
    with pytest.raises(ValueError, match=rf"popleft_n\({n}\).*num_free_blocks=3"):
        q.popleft_n(n)
    assert queue_ids(q) == [0, 1, 2] and q.num_free_blocks == 3


# --- hash keys -------------------------------------------------------------------------


def test_block_hash_with_group_id_round_trip():
    key = make_block_hash_with_group_id(BlockHash(b"\x01\x02"), 258)
    assert key == b"\x01\x02\x00\x00\x01\x02"
    assert get_block_hash(key) == b"\x01\x02" and get_group_id(key) == 258
    with pytest.raises(OverflowError):
        make_block_hash_with_group_id(BlockHash(b"x"), -1)


def test_maybe_convert_block_hash_low_64_bits(monkeypatch):
    h = BlockHash(bytes(range(32)))
    monkeypatch.setattr(bh, "KV_EVENTS_USE_INT_BLOCK_HASHES", True)
    assert maybe_convert_block_hash(h) == int.from_bytes(bytes(range(24, 32)), "big")
    monkeypatch.setattr(bh, "KV_EVENTS_USE_INT_BLOCK_HASHES", False)
    assert maybe_convert_block_hash(h) is h


@pytest.mark.parametrize("hash_fn", [sha256, sha256_cbor])
def test_init_none_hash_from_pythonhashseed(monkeypatch, hash_fn):
    monkeypatch.setenv("PYTHONHASHSEED", "python hash seed")
    init_none_hash(hash_fn)
    assert kv_cache_utils.NONE_HASH == hash_fn("python hash seed")  # forwarded, always current
    monkeypatch.delenv("PYTHONHASHSEED")
    init_none_hash(hash_fn)
    first = kv_cache_utils.NONE_HASH
    init_none_hash(hash_fn)
    assert len(first) == 32 and first != kv_cache_utils.NONE_HASH  # random when unseeded


def test_hash_before_init_none_hash_is_a_clear_error(monkeypatch):
    monkeypatch.delattr(bh, "NONE_HASH")
    with pytest.raises(RuntimeError, match="init_none_hash"):
        hash_block_tokens(sha256, None, [1, 2])
    with pytest.raises(RuntimeError, match="init_none_hash"):
        kv_cache_utils.NONE_HASH  # noqa: B018


@pytest.mark.parametrize("hash_fn", [sha256, sha256_cbor])
def test_hash_block_tokens_definition(hash_fn):
    parent = BlockHash(b"123")
    assert hash_block_tokens(hash_fn, parent, [1, 2, 3], ("k1", "k2")) == hash_fn(
        (parent, (1, 2, 3), ("k1", "k2"))
    )
    # no parent (None or empty) chains to NONE_HASH
    expected_first = hash_fn((kv_cache_utils.NONE_HASH, (1, 2, 3), None))
    assert hash_block_tokens(hash_fn, None, (1, 2, 3)) == expected_first
    assert hash_block_tokens(hash_fn, BlockHash(b""), (1, 2, 3)) == expected_first


# --- extra keys ------------------------------------------------------------------------


def test_extra_keys_multimodal_offsets_relative_to_block():
    req = make_request(range(20), mm=[("hash1", 0, 5), ("hash2", 10, 5)])
    assert generate_block_hash_extra_keys(req, 0, 5, 0) == ((("hash1", 0),), 1)
    assert generate_block_hash_extra_keys(req, 3, 8, 0) == (
        (("hash1", -3),),
        1,
    )  # started before the block
    assert generate_block_hash_extra_keys(req, 6, 10, 0) == (None, 1)  # between the items
    assert generate_block_hash_extra_keys(req, 0, 15, 0) == ((("hash1", 0), ("hash2", 10)), 2)
    assert generate_block_hash_extra_keys(req, 12, 16, -1) == (
        (("hash2", -2),),
        2,
    )  # -1 = last item
    assert generate_block_hash_extra_keys(req, 16, 20, 0) == (None, 0)  # after every item


def test_extra_keys_none_without_mm_lora_salt():
    req = make_request(range(6))
    assert not need_extra_keys(req)
    assert generate_block_hash_extra_keys(req, 0, 5, 0) == (None, 0)


def test_extra_keys_cache_salt_only_on_first_block():
    req = make_request(range(6), cache_salt="salt")
    assert need_extra_keys(req)
    assert generate_block_hash_extra_keys(req, 0, 1, 0)[0] == ("salt",)
    assert generate_block_hash_extra_keys(req, 0, 10, 0)[0] == ("salt",)
    assert generate_block_hash_extra_keys(req, 1, 2, 0)[0] is None
    req_mm = make_request(range(20), mm=[("hash1", 0, 5)], cache_salt="salt")
    assert generate_block_hash_extra_keys(req_mm, 0, 5, 0) == ((("hash1", 0), "salt"), 1)


def test_extra_keys_lora_name_first_on_every_block():
    req = make_request(range(12), lora_request=LoRARequest("adapter", 1), mm=[("img", 4, 2)])
    assert generate_block_hash_extra_keys(req, 0, 4, 0)[0] == ("adapter",)
    assert generate_block_hash_extra_keys(req, 4, 8, 0)[0] == ("adapter", ("img", 0))
    req.lora_request = None
    assert generate_block_hash_extra_keys(req, 0, 4, 0)[0] is None


class _Embeds:
    """A numpy-like stand-in: slicing gives rows, tobytes gives their bytes."""

    def __init__(self, rows):
        self.rows, self.tobytes_calls = rows, 0

    def __len__(self):
        return len(self.rows)

    def __getitem__(self, s):
        owner, rows = self, self.rows[s]

        class _Slice:
            def tobytes(self):
                owner.tobytes_calls += 1
                return b"".join(rows)

        return _Slice()


def test_extra_keys_prompt_embeds_hashed_once_per_block():
    embeds = _Embeds([bytes([i]) * 4 for i in range(8)])
    req = Request("e", None, SamplingParams(max_tokens=2), None, prompt_embeds=embeds)
    assert req.num_prompt_tokens == 8 and req.all_token_ids == [0] * 8
    keys, _ = generate_block_hash_extra_keys(req, 0, 4, 0)
    assert keys == (hashlib.sha256(b"".join(bytes([i]) * 4 for i in range(4))).digest(),)
    assert generate_block_hash_extra_keys(req, 0, 4, 0)[0] == keys and embeds.tobytes_calls == 1
    assert generate_block_hash_extra_keys(req, 4, 8, 0)[0] != keys


# --- request block hasher --------------------------------------------------------------


@pytest.mark.parametrize("hash_fn", [sha256, sha256_cbor])
def test_request_block_hasher_chains_full_blocks_only(hash_fn):
    req = make_request(
        range(7), block_size=3, hash_fn=hash_fn, mm=[("hash1", 0, 3), ("hash2", 3, 3)]
    )
    h0 = hash_fn((kv_cache_utils.NONE_HASH, (0, 1, 2), (("hash1", 0),)))
    h1 = hash_fn((h0, (3, 4, 5), (("hash2", 0),)))
    assert req.block_hashes == [h0, h1]  # token 6 is not a full block
    req.append_output_token_ids(100)
    assert len(req.block_hashes) == 2
    req.append_output_token_ids([101])
    assert req.block_hashes[2] == hash_fn((h1, (6, 100, 101), None))


def test_request_block_hasher_distinguishes_mm_identifiers():
    a = make_request(range(6), block_size=3, mm=[("hash1", 0, 3), ("hash2", 3, 3)])
    b = make_request(range(6), block_size=3, mm=[("hash3", 0, 3), ("hash2", 3, 3)])
    assert a.block_hashes[0] != b.block_hashes[0] and a.block_hashes[1] != b.block_hashes[1]


def test_request_block_hasher_rejects_bad_block_size():
    with pytest.raises(ValueError, match="block_size"):
        get_request_block_hasher(0, sha256)


# --- BlockHashListWithBlockSize --------------------------------------------------------


def test_block_hash_list_with_block_size_concatenates():
    hashes = [BlockHash(c.encode()) for c in "ABCDE"]
    view = BlockHashListWithBlockSize(hashes, hash_block_size=4, target_block_size=8)
    assert len(view) == 2 and view[0] == b"AB" and view[1] == b"CD"
    assert view[0:2] == [b"AB", b"CD"] and view[1:] == [b"CD"] and list(view) == [b"AB", b"CD"]
    hashes.append(BlockHash(b"F"))  # the view reads the live list
    assert len(view) == 3 and view[2] == b"EF"
    assert len(BlockHashListWithBlockSize(hashes, 4, 4)) == 6
    with pytest.raises(TypeError):
        view["0"]
    with pytest.raises(AssertionError):  # as vLLM: the target must be a multiple
        BlockHashListWithBlockSize(hashes, 4, 6)


def test_extra_keys_prompt_embeds_torch_equals_numpy_bytes():
    np = pytest.importorskip("numpy")
    torch = pytest.importorskip("torch")
    rows = np.arange(12, dtype=np.float32).reshape(4, 3)
    expected = hashlib.sha256(rows[0:2].tobytes()).digest()  # vLLM hashes the raw row bytes
    for embeds in (rows, torch.from_numpy(rows.copy())):
        req = Request("e", None, SamplingParams(max_tokens=2), None, prompt_embeds=embeds)
        assert generate_block_hash_extra_keys(req, 0, 2, 0)[0] == (expected,)
    bf16 = torch.arange(8, dtype=torch.bfloat16).reshape(4, 2)
    req = Request("b", None, SamplingParams(max_tokens=2), None, prompt_embeds=bf16)
    raw = bf16[2:4].contiguous().view(torch.int16).numpy().tobytes()
    assert generate_block_hash_extra_keys(req, 2, 4, 0)[0] == (hashlib.sha256(raw).digest(),)
