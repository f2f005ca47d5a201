"""Workloads: token-id requests that drive the three caches, and generators for common shapes.

A workload is a list of ``WorkloadRequest`` (prompt token ids, output length, arrival step, and
optionally the output token ids and a request it must wait for). Output tokens are fixed in
advance (no model runs), so every cache sees exactly the same tokens; a multi-turn chat's next
prompt contains the previous turn's outputs.

Generators (all deterministic for a given ``seed``; token ids drawn from [1000, 30000)):

=======================  ==================================================================
shared_system_prompt     one system prompt, many different user messages
multi_turn_chat          conversations; turn k+1 = turn k's prompt + its answer + a new message
rag                      a system prompt, then k documents from a shared set in random order
few_shot                 an instruction and k solved examples (fixed order), then a question
=======================  ==================================================================

``kvlab.compare.workload_io`` reads workloads from JSONL files and saved kvlab traces.

Examples:
    >>> w = shared_system_prompt(num_requests=3, system_len=32, user_len=8, max_tokens=4)
    >>> [len(r.prompt_token_ids) for r in w.requests], w.requests[1].arrival_step
    ([40, 40, 40], 1)
"""

from __future__ import annotations

import zlib
from collections.abc import Iterable
from dataclasses import dataclass, field

import numpy as np

__all__ = [
    "Workload",
    "WorkloadRequest",
    "few_shot",
    "multi_turn_chat",
    "rag",
    "shared_system_prompt",
]

_LOW, _HIGH = 1000, 30000


def _planned_outputs(request_id: str, n: int) -> tuple[int, ...]:
    rng = np.random.default_rng(zlib.crc32(request_id.encode()))
    return tuple(int(t) for t in rng.integers(_LOW, _HIGH, n))


@dataclass(frozen=True)
class WorkloadRequest:
    """One request of a workload.

    Args:
        request_id: Unique id.
        prompt_token_ids: The prompt (token ids), at least one.
        max_tokens: Output tokens to generate (tokens), >= 1.
        arrival_step: First driver step it may be admitted (steps), >= 0.
        output_token_ids: The tokens it will "generate"; None = derived from request_id.
        depends_on: A request that must finish first (it then arrives one step later at the
            earliest), or None.

    Raises:
        ValueError: If a field is out of range or output_token_ids has the wrong length.
        TypeError: If a token id is not an int.
    """

    request_id: str
    prompt_token_ids: tuple[int, ...]
    max_tokens: int
    arrival_step: int = 0
    output_token_ids: tuple[int, ...] | None = None
    depends_on: str | None = None

    def __post_init__(self) -> None:
        prompt = tuple(self.prompt_token_ids)
        if not prompt:
            raise ValueError(f"request {self.request_id!r}: prompt_token_ids is empty")
        _check_tokens(self.request_id, prompt)
        for name, low in (("max_tokens", 1), ("arrival_step", 0)):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or v < low:
                raise ValueError(f"request {self.request_id!r}: {name} must be an int >= {low}, "
                                 f"got {v!r}")  # fmt: skip
        outputs = self.output_token_ids
        if outputs is None:
            outputs = _planned_outputs(self.request_id, self.max_tokens)
        outputs = tuple(outputs)
        _check_tokens(self.request_id, outputs)
        if len(outputs) != self.max_tokens:
            raise ValueError(
                f"request {self.request_id!r}: {len(outputs)} output_token_ids for "
                f"max_tokens={self.max_tokens}"
            )
        object.__setattr__(self, "prompt_token_ids", prompt)
        object.__setattr__(self, "output_token_ids", outputs)


def _check_tokens(request_id: str, tokens: Iterable[int]) -> None:
    bad = [t for t in tokens if isinstance(t, bool) or not isinstance(t, int) or t < 0]
    if bad:
        raise TypeError(f"request {request_id!r}: token ids must be ints >= 0, got {bad[:3]!r}")


@dataclass
class Workload:
    """A named list of requests.

    Args:
        name: Short name (shown in reports).
        requests: The requests; ids must be unique and every depends_on must name one of them.
        description: One line on what it exercises.

    Raises:
        ValueError: On duplicate ids, unknown or cyclic dependencies.
    """

    name: str
    requests: list[WorkloadRequest] = field(default_factory=list)
    description: str = ""

    def __post_init__(self) -> None:
        ids = [r.request_id for r in self.requests]
        if len(set(ids)) != len(ids):
            dup = sorted({i for i in ids if ids.count(i) > 1})
            raise ValueError(f"workload {self.name!r}: duplicate request ids {dup[:5]}")
        known = set(ids)
        for r in self.requests:
            if r.depends_on is not None and r.depends_on not in known:
                raise ValueError(f"request {r.request_id!r} depends on unknown {r.depends_on!r}")
        by_id = {r.request_id: r for r in self.requests}
        for r in self.requests:
            seen, cur = set(), r
            while cur.depends_on is not None:
                if cur.request_id in seen:
                    raise ValueError(
                        f"workload {self.name!r}: dependency cycle at {r.request_id!r}"
                    )
                seen.add(cur.request_id)
                cur = by_id[cur.depends_on]

    @property
    def num_prompt_tokens(self) -> int:
        """Prompt tokens over all requests (tokens)."""
        return sum(len(r.prompt_token_ids) for r in self.requests)

    def __len__(self) -> int:
        return len(self.requests)


def _tokens(rng: np.random.Generator, n: int) -> tuple[int, ...]:
    return tuple(int(t) for t in rng.integers(_LOW, _HIGH, n))


def shared_system_prompt(
    num_requests: int = 16,
    system_len: int = 256,
    user_len: int = 48,
    max_tokens: int = 32,
    arrival_every: int = 1,
    seed: int = 0,
) -> Workload:
    """Every request is the same system prompt followed by its own user message.

    Args:
        num_requests: Requests.
        system_len: Shared prefix (tokens).
        user_len: Per-request suffix (tokens).
        max_tokens: Output tokens per request.
        arrival_every: Steps between arrivals (0 = all at step 0).
        seed: RNG seed.
    """
    rng = np.random.default_rng(seed)
    system = _tokens(rng, system_len)
    reqs = [
        WorkloadRequest(f"sys-{i}", system + _tokens(rng, user_len), max_tokens, i * arrival_every)
        for i in range(num_requests)
    ]
    return Workload("shared-system-prompt", reqs, f"{system_len}-token system prompt shared")


def multi_turn_chat(
    num_conversations: int = 4,
    num_turns: int = 4,
    system_len: int = 64,
    user_len: int = 32,
    max_tokens: int = 24,
    seed: int = 0,
) -> Workload:
    """Conversations: each turn's prompt is the previous prompt + its answer + a new message.

    Turn k+1 depends on turn k (it arrives the step after turn k finishes); conversations start
    one step apart and share a system prompt.

    Args:
        num_conversations: Conversations.
        num_turns: Turns per conversation.
        system_len: Shared system prompt (tokens).
        user_len: Each user message (tokens).
        max_tokens: Each answer (tokens).
        seed: RNG seed.
    """
    rng = np.random.default_rng(seed)
    system = _tokens(rng, system_len)
    reqs = []
    for c in range(num_conversations):
        history: tuple[int, ...] = system
        prev = None
        for t in range(num_turns):
            rid = f"chat{c}-t{t}"
            prompt = history + _tokens(rng, user_len)
            req = WorkloadRequest(rid, prompt, max_tokens, c, _tokens(rng, max_tokens), prev)
            reqs.append(req)
            history, prev = prompt + tuple(req.output_token_ids or ()), rid
    return Workload("multi-turn-chat", reqs, f"{num_conversations} chats x {num_turns} turns")


def rag(
    num_requests: int = 16,
    num_docs: int = 6,
    docs_per_request: int = 3,
    doc_len: int = 128,
    system_len: int = 32,
    query_len: int = 24,
    max_tokens: int = 16,
    arrival_every: int = 1,
    seed: int = 0,
) -> Workload:
    """Retrieval-augmented prompts: a system prompt, ``docs_per_request`` shared documents in a
    random order, then a query. Prefix caching reuses a document only when every document before
    it is the same, in the same order; a radix tree can reuse it mid-block, a block cache only in
    whole blocks.

    Args:
        num_requests: Requests.
        num_docs: Documents in the shared corpus.
        docs_per_request: Documents per prompt (<= num_docs).
        doc_len: Tokens per document.
        system_len: Shared system prompt (tokens).
        query_len: Per-request query (tokens).
        max_tokens: Output tokens per request.
        arrival_every: Steps between arrivals.
        seed: RNG seed.

    Raises:
        ValueError: If docs_per_request > num_docs.
    """
    if docs_per_request > num_docs:
        raise ValueError(f"docs_per_request ({docs_per_request}) > num_docs ({num_docs})")
    rng = np.random.default_rng(seed)
    system = _tokens(rng, system_len)
    docs = [_tokens(rng, doc_len) for _ in range(num_docs)]
    reqs = []
    for i in range(num_requests):
        picked = rng.choice(num_docs, size=docs_per_request, replace=False)
        body = tuple(t for d in picked.tolist() for t in docs[d])
        prompt = system + body + _tokens(rng, query_len)
        reqs.append(WorkloadRequest(f"rag-{i}", prompt, max_tokens, i * arrival_every))
    return Workload("rag", reqs, f"{docs_per_request} of {num_docs} documents, random order")


def few_shot(
    num_requests: int = 16,
    num_shots: int = 4,
    instruction_len: int = 48,
    example_len: int = 64,
    question_len: int = 24,
    max_tokens: int = 16,
    num_templates: int = 2,
    arrival_every: int = 1,
    seed: int = 0,
) -> Workload:
    """Few-shot prompts: an instruction and ``num_shots`` examples, then a question.

    ``num_templates`` distinct example sets exist (requests alternate between them), so the
    instruction is shared by all requests and the examples by every ``num_templates``-th one.

    Args:
        num_requests: Requests.
        num_shots: Examples per prompt.
        instruction_len: Shared instruction (tokens).
        example_len: Tokens per example.
        question_len: Per-request question (tokens).
        max_tokens: Output tokens per request.
        num_templates: Distinct example sets, >= 1.
        arrival_every: Steps between arrivals.
        seed: RNG seed.

    Raises:
        ValueError: If num_templates < 1.
    """
    if num_templates < 1:
        raise ValueError(f"num_templates must be >= 1, got {num_templates}")
    rng = np.random.default_rng(seed)
    instruction = _tokens(rng, instruction_len)
    templates = [
        tuple(t for _ in range(num_shots) for t in _tokens(rng, example_len))
        for _ in range(num_templates)
    ]
    reqs = [
        WorkloadRequest(
            f"shot-{i}",
            instruction + templates[i % num_templates] + _tokens(rng, question_len),
            max_tokens,
            i * arrival_every,
        )
        for i in range(num_requests)
    ]
    return Workload("few-shot", reqs, f"{num_shots} shots, {num_templates} example sets")
