"""Workloads from files: JSONL request lists, and the requests of a saved kvlab trace.

JSONL, one request per line (``request_id``, ``output_token_ids`` and ``depends_on`` optional;
a text ``prompt`` instead of ``prompt_token_ids`` needs a ``tokenize`` function)::

    {"prompt_token_ids": [1, 2, 3], "max_tokens": 8, "arrival_step": 0}
    {"request_id": "b", "prompt": "Hello", "max_tokens": 4, "arrival_step": 2}

A kvlab trace stores block hashes, not tokens. ``from_trace`` rebuilds token ids that share
exactly what the recorded requests shared: each block position whose hash the trace names
(a lookup inside ``get_computed_blocks``, or a ``BLOCK_STORED``) gets tokens derived from that
hash (the same hash -> the same tokens), every other position gets tokens of its own. Prompt
length and arrival step come from the request's first ``get_computed_blocks``; its length at
the end from its ``allocate_slots`` calls.

Examples:
    >>> w = from_jsonl_lines(['{"prompt_token_ids": [5, 6], "max_tokens": 2, "arrival_step": 1}'])
    >>> w.requests[0].request_id, w.requests[0].arrival_step
    ('req-0', 1)
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Iterator
from os import PathLike
from typing import Any

import numpy as np

from kvlab.compare.workloads import Workload, WorkloadRequest

__all__ = [
    "MAX_ARRIVAL_STEP",
    "MAX_LINE_CHARS",
    "MAX_REQUEST_TOKENS",
    "MAX_WORKLOAD_TOKENS",
    "from_jsonl",
    "from_jsonl_lines",
    "from_trace",
    "to_jsonl",
]

_HASHED_BASE = 10_000_000  # tokens of a block named by hash index h: BASE + h * B + j
_UNIQUE_BASE = 1_000_000_000  # tokens no other request shares


MAX_REQUEST_TOKENS = 1 << 20
"""Limit on one JSONL request's prompt plus max_tokens (tokens)."""
MAX_WORKLOAD_TOKENS = 1 << 22
"""Default limit on all requests' prompt plus max_tokens together (tokens)."""
MAX_ARRIVAL_STEP = 1 << 20
"""Limit on a JSONL request's arrival_step (steps)."""
MAX_LINE_CHARS = 32 << 20
"""Limit on one JSONL line (characters)."""


def from_jsonl_lines(
    lines: Iterable[str],
    name: str = "jsonl",
    tokenize: Callable[[str], list[int]] | None = None,
    max_total_tokens: int = MAX_WORKLOAD_TOKENS,
) -> Workload:
    """Parse JSONL lines (blank lines skipped) into a Workload.

    Every size is bounded before anything is allocated (a 40-byte line with ``max_tokens``
    10**9 would otherwise plan 10**9 output tokens): see MAX_REQUEST_TOKENS,
    MAX_ARRIVAL_STEP, MAX_LINE_CHARS and ``max_total_tokens``.

    Args:
        lines: The lines.
        name: Workload name.
        tokenize: Turns a text ``prompt`` into token ids (needed only for text prompts).
        max_total_tokens: Limit on prompt plus max_tokens over all requests (tokens).

    Raises:
        ValueError: Naming the line and what is allowed: bad JSON (or nested too deeply),
            missing keys, wrong types (prompt ids must be a list of ints >= 0), sizes over
            the limits, text without ``tokenize``; or no request at all.
    """
    reqs: list[WorkloadRequest] = []
    total = 0
    for n, line in enumerate(lines, start=1):
        if len(line) > MAX_LINE_CHARS:
            raise ValueError(f"line {n}: {len(line)} characters, over the limit of "
                             f"MAX_LINE_CHARS={MAX_LINE_CHARS}")  # fmt: skip
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as exc:
            raise ValueError(f"line {n}: not JSON ({exc.msg})") from None
        except RecursionError:
            raise ValueError(f"line {n}: JSON nested too deeply (allowed: one flat object "
                             "per line)") from None  # fmt: skip
        try:
            req = _request_from_obj(obj, len(reqs), tokenize, max_total_tokens - total)
        except (KeyError, TypeError, ValueError) as exc:
            raise ValueError(f"line {n}: {exc}") from None
        total += len(req.prompt_token_ids) + req.max_tokens
        reqs.append(req)
    if not reqs:
        raise ValueError(f"{name}: no requests (allowed: at least one JSON object line)")
    return Workload(name, reqs, f"{len(reqs)} requests from {name}")


def _token_list(value: Any, field: str) -> list[int]:
    if not isinstance(value, list):
        raise TypeError(f"{field} must be a JSON list of token ids (ints >= 0), "
                        f"got {type(value).__name__} {value!r:.60}")  # fmt: skip
    bad = [t for t in value if isinstance(t, bool) or not isinstance(t, int) or t < 0]
    if bad:
        raise TypeError(f"{field} must hold token ids (ints >= 0), got {bad[:3]!r:.60}")
    return value


def _bounded_int(obj: dict, field: str, low: int, high: int, default: int | None) -> int:
    value = obj.get(field, default)
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise ValueError(f"{field} must be an int in [{low}, {high}], got {value!r:.60}")
    return value


def _request_from_obj(obj: Any, index: int, tokenize: Any, budget: int) -> WorkloadRequest:
    if not isinstance(obj, dict):
        raise TypeError(f"expected an object, got {type(obj).__name__}")
    if "max_tokens" not in obj:
        raise ValueError("needs 'max_tokens'")
    max_tokens = _bounded_int(obj, "max_tokens", 1, MAX_REQUEST_TOKENS, None)
    if "prompt_token_ids" in obj:
        prompt = _token_list(obj["prompt_token_ids"], "prompt_token_ids")
    elif "prompt" in obj:
        if tokenize is None:
            raise ValueError("has a text 'prompt' but no tokenize function was given")
        if not isinstance(obj["prompt"], str):
            raise TypeError(f"prompt must be a string, got {type(obj['prompt']).__name__}")
        prompt = _token_list(list(tokenize(obj["prompt"])), "tokenized prompt")
    else:
        raise ValueError("needs 'prompt_token_ids' (or 'prompt' with a tokenizer)")
    if not prompt:
        raise ValueError("the prompt is empty (allowed: at least one token id)")
    size = len(prompt) + max_tokens
    if size > MAX_REQUEST_TOKENS:
        raise ValueError(f"prompt ({len(prompt)}) + max_tokens ({max_tokens}) = {size} tokens, "
                         f"over the limit of MAX_REQUEST_TOKENS={MAX_REQUEST_TOKENS}")  # fmt: skip
    if size > budget:
        raise ValueError(f"the workload exceeds max_total_tokens (prompt + max_tokens over all "
                         f"requests); this one needs {size}, {max(budget, 0)} left")  # fmt: skip
    outputs = obj.get("output_token_ids")
    if outputs is not None:
        outputs = _token_list(outputs, "output_token_ids")
    request_id = obj.get("request_id", f"req-{index}")
    if isinstance(request_id, bool) or not isinstance(request_id, (str, int)):
        raise TypeError(f"request_id must be a string (or int), got {request_id!r:.60}")
    depends_on = obj.get("depends_on")
    if depends_on is not None and not isinstance(depends_on, str):
        raise TypeError(f"depends_on must be a request_id string or null, got {depends_on!r:.60}")
    return WorkloadRequest(
        str(request_id),
        tuple(prompt),
        max_tokens,
        _bounded_int(obj, "arrival_step", 0, MAX_ARRIVAL_STEP, 0),
        None if outputs is None else tuple(outputs),
        depends_on,
    )


def from_jsonl(
    path: str | PathLike[str],
    tokenize: Callable[[str], list[int]] | None = None,
    max_total_tokens: int = MAX_WORKLOAD_TOKENS,
) -> Workload:
    """Read a JSONL workload file (see the module docstring and ``from_jsonl_lines``).

    Lines are read bounded (MAX_LINE_CHARS), so one huge line cannot exhaust memory.

    Raises:
        FileNotFoundError: If the file does not exist.
        ValueError: Naming the first bad line and what is allowed.
    """
    with open(path, encoding="utf-8") as f:
        return from_jsonl_lines(_bounded_lines(f), name=str(path), tokenize=tokenize,
                                max_total_tokens=max_total_tokens)  # fmt: skip


def _bounded_lines(f: Any) -> Iterator[str]:
    while True:
        line = f.readline(MAX_LINE_CHARS + 1)
        if not line:
            return
        yield line
        if len(line) > MAX_LINE_CHARS:
            return  # NOTE: from_jsonl_lines refuses it; never read the rest of that line


def to_jsonl(workload: Workload, path: str | PathLike[str]) -> None:
    """Write ``workload`` as JSONL (every field, output tokens included)."""
    with open(path, "w", encoding="utf-8") as f:
        for r in workload.requests:
            obj = {
                "request_id": r.request_id,
                "prompt_token_ids": list(r.prompt_token_ids),
                "max_tokens": r.max_tokens,
                "arrival_step": r.arrival_step,
                "output_token_ids": list(r.output_token_ids or ()),
            }
            if r.depends_on is not None:
                obj["depends_on"] = r.depends_on
            f.write(json.dumps(obj) + "\n")


# ---------------------------------------------------------------------------- traces
def _known_hashes(trace: Any) -> dict[int, dict[int, int]]:
    """request index -> {block position: hash index}, from group-0 stores and lookups."""
    from kvlab.trace import EventKind as K

    c = trace.cols
    known: dict[int, dict[int, int]] = {}
    for i in np.flatnonzero((c.kind == K.BLOCK_STORED) & (c.group == 0)).tolist():
        first, end, r = int(c.a[i]), int(c.b[i]), int(c.request[i])
        payload = trace.payload(i)
        n = len(payload) // 2
        if r >= 0 and n == end - first:  # NOTE: else null blocks were skipped
            for k, h in enumerate(payload[n:]):
                known.setdefault(r, {}).setdefault(first + k, h)
    for call in trace.calls("get_computed_blocks"):
        r = trace.tables.find_request(call.request) if call.request is not None else -1
        stop = call.end if call.end >= 0 else len(trace)
        pos = 0
        for i in range(call.begin + 1, stop):
            if c.kind[i] == K.LOOKED_UP and c.group[i] == 0 and r >= 0:
                known.setdefault(r, {}).setdefault(pos, int(c.a[i]))
                pos += 1
    return known


def _request_lengths(trace: Any) -> dict[str, tuple[int, int, int]]:
    """request_id -> (prompt tokens, arrival step, final tokens) from its calls."""
    out: dict[str, list[int]] = {}
    for call in trace.calls("get_computed_blocks"):
        if call.request is not None and call.request not in out:
            n = int(call.args["num_tokens"])
            out[call.request] = [n, call.step, n]
    for call in trace.calls("allocate_slots"):
        if call.request in out:
            a = call.args
            total = (a["num_computed_tokens"] + a["num_new_computed_tokens"]
                     + a["num_external_computed_tokens"] + a["num_new_tokens"])  # fmt: skip
            out[call.request][2] = max(out[call.request][2], int(total) + 1)
    return {r: (v[0], v[1], v[2]) for r, v in out.items()}


def from_trace(trace: Any, name: str | None = None) -> Workload:
    """Rebuild a workload from a kvlab Trace (or a path to a saved one); see the module doc.

    Args:
        trace: A ``kvlab.trace.Trace`` recorded from a KVCacheManager, or a file path.
        name: Workload name (default: "trace").

    Returns:
        One request per request that called ``get_computed_blocks``, arrival = that step.

    Raises:
        ValueError: If the trace names no block size or holds no get_computed_blocks call.
    """
    from kvlab.trace import Trace, load_trace

    if not isinstance(trace, Trace):
        trace = load_trace(trace)
    groups = trace.config.get("groups") or []
    block_size = trace.config.get("hash_block_size") or (
        groups[0]["block_size"] if groups else None
    )
    if not block_size:
        raise ValueError("the trace's config names no hash_block_size / block_size")
    lengths = _request_lengths(trace)
    if not lengths:
        raise ValueError("the trace has no get_computed_blocks call: no request to rebuild")
    known = _known_hashes(trace)
    reqs, unique = [], _UNIQUE_BASE
    for rid, (num_prompt, arrival, num_final) in lengths.items():
        slots = known.get(trace.tables.find_request(rid), {})
        tokens: list[int] = []
        for k in range(-(-num_final // block_size)):
            if k in slots:
                base = _HASHED_BASE + slots[k] * block_size
                tokens.extend(range(base, base + block_size))
            else:
                tokens.extend(range(unique, unique + block_size))
                unique += block_size
        tokens = tokens[:num_final]
        outputs = tuple(tokens[num_prompt:]) or (unique,)
        unique += 1
        reqs.append(
            WorkloadRequest(rid, tuple(tokens[:num_prompt]), len(outputs), arrival, outputs)
        )
    return Workload(name or "trace", reqs, f"{len(reqs)} requests rebuilt from a kvlab trace")
