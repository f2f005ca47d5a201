"""Real request traces in: the Mooncake FAST'25 format, and the request form every replay uses.

A Mooncake trace (kvcache-ai/Mooncake, FAST25-release/traces/, Apache-2.0) is JSONL, one request
a line::

    {"timestamp": 0, "input_length": 6758, "output_length": 500, "hash_ids": [0, 1, ..., 13]}

``timestamp`` is the arrival (ms since the start), ``input_length`` / ``output_length`` are
tokens, ``hash_ids`` names each 512-token block of the prompt (``len(hash_ids) ==
ceil(input_length / 512)``). The ids are *prefix* ids: an id always follows the same parent id,
so equal ids at the same position mean the same prefix (checked on both shipped traces).

What ``input_length % 512 != 0`` implies: the last id names a *partial* block of
``input_length - 512 * (len(hash_ids) - 1)`` tokens. In both real traces an id never appears
with two different lengths, so equal last ids mean equal partial blocks. kvlab therefore
derives every token from the id of the 512-block that holds it (``synthesize_tokens``)::

    token at offset j (0..511) of a block with hash id h  =  h * 512 + j

Equal ids give equal tokens, different ids give disjoint tokens, so kvlab's real chained
block hashing (``kvlab.core.kv_cache_utils.hash_block_tokens``) produces equal block hashes exactly
for equal prefixes, at any block size dividing 512. A partial last block is shared only when
another request names the same id (the trace says so); otherwise its tokens are its own. At a
kvlab block size ``B`` only ``input_length // B`` blocks are full, so the partial tail is never
a prefix-cache hit for a block cache, whatever the trace says.

Examples:
    >>> reqs = read_mooncake_lines(['{"timestamp": 5, "input_length": 600, '
    ...                             '"output_length": 2, "hash_ids": [7, 9]}'])
    >>> r = reqs[0]
    >>> r.request_id, r.num_prompt_tokens, r.arrival_ms
    ('mc-0', 600, 5.0)
    >>> synthesize_tokens(r)[510:514]
    [4094, 4095, 4608, 4609]
"""

from __future__ import annotations

import json
import os
from array import array
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from os import PathLike
from itertools import repeat
from typing import TextIO

__all__ = [
    "MAX_LINE_CHARS",
    "MAX_READ_MEMORY",
    "MOONCAKE_BLOCK_SIZE",
    "READ_BYTES_PER_FILE_BYTE",
    "TrafficRequest",
    "iter_mooncake",
    "read_mooncake",
    "read_mooncake_lines",
    "synthesize_tokens",
]

MOONCAKE_BLOCK_SIZE = 512
"""Tokens per hash id in Mooncake traces (tokens)."""
MAX_LINE_CHARS = 32 << 20
"""Longest line read (characters); a longer one is refused unread."""
READ_BYTES_PER_FILE_BYTE = 6
"""Peak memory of ``read_mooncake`` per byte of file (bytes), rounded up from tracemalloc's
peaks on the two Mooncake traces (conversation 5.2, synthetic 5.5); benchmarks/results/
mooncake_scale.md compares it with the RSS of reading the 100x trace whole."""
MAX_READ_MEMORY = 2 << 30
"""``read_mooncake`` refuses, before reading, a file that would need more (bytes)."""

_KEYS = ("timestamp", "input_length", "output_length", "hash_ids")


@dataclass(frozen=True)
class TrafficRequest:
    """One request of real traffic, as every replay takes it.

    Either ``hash_ids`` (prefix block ids at ``hash_block_size``; tokens are synthesized from
    them) or ``prompt_token_ids`` (real token ids) is set.

    Attributes:
        request_id: Unique id.
        arrival_ms: Arrival time (ms since the start of the trace).
        num_prompt_tokens: Prompt length (tokens), >= 1.
        num_output_tokens: Output length (tokens), >= 1.
        hash_ids: Prefix block ids (one per ``hash_block_size`` tokens, last one partial), or None.
        prompt_token_ids: The prompt's token ids, or None.
        hash_block_size: Tokens per hash id (tokens).
    """

    request_id: str
    arrival_ms: float
    num_prompt_tokens: int
    num_output_tokens: int
    hash_ids: tuple[int, ...] | None = None
    prompt_token_ids: tuple[int, ...] | None = None
    hash_block_size: int = MOONCAKE_BLOCK_SIZE


def synthesize_tokens(req: TrafficRequest) -> list[int]:
    """The prompt's token ids: real ones, or derived from hash ids (see the module docstring).

    Returns:
        ``num_prompt_tokens`` ints; token j of hash block k is ``hash_ids[k] * H + j``
        (H = hash_block_size).
    """
    if req.prompt_token_ids is not None:
        return list(req.prompt_token_ids)
    assert req.hash_ids is not None
    h_size, out = req.hash_block_size, []
    last = len(req.hash_ids) - 1
    for k, h in enumerate(req.hash_ids):
        n = h_size if k < last else req.num_prompt_tokens - last * h_size
        out.extend(range(h * h_size, h * h_size + n))
    return out


def _int_field(obj: dict, key: str, low: int) -> int:
    v = obj[key]
    if isinstance(v, bool) or not isinstance(v, int) or v < low:
        raise ValueError(f"{key!r} must be an int >= {low}, got {v!r}")
    return v


def _parse(obj: object, index: int) -> TrafficRequest:
    if not isinstance(obj, dict):
        raise ValueError(f"expected a JSON object, got {type(obj).__name__}")
    missing = [k for k in _KEYS if k not in obj]
    if missing:
        raise ValueError(
            f"missing {', '.join(repr(k) for k in missing)}; a Mooncake request has "
            f"{', '.join(_KEYS)}"
        )
    ts = obj["timestamp"]
    if isinstance(ts, bool) or not isinstance(ts, (int, float)) or ts < 0:
        raise ValueError(f"'timestamp' must be a number >= 0 (ms), got {ts!r}")
    n_in = _int_field(obj, "input_length", 1)
    n_out = _int_field(obj, "output_length", 0)
    ids = obj["hash_ids"]
    if not isinstance(ids, list) or any(
        isinstance(h, bool) or not isinstance(h, int) or h < 0 for h in ids
    ):
        raise ValueError(f"'hash_ids' must be a list of ints >= 0, got {str(ids)[:60]}")
    want = -(-n_in // MOONCAKE_BLOCK_SIZE)
    if len(ids) != want:
        raise ValueError(
            f"hash_ids has {len(ids)} ids but input_length {n_in} needs "
            f"ceil({n_in} / {MOONCAKE_BLOCK_SIZE}) = {want}"
        )
    # NOTE: output_length 0 happens in no shipped trace; a request still samples one token.
    return TrafficRequest(f"mc-{index}", float(ts), n_in, max(n_out, 1), tuple(ids))


def _lines(f: Iterable[str] | TextIO) -> Iterator[str]:
    """Lines, each read bounded (MAX_LINE_CHARS) when ``f`` is a file."""
    if not hasattr(f, "readline"):
        yield from f
        return
    while line := f.readline(MAX_LINE_CHARS + 1):  # type: ignore[union-attr]
        yield line
        if len(line) > MAX_LINE_CHARS:
            return  # NOTE: refused by the caller; the rest of that line is never read


def iter_mooncake_lines(lines: Iterable[str], limit: int | None = None
                        ) -> Iterator[TrafficRequest]:  # fmt: skip
    """Parse Mooncake JSONL lines one at a time (blank lines skipped); ids are ``mc-<index>``.

    Memory: the requests are not kept; the prefix check keeps two small ints per distinct
    hash id (``_PrefixIds``), about 12 bytes each.

    Raises:
        ValueError: Naming the line and what is allowed: longer than MAX_LINE_CHARS, not JSON
            (or nested too deeply), not an object, a missing or mistyped field, hash_ids
            inconsistent with input_length, a prefix id seen after two different parents, or an
            id seen with two block lengths.
    """
    prefixes, index = _PrefixIds(), 0
    for n, line in enumerate(_lines(lines), start=1):
        if limit is not None and index >= limit:
            return
        if len(line) > MAX_LINE_CHARS:
            raise ValueError(f"line {n}: longer than MAX_LINE_CHARS={MAX_LINE_CHARS} characters")
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as exc:
            raise ValueError(f"line {n}: not JSON ({exc.msg}); expected one Mooncake "
                             f"request object a line") from None  # fmt: skip
        except RecursionError:
            raise ValueError(f"line {n}: JSON nested too deeply; expected one flat Mooncake "
                             "request object a line") from None  # fmt: skip
        try:
            req = _parse(obj, index)
            prefixes.check(req)
        except ValueError as exc:
            raise ValueError(f"line {n}: {exc}") from None
        index += 1
        yield req


def read_mooncake_lines(lines: Iterable[str], limit: int | None = None) -> list[TrafficRequest]:
    """Parse Mooncake JSONL lines (blank lines skipped); ids are ``mc-<index>``.

    Args:
        lines: The lines.
        limit: Keep only the first ``limit`` requests (None = all).

    Returns:
        The requests, in file order.

    Raises:
        ValueError: See ``iter_mooncake_lines``.
    """
    return list(iter_mooncake_lines(lines, limit))


class _PrefixIds:
    """hash id -> (parent id, tokens in its block), to check that ids name prefixes.

    NOTE: kept in two flat ``array`` columns indexed by id (10 bytes an id) while ids are dense
    (below 16 x the ids seen, plus 2**20), in a dict beyond, so memory follows the ids a file
    really holds: a 100x Mooncake trace (18 M ids) costs about 200 MB here, a dict about 2 GB.
    """

    def __init__(self) -> None:
        self.parent = array("q")  # NOTE: -2 = never seen
        self.length = array("h")
        self.sparse: dict[int, tuple[int, int]] = {}
        self.num_ids = 0

    def check(self, req: TrafficRequest) -> None:
        ids = req.hash_ids or ()
        last = len(ids) - 1
        tail = req.num_prompt_tokens - last * MOONCAKE_BLOCK_SIZE
        for k, h in enumerate(ids):
            p, n = ids[k - 1] if k else -1, MOONCAKE_BLOCK_SIZE if k < last else tail
            old_p, old_n = self._get(h)
            if old_p == -2:
                self._set(h, p, n)
            elif old_p != p:
                raise ValueError(f"hash id {h} follows id {p} here but id {old_p} before; hash "
                                 "ids must name prefixes (an id always after the same parent)")
            elif old_n != n:
                raise ValueError(f"hash id {h} covers {n} tokens here but {old_n} before; an "
                                 "id must name one block content")

    def _get(self, h: int) -> tuple[int, int]:
        if h < len(self.parent) and self.parent[h] != -2:
            return self.parent[h], self.length[h]
        return self.sparse.get(h, (-2, 0))

    def _set(self, h: int, p: int, n: int) -> None:
        self.num_ids += 1
        size = len(self.parent)
        if size <= h < min(16 * self.num_ids + (1 << 20), 1 << 40):
            grow = max(h + 1 - size, size // 2, 1 << 16)
            self.parent.extend(repeat(-2, grow))  # NOTE: in place, amortized
            self.length.extend(repeat(0, grow))
        if h < len(self.parent) and p < 1 << 62:
            self.parent[h], self.length[h] = p, n
        else:
            self.sparse[h] = (p, n)


def iter_mooncake(path: str | PathLike[str], limit: int | None = None
                  ) -> Iterator[TrafficRequest]:  # fmt: skip
    """Stream a Mooncake trace file request by request, in bounded memory (see
    ``iter_mooncake_lines``): the way to read a trace too big for ``read_mooncake``.

    Raises:
        FileNotFoundError: If the file does not exist.
        ValueError: Naming the file, the first bad line and what is allowed.
    """
    with open(path, encoding="utf-8") as f:
        try:
            yield from iter_mooncake_lines(f, limit)
        except ValueError as exc:  # NOTE: UnicodeDecodeError too
            raise ValueError(f"{path}: {exc}") from None


def read_mooncake(path: str | PathLike[str], limit: int | None = None,
                  max_memory: int = MAX_READ_MEMORY) -> list[TrafficRequest]:  # fmt: skip
    """Read a Mooncake trace file whole (see ``read_mooncake_lines``).

    A file that would need more than ``max_memory`` bytes (READ_BYTES_PER_FILE_BYTE per byte
    of file, at its peak) is refused before anything is read, saying how much it would need;
    ``iter_mooncake`` streams any size.

    Raises:
        FileNotFoundError: If the file does not exist.
        ValueError: Naming the file, the first bad line and what is allowed; or, for a file
            too big to hold, the memory it would need and max_memory.
    """
    need = os.path.getsize(path) * READ_BYTES_PER_FILE_BYTE
    if limit is None and need > max_memory:
        raise ValueError(
            f"{path}: reading this trace whole would take about {need / 2**30:.1f} GiB of memory "
            f"({READ_BYTES_PER_FILE_BYTE} bytes per byte of file), over max_memory="
            f"{max_memory / 2**30:.1f} GiB; stream it with kvlab.traffic.iter_mooncake (bounded "
            "memory), read its first requests (limit=), or raise max_memory"
        )
    return list(iter_mooncake(path, limit))
