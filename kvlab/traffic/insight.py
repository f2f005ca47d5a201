"""Inside a what-if: the most reused prefixes, one request's hit explained, a recorded trace.

* ``top_prefixes`` counts, for every prefix (a request's first n full blocks), how many
  requests start with it, and keeps the *maximal* ones: a prefix whose one-block-longer
  extension is shared by exactly as many requests is reported as that longer chain instead.
  ``reuse_count`` = requests sharing it - 1 (the first one computes it, every later one could
  hit it: what an infinite cache reuses).
* ``record_vllm`` replays the traffic through kvlab.core's KVCacheManager (vLLM 0.22.1) at one
  capacity on the sequence clock with a recorder on: one step per request (step = request
  index), ready for ``save_trace``, ``kvlab trace show`` and the TracePlayer.
* ``explain_request`` records that replay up to one request and runs kvlab's ``explain`` on its
  ``get_computed_blocks`` call: the cap, each probe, the deciding miss, and what evicted the
  block that would have matched (the call, request and step that did it).

Examples:
    >>> from kvlab.traffic import prepare_blocks, read_mooncake_lines
    >>> b = prepare_blocks(read_mooncake_lines([
    ...     '{"timestamp": 0, "input_length": 1024, "output_length": 1, "hash_ids": [0, 1]}',
    ...     '{"timestamp": 1, "input_length": 1100, "output_length": 1, "hash_ids": [0, 1, 2]}',
    ...     '{"timestamp": 2, "input_length": 600, "output_length": 1, "hash_ids": [0, 3]}']), 512)
    >>> [(p.num_blocks, p.num_requests, p.reuse_count) for p in top_prefixes(b, 5)]
    [(1, 3, 2), (2, 2, 1)]
    >>> explain_request(b, 1024, 1).reason  # 1100 tokens need 3 blocks of 512: never fits
    'rejected'
    >>> explain_request(b, 1024, 2).reason, explain_request(b, 1024, 2).hit_tokens
    ('complete', 512)
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import pairwise
from typing import Any

from kvlab.i18n import _, use_language
from kvlab.traffic.blocks import BlockedTraffic
from kvlab.traffic.replay import ReplayResult, check_capacity, replay_sequence

__all__ = ["PrefixReuse", "RequestExplanation", "explain_request", "record_vllm", "top_prefixes"]


@dataclass(frozen=True)
class PrefixReuse:
    """One maximal shared prefix.

    Attributes:
        num_blocks: Its length (blocks of the traffic's block size).
        num_tokens: Its length (tokens).
        num_requests: Requests whose prompt starts with it.
        reuse_count: ``num_requests - 1``: requests that could hit it.
        first_request: Index of the first request holding it.
        key: The int key of its last block (``BlockedTraffic.keys``).
    """

    num_blocks: int
    num_tokens: int
    num_requests: int
    reuse_count: int
    first_request: int
    key: int


def top_prefixes(blocked: BlockedTraffic, k: int) -> list[PrefixReuse]:
    """The ``k`` most reused maximal prefixes (see the module docstring).

    Args:
        blocked: The traffic at one block size.
        k: How many (>= 1).

    Returns:
        At most ``k``, by reuse_count (most first), then longer first, then first seen;
        only prefixes shared by at least two requests.

    Raises:
        ValueError: If k is not an int >= 1.
    """
    if isinstance(k, bool) or not isinstance(k, int) or k < 1:
        raise ValueError(f"k must be an int >= 1, got {k!r}")
    count: dict[int, int] = {}
    depth: dict[int, int] = {}
    first: dict[int, int] = {}
    best_child: dict[int, int] = {}
    for i, keys in enumerate(blocked.keys):
        for d, key in enumerate(keys):
            count[key] = count.get(key, 0) + 1
            depth.setdefault(key, d + 1)
            first.setdefault(key, i)
    for keys in blocked.keys:
        for parent, child in pairwise(keys):
            best_child[parent] = max(best_child.get(parent, 0), count[child])
    # NOTE: each child is counted once per request holding it, so best_child only grows to
    # count[child]; a key is maximal when no child is shared by as many requests.
    found = [
        PrefixReuse(depth[key], depth[key] * blocked.block_size, n, n - 1, first[key], key)
        for key, n in count.items()
        if n >= 2 and best_child.get(key, 0) < n
    ]
    found.sort(key=lambda p: (-p.reuse_count, -p.num_blocks, p.first_request))
    return found[:k]


def record_vllm(
    blocked: BlockedTraffic,
    capacity_tokens: int,
    stop_after: int | None = None,
    progress: bool | None = False,
) -> ReplayResult:
    """Replay through vLLM's cache at one capacity with a recorder on (``.trace``).

    Args:
        blocked: The traffic at one block size.
        capacity_tokens: Pool size (tokens), at least one block.
        stop_after: Replay (and record) only the first ``stop_after`` requests.
        progress: tqdm bar: True always, None only on a terminal, False none.

    Returns:
        The ReplayResult; its ``trace`` has one step per request (step = request index).

    Raises:
        ValueError: If the capacity is below one block.
    """
    return replay_sequence(blocked, "vllm", capacity_tokens, record=True, progress=progress,
                           stop_after=stop_after)  # fmt: skip


@dataclass
class RequestExplanation:
    """One request's hit in vLLM at one capacity, and why it stopped (``str()`` renders it).

    Attributes:
        index: The request's position in the traffic.
        request_id: Its id.
        num_prompt_tokens: Its prompt (tokens).
        hit_tokens: Prompt tokens served from the prefix cache (tokens); 0 when rejected.
        rejected: Whether the request never fit the pool (its lookup ran, allocate_slots
            then failed), so the lookup's hit was not used.
        num_blocks: Blocks in the pool (blocks).
        explanation: kvlab's ``Explanation`` of its get_computed_blocks call.
    """

    index: int
    request_id: str
    num_prompt_tokens: int
    hit_tokens: int
    rejected: bool
    num_blocks: int
    explanation: Any

    @property
    def reason(self) -> str:
        """"rejected", or the Explanation's reason ("miss", "capped", "complete", ...)."""
        return "rejected" if self.rejected else self.explanation.reason

    def __str__(self) -> str:
        """Rendered in the explanation's language (its ``lang``; English when it has none)."""
        with use_language(getattr(self.explanation, "lang", "en")):
            head = _("request {index} ({request_id}): hit {hit} of {prompt} prompt tokens").format(
                index=self.index, request_id=self.request_id, hit=f"{self.hit_tokens:,}",
                prompt=f"{self.num_prompt_tokens:,}")
            if self.rejected:
                need = -(-self.num_prompt_tokens // self.explanation.block_size)
                head += _("; rejected: it needs {need} blocks, the pool has {num_blocks}, so the "
                          "lookup below went unused").format(need=need, num_blocks=self.num_blocks)
        return f"{head}\n{self.explanation}"


def explain_request(blocked: BlockedTraffic, capacity_tokens: int, index: int
                    ) -> RequestExplanation:  # fmt: skip
    """Why request ``index``'s prefix-cache hit stopped where it did, in vLLM at this capacity.

    Args:
        blocked: The traffic at one block size.
        capacity_tokens: Pool size (tokens).
        index: The request's position in the traffic (0-based).

    Returns:
        The RequestExplanation (kvlab's ``explain`` of its get_computed_blocks call, on a
        trace of requests 0..index).

    Raises:
        ValueError: If index is outside the traffic or the capacity is below one block.
    """
    from kvlab.trace import explain

    if isinstance(index, bool) or not isinstance(index, int) or not 0 <= index < len(blocked):
        raise ValueError(f"request index {index!r} outside the traffic; allowed: 0.."
                         f"{len(blocked) - 1}")  # fmt: skip
    capacity = check_capacity(capacity_tokens, blocked.block_size)
    res = record_vllm(blocked, capacity, stop_after=index + 1)
    req = blocked.requests[index]
    call = res.trace.calls("get_computed_blocks", request=req.request_id)[-1]
    hit = res.per_request_hit_tokens[index]
    rejected = _was_rejected(res.trace, req.request_id)
    return RequestExplanation(index, req.request_id, req.num_prompt_tokens, hit, rejected,
                              capacity // blocked.block_size, explain(res.trace, call))  # fmt: skip


def _was_rejected(trace: Any, request_id: str) -> bool:
    """Whether the request's allocate_slots returned None (recorded as allocated 0)."""
    calls = trace.calls("allocate_slots", request=request_id)
    return bool(calls) and not calls[-1].result.get("allocated")
