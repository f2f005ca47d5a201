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
from collections.abc import Iterable
from dataclasses import dataclass
from os import PathLike

__all__ = [
    "MOONCAKE_BLOCK_SIZE",
    "TrafficRequest",
    "read_mooncake",
    "read_mooncake_lines",
    "synthesize_tokens",
]

MOONCAKE_BLOCK_SIZE = 512
"""Tokens per hash id in Mooncake traces (tokens)."""

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


def read_mooncake_lines(lines: Iterable[str], limit: int | None = None) -> list[TrafficRequest]:
    """Parse Mooncake JSONL lines (blank lines skipped); ids are ``mc-<index>``.

    Args:
        lines: The lines.
        limit: Keep only the first ``limit`` requests (None = all).

    Returns:
        The requests, in file order.

    Raises:
        ValueError: Naming the line and what is allowed: not JSON, not an object, a missing
            or mistyped field, hash_ids inconsistent with input_length, a prefix id seen
            after two different parents, or an id seen with two block lengths.
    """
    reqs: list[TrafficRequest] = []
    parent: dict[int, int] = {}
    length: dict[int, int] = {}
    for n, line in enumerate(lines, start=1):
        if limit is not None and len(reqs) >= limit:
            break
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as exc:
            raise ValueError(f"line {n}: not JSON ({exc.msg}); expected one Mooncake "
                             f"request object a line") from None  # fmt: skip
        try:
            req = _parse(obj, len(reqs))
            _check_prefix_ids(req, parent, length)
        except ValueError as exc:
            raise ValueError(f"line {n}: {exc}") from None
        reqs.append(req)
    return reqs


def _check_prefix_ids(req: TrafficRequest, parent: dict[int, int], length: dict[int, int]):
    ids = req.hash_ids or ()
    last = len(ids) - 1
    for k, h in enumerate(ids):
        p = ids[k - 1] if k else -1
        n = MOONCAKE_BLOCK_SIZE if k < last else req.num_prompt_tokens - last * MOONCAKE_BLOCK_SIZE
        if parent.setdefault(h, p) != p:
            raise ValueError(
                f"hash id {h} follows id {p} here but id {parent[h]} before; hash ids must "
                f"name prefixes (an id always after the same parent)"
            )
        if length.setdefault(h, n) != n:
            raise ValueError(
                f"hash id {h} covers {n} tokens here but {length[h]} before; an id must name "
                f"one block content"
            )


def read_mooncake(path: str | PathLike[str], limit: int | None = None) -> list[TrafficRequest]:
    """Read a Mooncake trace file (see ``read_mooncake_lines``).

    Raises:
        FileNotFoundError: If the file does not exist.
        ValueError: Naming the file, the first bad line and what is allowed.
    """
    with open(path, encoding="utf-8") as f:
        try:
            return read_mooncake_lines(f, limit)
        except ValueError as exc:
            raise ValueError(f"{path}: {exc}") from None
