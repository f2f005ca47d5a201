"""Traffic from every input format ``kvlab whatif`` reads, as the TrafficRequests replays take.

==============  ===========================================================================
``mooncake``    Mooncake FAST'25 JSONL (``read_mooncake``): prefix hash ids at 512 tokens.
``jsonl``       kvlab's JSONL workload (``kvlab.compare.from_jsonl``): prompts as token ids
                (text prompts need a ``tokenize`` function); ``arrival_step`` becomes
                ``arrival_ms`` (one step = 1 ms), requests sorted by it (stable).
``kvtrace``     A saved kvlab trace (``kvlab.compare.from_trace``): each recorded request's
                prompt is rebuilt from the block hashes the trace names (equal hash -> equal
                tokens, every other block tokens of its own), so a replay shares exactly what
                the recorded requests shared. Use a block size dividing the trace's.
``kvevents``    A recorded vLLM KV-event stream (``.kvev`` frames or ``.jsonl`` batches,
                ``kvlab.kv_events.read_kv_event_messages``); see below.
==============  ===========================================================================

What a KV-event stream can tell: vLLM publishes only the hashes that *entered* its cache.
Every ``BlockStored`` of group 0 on the GPU (``medium`` None or "GPU") becomes one request
whose prompt is its whole hash chain, from the first block (``parent_block_hash`` None) through
its parent's chain to its last stored block, ``block_size`` tokens per hash; the chain's hashes
become hash ids (``hash_block_size`` = the event's block_size), so equal chains give equal
prefixes at any kvlab block size dividing it. ``arrival_ms`` is the batch's ``ts`` since the
first batch (ms). Left out, because the stream never shows them: requests that stored nothing
(whole-prompt hits), the partial last block of each prompt, outputs; a stored parent the
recording never saw (joined late) starts the chain at that event. ``BlockRemoved`` and
``AllBlocksCleared`` are ignored: the replayed cache decides its own evictions.

Examples:
    >>> import json, tempfile, os
    >>> path = os.path.join(tempfile.mkdtemp(), "w.jsonl")
    >>> with open(path, "w") as f:
    ...     _ = f.write(json.dumps({"prompt_token_ids": [1, 2, 3], "max_tokens": 1}) + "\\n")
    >>> [(r.request_id, r.num_prompt_tokens) for r in load_traffic(path, "jsonl")]
    [('req-0', 3)]
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from os import PathLike
from typing import Any

from kvlab.traffic.mooncake import TrafficRequest, read_mooncake

__all__ = ["FORMATS", "load_traffic", "traffic_from_kv_events", "traffic_from_workload"]

FORMATS = ("mooncake", "jsonl", "kvtrace", "kvevents")
"""Input formats ``load_traffic`` (and ``kvlab whatif --format``) read."""


def traffic_from_workload(workload: Any) -> list[TrafficRequest]:
    """A kvlab ``Workload``'s requests as TrafficRequests (prompt token ids), by arrival step.

    Args:
        workload: A ``kvlab.compare.Workload``.

    Returns:
        One request each, sorted by ``arrival_step`` (stable); arrival_ms = arrival_step.
    """
    reqs = sorted(workload.requests, key=lambda r: r.arrival_step)
    return [
        TrafficRequest(
            r.request_id,
            float(r.arrival_step),
            len(r.prompt_token_ids),
            r.max_tokens,
            prompt_token_ids=tuple(r.prompt_token_ids),
        )
        for r in reqs
    ]


def traffic_from_kv_events(batches: Iterable[tuple[int, Any]]) -> list[TrafficRequest]:
    """Requests implied by KV-event batches (see the module docstring).

    Args:
        batches: ``(seq, KVEventBatch)`` in publish order (``read_kv_event_messages``).

    Returns:
        One request per BlockStored of group 0 on the GPU, ids ``ev-<index>``.

    Raises:
        ValueError: If two events give different block sizes, or a block size is not an
            int >= 1 (naming the batch's position and seq).
    """
    from kvlab.kv_events import external_hash_bytes

    ids: dict[bytes, int] = {}
    chain_of: dict[bytes, tuple[int, ...]] = {}
    reqs: list[TrafficRequest] = []
    block_size: int | None = None
    t0: float | None = None
    for n, (seq, batch) in enumerate(batches, start=1):
        t0 = float(batch.ts) if t0 is None else t0
        for event in batch.events:
            if type(event).__name__ != "BlockStored" or event.group_idx not in (None, 0):
                continue
            if event.medium not in (None, "GPU") or not event.block_hashes:
                continue
            bs = event.block_size
            if isinstance(bs, bool) or not isinstance(bs, int) or bs < 1:
                raise ValueError(f"batch {n} (seq {seq}): block_size must be an int >= 1, "
                                 f"got {bs!r}")  # fmt: skip
            if block_size is not None and bs != block_size:
                raise ValueError(f"batch {n} (seq {seq}): block_size {bs} after {block_size}; "
                                 "allowed: one block size per recording")  # fmt: skip
            block_size = bs
            parent = event.parent_block_hash
            chain = chain_of.get(external_hash_bytes(parent), ()) if parent is not None else ()
            for h in event.block_hashes:
                key = external_hash_bytes(h)
                chain = (*chain, ids.setdefault(key, len(ids)))
                chain_of[key] = chain
            reqs.append(TrafficRequest(f"ev-{len(reqs)}", (float(batch.ts) - t0) * 1000.0,
                                       len(chain) * bs, 1, hash_ids=chain,
                                       hash_block_size=bs))  # fmt: skip
    return reqs


def load_traffic(
    path: str | PathLike[str],
    fmt: str = "mooncake",
    limit: int | None = None,
    tokenize: Callable[[str], list[int]] | None = None,
) -> list[TrafficRequest]:
    """Read a traffic file in any of FORMATS (see the module docstring).

    Args:
        path: The file.
        fmt: One of FORMATS.
        limit: Keep only the first ``limit`` requests (None = all).
        tokenize: Turns text prompts of a ``jsonl`` file into token ids.

    Returns:
        The requests, in arrival order.

    Raises:
        ValueError: Unknown format; or, naming the file, the first bad line (or batch) and
            what is allowed; or a file holding no request.
        FileNotFoundError: If the file does not exist.
        ImportError: For a ``.kvev`` recording without msgspec.
    """
    if fmt not in FORMATS:
        raise ValueError(f"unknown format {fmt!r}; allowed: {', '.join(FORMATS)}")
    if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 1):
        raise ValueError(f"limit must be an int >= 1 (requests) or None, got {limit!r}")
    if fmt == "mooncake":
        reqs = read_mooncake(path, limit)
    else:
        try:
            reqs = _read_other(path, fmt, tokenize)
        except ValueError as exc:
            msg = str(exc)
            raise ValueError(msg if msg.startswith(str(path)) else f"{path}: {msg}") from None
    if not reqs:
        raise ValueError(f"{path}: no request in this {fmt} file")
    return reqs if limit is None else reqs[:limit]


def _read_other(path: str | PathLike[str], fmt: str, tokenize: Any) -> list[TrafficRequest]:
    from kvlab.compare import from_jsonl, from_trace
    from kvlab.kv_events import read_kv_event_messages

    if fmt == "jsonl":
        return traffic_from_workload(from_jsonl(path, tokenize=tokenize))
    if fmt == "kvtrace":
        return traffic_from_workload(from_trace(str(path)))
    return traffic_from_kv_events(read_kv_event_messages(path))
