"""A what-if over a Mooncake trace too big to hold: one pass, one request in memory at a time.

``sweep`` needs the whole request list and every request's block hashes (``prepare_blocks``):
for the 12,031-request conversation trace that is nothing, for a production trace 100 times
its size (1.2 M requests, 14.5 G prompt tokens) it is more memory than a laptop has
(``read_mooncake`` refuses such a file up front). ``sweep_mooncake_stream`` reads the file
with ``iter_mooncake`` and hands each request to every (block size, cache, capacity) at once,
then drops it, so memory is:

* each cache's own state, bounded by its capacity: vLLM's at every capacity in one pass
  (``stack.LRUCurve``, fed one request at a time, exact: equal to replaying kvlab.core's
  manager at each capacity), SGLang's radix tree over at most ``capacity // block_size`` pages
  (``radix.RadixPrefixCache``, one per capacity);
* the prefix-id check of ``iter_mooncake`` and the infinite cache's record of the hash ids it
  has seen, both flat arrays indexed by id (about 11 bytes per distinct hash id).

Block keys: a Mooncake hash id names a whole prefix and always the same block content
(``iter_mooncake`` refuses a file where it does not), so block ``j`` (at block size ``B``)
inside hash id ``h`` is named by the int ``h * (512 // B) + j`` (``blocks.hash_id_keys``):
equal keys mean equal prefixes exactly as kvlab's chained sha256 over ``synthesize_tokens``
does (``prepare_blocks``), so every cache takes the same decisions as in ``sweep`` and nothing
is hashed.

What the stream does not keep: ``ReplayResult.per_request_hit_tokens`` stays empty (1.2 M ints
per row), and only the sequence clock with caches ``vllm`` and ``radix`` is offered (nano-vllm
hashes every synthesized token; the timed clock schedules many requests at once).

Examples:
    >>> import tempfile
    >>> from pathlib import Path
    >>> path = Path(tempfile.mkdtemp()) / "t.jsonl"
    >>> _ = path.write_text(
    ...     '{"timestamp": 0, "input_length": 1024, "output_length": 1, "hash_ids": [0, 1]}\\n'
    ...     '{"timestamp": 1, "input_length": 1100, "output_length": 1, "hash_ids": [0, 1, 2]}\\n')
    >>> num, results = sweep_mooncake_stream(path, ["vllm"], [512, 4096], [512])
    >>> num, [(r.cache, r.capacity_tokens, r.hit_tokens) for r in results]
    (2, [('infinite', 512, 1024), ('vllm', 512, 0), ('vllm', 4096, 1024)])
"""

from __future__ import annotations

from array import array
from collections.abc import Sequence
from itertools import repeat
from os import PathLike
from typing import Any

from kvlab.traffic.blocks import hash_id_keys, progress_iter
from kvlab.traffic.mooncake import MOONCAKE_BLOCK_SIZE, TrafficRequest, iter_mooncake
from kvlab.traffic.radix import RadixPrefixCache
from kvlab.traffic.replay import ReplayResult, check_capacity
from kvlab.traffic.stack import LRUCurve

__all__ = ["STREAM_CACHES", "sweep_mooncake_stream"]

STREAM_CACHES = ("vllm", "radix")
"""Caches a streamed what-if replays (besides the infinite cache, always added)."""


class _SeenIds:
    """The hash ids seen so far: one byte per id in a flat array while ids are dense (below
    16 x the ids seen, plus 2**20, as ``iter_mooncake``'s check), a set beyond."""

    def __init__(self) -> None:
        self.flags = bytearray()
        self.sparse: set[int] = set()
        self.num_ids = 0

    def __contains__(self, h: int) -> bool:
        return (h < len(self.flags) and self.flags[h] == 1) or h in self.sparse

    def add(self, h: int) -> None:
        if h in self:
            return
        self.num_ids += 1
        size = len(self.flags)
        if size <= h < min(16 * self.num_ids + (1 << 20), 1 << 40):
            self.flags.extend(repeat(0, max(h + 1 - size, size // 2, 1 << 16)))
        if h < len(self.flags):
            self.flags[h] = 1
        else:
            self.sparse.add(h)


class _Infinite:
    """Every block ever seen stays cached (``replay.infinite_hits``), kept per hash id: the
    blocks inside an id are all seen or none is, since an id always names the same blocks."""

    def __init__(self, block_size: int, seen: _SeenIds) -> None:
        self.block_size, self.seen, self.evicted = block_size, seen, 0

    def serve(self, req: TrafficRequest, names: list[int]) -> int | None:
        bs, h_size = self.block_size, req.hash_block_size
        assert req.hash_ids is not None
        cap, n, last = (req.num_prompt_tokens - 1) // bs, 0, len(req.hash_ids) - 1
        for k, h in enumerate(req.hash_ids):
            if h not in self.seen:
                break
            n += (h_size if k < last else req.num_prompt_tokens - last * h_size) // bs
        return min(n, cap) * bs


class _Vllm:
    """vLLM at every capacity of one block size: ``LRUCurve``, one request at a time."""

    def __init__(self, block_size: int, caps: Sequence[int]) -> None:
        self.curve = LRUCurve(block_size, caps, keep_per_request=False)

    def serve(self, req: TrafficRequest, names: list[int]) -> None:
        self.curve.feed(names, req.num_prompt_tokens)

    def results(self, caps: Sequence[int], block_size: int) -> list[ReplayResult]:
        return [ReplayResult("vllm", c, block_size, "sequence", prompt_tokens=p.prompt_tokens,
                             hit_tokens=p.hit_tokens, evicted_blocks=p.evicted_blocks,
                             rejected=p.rejected)
                for c, p in zip(caps, self.curve.finish(), strict=True)]  # fmt: skip


class _Radix:
    """SGLang's radix tree at one capacity: ``radix.RadixPrefixCache`` (the same decisions as
    kvlab.sglang's RadixCache, ``replay.serve_radix_one``)."""

    def __init__(self, num_blocks: int, block_size: int) -> None:
        self.sim = RadixPrefixCache(num_blocks, block_size)

    @property
    def evicted(self) -> int:
        return self.sim.num_evicted_blocks

    def serve(self, req: TrafficRequest, names: list[int]) -> int | None:
        hit = self.sim.serve(names, req.num_prompt_tokens)
        return None if hit < 0 else hit


def _check(caches: Sequence[str], capacities_tokens: Sequence[Any],
           block_sizes: Sequence[int]) -> None:  # fmt: skip
    for name, values in (("caches", caches), ("capacities_tokens", capacities_tokens),
                         ("block_sizes", block_sizes)):  # fmt: skip
        if not values:
            raise ValueError(f"{name} is empty; allowed: at least one")
    bad = [c for c in caches if c not in STREAM_CACHES]
    if bad:
        raise ValueError(f"cache {bad[0]!r} cannot be streamed; allowed: "
                         f"{', '.join(STREAM_CACHES)} (infinite is added)")  # fmt: skip
    for bs in block_sizes:
        if isinstance(bs, bool) or not isinstance(bs, int) or bs < 1 or MOONCAKE_BLOCK_SIZE % bs:
            raise ValueError(f"block size {bs!r} is not allowed for a Mooncake trace; allowed: "
                             f"the divisors of {MOONCAKE_BLOCK_SIZE}")  # fmt: skip
        for cap in capacities_tokens:
            check_capacity(cap, bs)


def sweep_mooncake_stream(
    path: str | PathLike[str],
    caches: Sequence[str],
    capacities_tokens: Sequence[int],
    block_sizes: Sequence[int],
    limit: int | None = None,
    progress: bool | None = False,
) -> tuple[int, list[ReplayResult]]:
    """``sweep`` over a Mooncake trace file read once, one request at a time (module docstring).

    Args:
        path: The Mooncake JSONL file.
        caches: Of STREAM_CACHES ("vllm", "radix"); the infinite cache is always added.
        capacities_tokens: Pool sizes (tokens), each at least one block of every block size.
        block_sizes: kvlab block sizes (tokens), divisors of 512.
        limit: Only the first ``limit`` requests (None = all).
        progress: A tqdm bar counting requests: True always, None only on a terminal.

    Returns:
        (requests read, results): the results in ``sweep``'s order (per block size the
        infinite cache, then each cache at each capacity), sequence clock, with empty
        ``per_request_hit_tokens``.

    Raises:
        ValueError: Before reading: an empty list, a cache other than vllm or radix, a block
            size not dividing 512, a capacity below one block. While reading: naming the file,
            the first bad line and what is allowed (``iter_mooncake``); or a file holding no
            request. No result is returned then.
        FileNotFoundError: If the file does not exist.
    """
    _check(caches, capacities_tokens, block_sizes)
    seen = _SeenIds()
    caps = {bs: [check_capacity(c, bs) for c in capacities_tokens] for bs in block_sizes}
    rows: list[tuple[ReplayResult, Any]] = []  # NOTE: one request served at a time, per row
    curves: dict[int, _Vllm] = {}
    for bs in block_sizes:
        rows.append((ReplayResult("infinite", int(bs), int(bs), "sequence"), _Infinite(bs, seen)))
        if "vllm" in caches:
            curves[bs] = _Vllm(bs, caps[bs])
        if "radix" in caches:
            rows += [(ReplayResult("radix", c, bs, "sequence"), _Radix(c // bs, bs))
                     for c in caps[bs]]  # fmt: skip
    num = 0
    requests = progress_iter(iter_mooncake(path, limit), progress, desc="streaming requests",
                             unit="req")  # fmt: skip
    for req in requests:
        keys = {bs: hash_id_keys(req, bs) for bs in block_sizes}
        for bs, curve in curves.items():
            curve.serve(req, keys[bs])
        for res, server in rows:
            hit = server.serve(req, keys[res.block_size])
            res.prompt_tokens += req.num_prompt_tokens
            if hit is None:
                res.rejected += 1
            else:
                res.hit_tokens += hit
        assert req.hash_ids is not None
        for h in req.hash_ids:
            seen.add(h)
        num += 1
    if num == 0:
        raise ValueError(f"{path}: no request in this mooncake file")
    for res, server in rows:
        res.evicted_blocks = server.evicted
    out = []
    for bs in block_sizes:  # NOTE: sweep's order: infinite, then each cache at each capacity
        out += [r for r, _ in rows if r.block_size == bs and r.cache == "infinite"]
        for cache in caches:
            out += curves[bs].results(caps[bs], bs) if cache == "vllm" else \
                [r for r, _ in rows if r.block_size == bs and r.cache == cache]  # fmt: skip
    return num, out
