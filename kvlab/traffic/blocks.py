"""Block hashes of real traffic at one kvlab block size, computed once and shared by every replay.

Every replay needs, per request, the block hashes of its full prompt blocks. Computing them
from token lists costs one hash per block per replay; a capacity sweep replays the same trace
many times, so ``prepare_blocks`` computes them once:

* requests with real token ids: kvlab's chained hashing over the tokens
  (``kvlab.core.kv_cache_utils.hash_block_tokens``, exactly as ``get_request_block_hasher``);
* Mooncake requests (hash ids): the same hashing over ``synthesize_tokens``, memoized per
  hash id: since a hash id names a whole prefix, the ``512 // block_size`` block hashes inside
  it are the same in every request that names it. The result equals hashing each request's
  synthesized tokens from scratch (tests check it) at a fraction of the cost.

Each distinct block hash also gets a small int ``key`` (first-seen order), so caches that work
on ints (the radix tree, the infinite cache, the prefix counts) skip the 32-byte hashes.

When every request names hash ids, the keys need no hashing at all: block ``j`` of the hash
block named ``h`` has the same hash in every request that names ``h`` (a hash id names a
prefix, checked by the readers), and different ``(h, j)`` give different tokens, so interning
``(h, j)`` in the same order gives the very same keys. The block hashes are then computed only
when something reads ``block_hashes`` (a replay through kvlab.core or nano-vllm); the curves,
Belady, the fleet and the radix tree never do.

Examples:
    >>> from kvlab.traffic.mooncake import read_mooncake_lines
    >>> reqs = read_mooncake_lines([
    ...     '{"timestamp": 0, "input_length": 1024, "output_length": 1, "hash_ids": [0, 1]}',
    ...     '{"timestamp": 1, "input_length": 700, "output_length": 1, "hash_ids": [0, 2]}'])
    >>> b = prepare_blocks(reqs, block_size=256)
    >>> b.keys
    [[0, 1, 2, 3], [0, 1]]
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from kvlab.core.kv_cache_utils import BlockHash, hash_block_tokens, init_none_hash
from kvlab.core.hashing import sha256
from kvlab.traffic.mooncake import TrafficRequest, synthesize_tokens

__all__ = ["BlockedTraffic", "hash_id_keys", "prepare_blocks", "progress_iter"]


@dataclass(eq=False)
class BlockedTraffic:
    """Traffic at one block size.

    Attributes:
        requests: The requests, in arrival order.
        block_size: kvlab block size (tokens).
        block_hashes: Per request, the BlockHash of each full prompt block
            (``num_prompt_tokens // block_size`` of them).
        keys: Per request, an int per full prompt block; equal keys <=> equal prefixes.
        num_keys: Distinct block hashes (distinct prefix blocks).
    """

    requests: list[TrafficRequest]
    block_size: int
    _block_hashes: list[list[BlockHash]] | None
    keys: list[list[int]]
    num_keys: int
    hash_fn: Callable[[Any], bytes] = sha256

    @property
    def block_hashes(self) -> list[list[BlockHash]]:
        """Per request, the BlockHash of each full prompt block (computed on first use)."""
        if self._block_hashes is None:
            ensure_none_hash()
            memo: dict = {}
            self._block_hashes = [_hash_ids_blocks(r, self.block_size, memo, self.hash_fn)
                                  for r in self.requests]  # fmt: skip
        return self._block_hashes

    def __len__(self) -> int:
        return len(self.requests)

    @property
    def num_prompt_tokens(self) -> int:
        """Prompt tokens of all requests (tokens)."""
        return sum(r.num_prompt_tokens for r in self.requests)

    def index_of(self, request_id: str) -> int:
        """Position of ``request_id``.

        Raises:
            KeyError: Naming a few known ids when it is unknown.
        """
        for i, r in enumerate(self.requests):
            if r.request_id == request_id:
                return i
        some = ", ".join(r.request_id for r in self.requests[:3])
        raise KeyError(f"no request {request_id!r} (ids look like {some}, ...)")


def progress_iter(it: Any, progress: bool | None, **tqdm_kwargs: Any) -> Any:
    """``it`` under a tqdm progress bar (on stderr), following tqdm's conventions.

    Args:
        it: Any iterable.
        progress: True = always a bar, None = a bar only when stderr is a terminal (tqdm's
            ``disable=None``: none in logs, pipes or captured output), False = ``it`` itself.
        tqdm_kwargs: Passed to tqdm (desc, unit, leave, total, ...).
    """
    if progress is False:
        return it
    from tqdm.auto import tqdm

    return tqdm(it, disable=None if progress is None else False, **tqdm_kwargs)


def ensure_none_hash(hash_fn: Callable[[Any], bytes] = sha256) -> None:
    """Set kvlab's NONE_HASH once per process (never re-set it: held hashes would go stale)."""
    if not hasattr(sys.modules["kvlab.core.kv_cache_utils"], "NONE_HASH"):
        init_none_hash(hash_fn)


def check_block_size(block_size: int, requests: Sequence[TrafficRequest]) -> None:
    """Raise ValueError unless ``block_size`` is an int >= 1 dividing every hash block size."""
    if isinstance(block_size, bool) or not isinstance(block_size, int) or block_size < 1:
        raise ValueError(f"block_size must be an int >= 1 (tokens), got {block_size!r}")
    for r in requests:
        if r.hash_ids is not None and r.hash_block_size % block_size:
            raise ValueError(
                f"block_size {block_size} does not divide the trace's hash block size "
                f"{r.hash_block_size}; allowed: the divisors of {r.hash_block_size}"
            )


def _hash_tokens(tokens: Sequence[int], block_size: int, parent: BlockHash | None,
                 hash_fn: Callable[[Any], bytes]) -> list[BlockHash]:  # fmt: skip
    out = []
    for start in range(0, len(tokens) - block_size + 1, block_size):
        parent = hash_block_tokens(hash_fn, parent, tokens[start : start + block_size])
        out.append(parent)
    return out


def _hash_ids_blocks(req: TrafficRequest, block_size: int, memo: dict,
                     hash_fn: Callable[[Any], bytes]) -> list[BlockHash]:  # fmt: skip
    assert req.hash_ids is not None
    h_size, out = req.hash_block_size, []
    parent: BlockHash | None = None
    last = len(req.hash_ids) - 1
    for k, h in enumerate(req.hash_ids):
        n = h_size if k < last else req.num_prompt_tokens - last * h_size
        # NOTE: a hash id names a prefix, so its blocks' hashes depend on (id, length) only.
        got = memo.get((h, n))
        if got is None:
            tokens = range(h * h_size, h * h_size + n)
            got = memo[(h, n)] = _hash_tokens(tokens, block_size, parent, hash_fn)
        out.extend(got)
        if got:
            parent = got[-1]
    return out


def prepare_blocks(
    requests: Sequence[TrafficRequest],
    block_size: int,
    hash_fn: Callable[[Any], bytes] = sha256,
    progress: bool | None = False,
    any_block_size: bool = False,
) -> BlockedTraffic:
    """Hash every request's full prompt blocks at ``block_size`` (see the module docstring).

    Args:
        requests: The traffic (``read_mooncake`` / ``load_traffic``).
        block_size: kvlab block size (tokens); for hash-id requests a divisor of their
            hash block size (512 for Mooncake).
        hash_fn: The prefix-cache hash function (``kvlab.core.hashing``), vLLM's default sha256.
        progress: A tqdm progress bar: True shows it, None only on a terminal, False not.
        any_block_size: Also accept a block size that does not divide a hash block size
            (a model's aligned block size, 80 for Jamba): such requests are hashed over their
            synthesized tokens (``synthesize_tokens``), slower but with the same meaning.

    Returns:
        The BlockedTraffic.

    Raises:
        ValueError: If block_size is not a positive int, or does not divide a hash block size.
    """
    divides = all(r.hash_ids is None or r.hash_block_size % block_size == 0
                  for r in requests)  # fmt: skip
    if not (any_block_size and block_size >= 1 and not divides):
        check_block_size(block_size, requests)
    if divides and requests and all(r.hash_ids is not None for r in requests):
        return BlockedTraffic(list(requests), block_size, None,
                              *_hash_id_keys(requests, block_size, progress), hash_fn)  # fmt: skip
    ensure_none_hash()
    memo: dict = {}
    intern: dict[BlockHash, int] = {}
    all_hashes, all_keys = [], []
    it = progress_iter(requests, progress, desc=f"hashing blocks (block size {block_size})",
                       unit="req")  # fmt: skip
    for req in it:
        if req.hash_ids is not None and req.hash_block_size % block_size == 0:
            hashes = _hash_ids_blocks(req, block_size, memo, hash_fn)
        else:
            hashes = _hash_tokens(synthesize_tokens(req), block_size, None, hash_fn)
        all_hashes.append(hashes)
        all_keys.append([intern.setdefault(h, len(intern)) for h in hashes])
    return BlockedTraffic(list(requests), block_size, all_hashes, all_keys, len(intern), hash_fn)


def hash_id_keys(req: TrafficRequest, block_size: int) -> list[int]:
    """One request's block keys straight from its hash ids, with nothing remembered.

    Key of block j of the hash block named h: ``h * per + j``, ``per = hash_block_size //
    block_size``. Equal keys <=> equal prefixes, as ``prepare_blocks``'s keys (other ints),
    so a streaming replay (``stack.LRUCurve``) of a trace too big to intern gives the same
    hits.

    Raises:
        ValueError: If the request has no hash ids or block_size does not divide its hash
            block size.
    """
    if req.hash_ids is None or req.hash_block_size % block_size:
        raise ValueError(f"hash_id_keys needs hash ids at a multiple of block_size "
                         f"{block_size}; request {req.request_id} has none")  # fmt: skip
    per, ids = req.hash_block_size // block_size, req.hash_ids
    return [ids[j // per] * per + j % per for j in range(req.num_prompt_tokens // block_size)]


def _hash_id_keys(requests: Sequence[TrafficRequest], block_size: int,
                  progress: bool | None) -> tuple[list[list[int]], int]:  # fmt: skip
    """Keys of hash-id requests without hashing (see the module docstring)."""
    intern: dict = {}
    intern_id = intern.setdefault  # NOTE: a new key gets the next int: first-seen order
    all_keys = []
    it = progress_iter(requests, progress, desc=f"block keys (block size {block_size})",
                       unit="req")  # fmt: skip
    for req in it:
        assert req.hash_ids is not None
        per = req.hash_block_size // block_size
        full = req.num_prompt_tokens // block_size
        ids = req.hash_ids
        if per == 1:  # NOTE: one block per hash id: the id itself names the block
            keys = [intern_id(h, len(intern)) for h in ids[:full]]
        else:
            keys = [intern_id((ids[j // per], j % per), len(intern)) for j in range(full)]
        all_keys.append(keys)
    return all_keys, len(intern)
