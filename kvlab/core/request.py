"""A request as the KV-cache manager sees it: token ids, progress, and block hashes.

Mirrors: vllm/v1/request.py::Request, ::RequestStatus and ::StreamingUpdate. The engine-side
records vLLM's scheduler keeps on a request (events, prefill stats, finish reasons, the
streaming queue; ``kvlab.core.request_engine``) are kept so vLLM's scheduler runs on kvlab's
Request. Structured output is bookkeeping only: such a request waits in
WAITING_FOR_STRUCTURED_OUTPUT_GRAMMAR until a grammar is set on it (kvlab compiles none).

``block_hashes`` holds one hash per full block of ``all_token_ids`` (at the hasher's block
size), computed at construction and extended whenever output tokens complete a block::

    all_token_ids  [p0 p1 p2 p3][p4 p5 o0 o1][o2 ..      (block_size 4, p = prompt, o = output)
    block_hashes    H0           H1           (o2's block is not full yet)

Examples:
    >>> from kvlab.core.kv_cache_utils import get_request_block_hasher, init_none_hash, sha256
    >>> init_none_hash(sha256)
    >>> req = Request("r0", [1, 2, 3, 4, 5, 6], SamplingParams(max_tokens=4), None,
    ...               block_hasher=get_request_block_hasher(4, sha256))
    >>> len(req.block_hashes), req.num_tokens
    (1, 6)
    >>> req.append_output_token_ids([7, 8]); len(req.block_hashes)
    2
"""

from __future__ import annotations

import enum
import time
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from kvlab.core.request_engine import (
    EngineCoreEvent,
    EngineCoreEventType,
    FinishReason,
    PrefillStats,
    StructuredOutputRequest,
)
from kvlab.core.request_params import (
    ConstantList,
    LoRARequest,
    MultiModalFeatureSpec,
    PlaceholderRange,
    PoolingParams,
    SamplingParams,
)

if TYPE_CHECKING:
    from kvlab.core.kv_cache_utils import BlockHash

__all__ = [
    "ConstantList",
    "EngineCoreEvent",
    "EngineCoreEventType",
    "FinishReason",
    "LoRARequest",
    "MultiModalFeatureSpec",
    "PlaceholderRange",
    "PoolingParams",
    "PrefillStats",
    "Request",
    "RequestStatus",
    "SamplingParams",
    "StreamingUpdate",
    "StructuredOutputRequest",
]


@dataclass
class StreamingUpdate:
    """The new input of a resumable (streaming) request's next turn.

    Mirrors: vllm/v1/request.py::StreamingUpdate
    """

    mm_features: list[MultiModalFeatureSpec] | None
    prompt_token_ids: list[int] | None
    max_tokens: int
    arrival_time: float
    sampling_params: SamplingParams | None

    @classmethod
    def from_request(cls, request: Request) -> StreamingUpdate | None:
        """The update a resumable request carries, or None for a non-resumable one."""
        if not request.resumable:
            return None
        return cls(
            mm_features=request.mm_features,
            prompt_token_ids=request.prompt_token_ids,
            max_tokens=request.max_tokens,
            arrival_time=request.arrival_time,
            sampling_params=request.sampling_params,
        )


class RequestStatus(enum.IntEnum):
    """Where a request is in its life. Mirrors vllm/v1/request.py::RequestStatus (same order)."""

    WAITING = enum.auto()
    WAITING_FOR_STRUCTURED_OUTPUT_GRAMMAR = enum.auto()
    WAITING_FOR_REMOTE_KVS = enum.auto()
    WAITING_FOR_STREAMING_REQ = enum.auto()
    RUNNING = enum.auto()
    PREEMPTED = enum.auto()
    # NOTE: every status after PREEMPTED is a finished one.
    FINISHED_STOPPED = enum.auto()
    FINISHED_LENGTH_CAPPED = enum.auto()
    FINISHED_ABORTED = enum.auto()
    FINISHED_IGNORED = enum.auto()
    FINISHED_ERROR = enum.auto()
    FINISHED_REPETITION = enum.auto()

    def __str__(self) -> str:
        return self.name

    @staticmethod
    def is_finished(status: RequestStatus) -> bool:
        """True for the FINISHED_* statuses."""
        return status > RequestStatus.PREEMPTED

    @staticmethod
    def get_finished_reason(status: RequestStatus) -> FinishReason | None:
        """The FinishReason of ``status`` (IGNORED is LENGTH, as in OpenAI's API), else None."""
        return _FINISHED_REASON_MAP.get(status)


_FINISHED_REASON_MAP = {
    RequestStatus.FINISHED_STOPPED: FinishReason.STOP,
    RequestStatus.FINISHED_LENGTH_CAPPED: FinishReason.LENGTH,
    RequestStatus.FINISHED_ABORTED: FinishReason.ABORT,
    RequestStatus.FINISHED_IGNORED: FinishReason.LENGTH,
    RequestStatus.FINISHED_ERROR: FinishReason.ERROR,
    RequestStatus.WAITING_FOR_STREAMING_REQ: FinishReason.STOP,
    RequestStatus.FINISHED_REPETITION: FinishReason.REPETITION,
}


def _num_prompt_tokens(prompt_token_ids: list[int] | None, prompt_embeds: Any) -> int:
    """len(prompt_token_ids) or len(prompt_embeds); both given must agree (vLLM's rule)."""
    if prompt_token_ids is None:
        if prompt_embeds is None:
            raise ValueError("Neither prompt_token_ids nor prompt_embeds were defined.")
        return len(prompt_embeds)
    if prompt_embeds is not None and len(prompt_embeds) != len(prompt_token_ids):
        raise ValueError(
            f"Prompt token ids and prompt embeds had different lengths "
            f"prompt_token_ids={len(prompt_token_ids)} prompt_embeds={len(prompt_embeds)}"
        )
    return len(prompt_token_ids)


_ONLY_INT = frozenset({int})


def guard_request_init(
    request_id: Any, prompt_token_ids: Any, sampling_params: Any, pooling_params: Any
) -> list[int] | None:
    """Request(): a str id, plain-int token ids, params with max_tokens (kvlab's guard).

    NOTE: vLLM's Request takes any id, but EngineCore.add_request refuses a non-str one before
    it reaches the scheduler; kvlab has no engine core in front of its managers, and an int id
    would later mix with its str twin ("5") and make the trace unsavable. Token ids must be
    plain ints: a numpy int or a float hashes differently from the same int, so two equal
    prompts would silently miss each other's cached blocks. Negative ids are allowed (vLLM's
    multimodal placeholders are -1).

    Returns:
        The prompt as a list (a tuple or range becomes one), or None.

    Raises:
        TypeError: A non-str request_id, or prompt_token_ids that are not a sequence of plain
            int token ids.
        ValueError: Neither sampling nor pooling params, or sampling params without max_tokens.
    """
    if not isinstance(request_id, str):
        raise TypeError(
            f"request_id must be a string, got {type(request_id)} {request_id!r:.60} "
            "(as vLLM's EngineCore.add_request; use str(...))"
        )
    if prompt_token_ids is not None:
        if isinstance(prompt_token_ids, (str, bytes)) or not isinstance(prompt_token_ids, Sequence):
            raise TypeError(
                "prompt_token_ids must be a list of int token ids, or None with prompt_embeds; "
                f"got {type(prompt_token_ids).__name__} {prompt_token_ids!r:.60}"
                + (" (a numpy array: pass .tolist())" if hasattr(prompt_token_ids, "tolist") else "")
            )
        if not _ONLY_INT.issuperset(map(type, prompt_token_ids)):
            i, t = next((i, t) for i, t in enumerate(prompt_token_ids) if type(t) is not int)
            raise TypeError(
                f"prompt_token_ids[{i}] is {type(t).__name__} {t!r:.60}; allowed: token ids as "
                "plain Python ints"
            )
    if pooling_params is None and sampling_params is None:
        raise ValueError("sampling_params and pooling_params can't both be unset")
    if pooling_params is None and sampling_params.max_tokens is None:
        raise ValueError(f"request {request_id}: sampling_params.max_tokens must be set")
    if prompt_token_ids is not None and prompt_token_ids.__class__ is not list:
        return list(prompt_token_ids)  # a tuple or range works as a list would
    return prompt_token_ids


class Request:
    """One request's tokens, progress and block hashes.

    Mirrors: vllm/v1/request.py::Request (same constructor keywords; unused ones are kept so
    code written for vLLM runs, and ignored).

    Args:
        request_id: Unique id.
        prompt_token_ids: The prompt (token ids), or None with prompt_embeds.
        sampling_params: For generation (max_tokens, prompt_logprobs, ...); or None with
            pooling_params.
        pooling_params: For pooling models (max_tokens is then 1).
        arrival_time: Seconds since the epoch (default: now); orders equal priorities.
        prompt_embeds: [num_prompt_tokens, hidden] torch tensor or numpy array, or None;
            hashed into block keys.
        mm_features: Multimodal items sorted by mm_position.offset.
        lora_request: The LoRA adapter, or None.
        cache_salt: Salt hashed into the first block (isolates tenants' caches).
        priority: Lower runs first under priority scheduling.
        block_hasher: ``hasher(request) -> new block hashes`` (get_request_block_hasher), or
            None for no hashing (prefix caching off).

    Raises:
        TypeError: A request_id that is not a str (vLLM's EngineCore.add_request refuses it
            too), or prompt_token_ids that are not a sequence of plain int token ids (a bare
            str, floats, None items, bools, numpy ints).
        ValueError: If both sampling_params and pooling_params are None, max_tokens is unset,
            or there is no prompt.
    """

    def __init__(
        self,
        request_id: str,
        prompt_token_ids: list[int] | None,
        sampling_params: SamplingParams | None,
        pooling_params: PoolingParams | None,
        client_index: int = 0,
        arrival_time: float | None = None,
        prompt_embeds: Any = None,
        prompt_is_token_ids: list[bool] | None = None,
        mm_features: list[MultiModalFeatureSpec] | None = None,
        lora_request: LoRARequest | None = None,
        cache_salt: str | None = None,
        priority: int = 0,
        trace_headers: Mapping[str, str] | None = None,
        block_hasher: Callable[[Request], list[BlockHash]] | None = None,
        resumable: bool = False,
        reasoning_ended: bool | None = None,
        reasoning_parser_kwargs: dict[str, Any] | None = None,
        abort_immediately: bool = False,
    ) -> None:
        prompt_token_ids = guard_request_init(request_id, prompt_token_ids, sampling_params, pooling_params)
        self.request_id = request_id
        self.client_index = client_index
        self.priority = priority
        self.sampling_params = sampling_params
        self.pooling_params = pooling_params
        self.lora_request = lora_request
        self.structured_output_request = StructuredOutputRequest.from_sampling_params(sampling_params)
        if self.structured_output_request is not None:
            self.structured_output_request.reasoning_ended = reasoning_ended
            self.structured_output_request.reasoning_parser_kwargs = reasoning_parser_kwargs
        self.arrival_time = arrival_time if arrival_time is not None else time.time()

        self.status = RequestStatus.WAITING
        self.events: list[EngineCoreEvent] = []
        self.stop_reason: int | str | None = None

        # P/D: the KV connector's transfer parameters.
        self.kv_transfer_params: dict[str, Any] | None = None

        if pooling_params is not None:
            # Pooling models produce one output.
            self.max_tokens = 1
        elif sampling_params is not None:
            assert sampling_params.max_tokens is not None
            self.max_tokens = sampling_params.max_tokens
            if self.structured_output_request is not None:
                self.status = RequestStatus.WAITING_FOR_STRUCTURED_OUTPUT_GRAMMAR

            if sampling_params.extra_args is not None:
                self.kv_transfer_params = sampling_params.extra_args.get("kv_transfer_params")
        else:
            raise ValueError("sampling_params and pooling_params can't both be unset")

        self.prompt_token_ids = prompt_token_ids
        self.prompt_embeds = prompt_embeds
        self.prompt_is_token_ids = prompt_is_token_ids
        # NOTE: per-(start, end) block hash of prompt embeds, filled by block hashing.
        self._prompt_embeds_per_block_hashes: dict[tuple[int, int], bytes] = {}
        self.num_prompt_tokens = _num_prompt_tokens(prompt_token_ids, prompt_embeds)
        self._output_token_ids: list[int] = []
        self._all_token_ids: list[int] = (
            self.prompt_token_ids.copy() if self.prompt_token_ids is not None else [0] * self.num_prompt_tokens
        )

        # Async scheduling.
        self.num_output_placeholders = 0
        self.async_tokens_to_discard = 0

        self.spec_token_ids: list[int] = []
        self.num_computed_tokens = 0
        self.cache_salt: str | None = cache_salt

        self.mm_features: list[MultiModalFeatureSpec] = mm_features or []

        # NOTE: read-only views; tokens enter only through append_output_token_ids so that
        # the two lists and block_hashes stay in step.
        self.output_token_ids = ConstantList(self._output_token_ids)
        self.all_token_ids = ConstantList(self._all_token_ids)
        self.trace_headers = trace_headers

        # True while the request is scheduled as a non-final prefill chunk.
        self.is_prefill_chunk = False

        # NaNs in the logits; > 0 means a corrupted output.
        self.num_nans_in_logits = 0

        self.num_preemptions = 0

        self.prefill_stats: PrefillStats | None = PrefillStats()

        self.block_hashes: list[BlockHash] = []
        # The hasher is stored unbound (no Request -> partial -> Request reference cycle).
        self._block_hasher: Callable[[Request], list[BlockHash]] | None = block_hasher
        self.update_block_hashes()

        self.skip_reading_prefix_cache = self.get_skip_reading_prefix_cache()

        # Streaming sessions.
        self.resumable = resumable
        # A None entry in the queue means finished.
        self.streaming_queue: deque[StreamingUpdate | None] | None = None

        # Abort right after admission, so the connector's request_finished hook runs.
        self.abort_immediately = abort_immediately
        # NOTE: kvlab only: the prefix-cache hit of the first admission (tokens), -1 until the
        # scheduler admits it (kvlab's scheduler reports it as vLLM's num_cached_tokens).
        self.num_cached_tokens = -1

    @classmethod
    def from_engine_core_request(
        cls, request: Any, block_hasher: Callable[[Request], list[BlockHash]] | None
    ) -> Request:
        """A Request from the fields of vLLM's EngineCoreRequest (same names).

        Mirrors: vllm/v1/request.py::Request.from_engine_core_request.
        """
        names = ("request_id", "client_index", "prompt_token_ids", "prompt_embeds",
                 "prompt_is_token_ids", "mm_features", "sampling_params", "pooling_params",
                 "arrival_time", "lora_request", "cache_salt", "priority", "trace_headers",
                 "resumable", "reasoning_ended", "reasoning_parser_kwargs", "abort_immediately")
        return cls(**{name: getattr(request, name) for name in names}, block_hasher=block_hasher)

    @property
    def use_structured_output(self) -> bool:
        """Whether the request has a structured-output constraint (a StructuredOutputRequest)."""
        return self.structured_output_request is not None

    def get_finished_reason(self) -> FinishReason | None:
        """The FinishReason of a finished status (None while running or waiting)."""
        return RequestStatus.get_finished_reason(self.status)

    def record_event(self, event_type: Any, timestamp: float | None = None) -> None:
        """Append an EngineCoreEvent (``time.monotonic()`` now unless ``timestamp`` is given)."""
        self.events.append(EngineCoreEvent.new_event(event_type, timestamp))

    def take_events(self) -> list[EngineCoreEvent] | None:
        """The recorded events, emptied; None if there were none."""
        if not self.events:
            return None
        events, self.events = self.events, []
        return events

    def take_prefill_stats(self) -> PrefillStats | None:
        """The prefill stats once (None afterwards)."""
        stats, self.prefill_stats = self.prefill_stats, None
        return stats

    def append_output_token_ids(self, token_ids: int | list[int]) -> None:
        """Append generated token(s) and hash any block they complete.

        Args:
            token_ids: One token id or a list of them.
        """
        if isinstance(token_ids, int):
            self._output_token_ids.append(token_ids)
            self._all_token_ids.append(token_ids)
        else:
            self._output_token_ids.extend(token_ids)
            self._all_token_ids.extend(token_ids)
        self.update_block_hashes()

    def update_block_hashes(self) -> None:
        """Extend block_hashes with the hashes of newly full blocks (no-op without a hasher)."""
        if self._block_hasher is not None:
            self.block_hashes.extend(self._block_hasher(self))

    @property
    def num_tokens(self) -> int:
        """Prompt + output tokens (tokens)."""
        return len(self._all_token_ids)

    @property
    def num_tokens_with_spec(self) -> int:
        """num_tokens plus speculative draft tokens (tokens)."""
        return len(self._all_token_ids) + len(self.spec_token_ids)

    @property
    def num_output_tokens(self) -> int:
        """Generated tokens (tokens)."""
        return len(self._output_token_ids)

    @property
    def num_encoder_inputs(self) -> int:
        """Multimodal items of the request."""
        return len(self.mm_features)

    @property
    def has_encoder_inputs(self) -> bool:
        """Whether the request has multimodal items."""
        return self.num_encoder_inputs > 0

    def get_num_encoder_embeds(self, input_id: int) -> int:
        """Encoder embeddings of multimodal item ``input_id``.

        Raises:
            IndexError: If there is no such item.
        """
        if not 0 <= input_id < len(self.mm_features):
            raise IndexError(
                f"input_id {input_id} out of range for {len(self.mm_features)} mm items"
            )
        return self.mm_features[input_id].mm_position.get_num_embeds()

    def get_skip_reading_prefix_cache(self) -> bool:
        """The sampling (else pooling) params' skip_reading_prefix_cache, if set; else False."""
        if (
            self.sampling_params is not None
            and self.sampling_params.skip_reading_prefix_cache is not None
        ):
            return self.sampling_params.skip_reading_prefix_cache
        if (
            self.pooling_params is not None
            and self.pooling_params.skip_reading_prefix_cache is not None
        ):
            return self.pooling_params.skip_reading_prefix_cache
        return False

    def is_finished(self) -> bool:
        """True once the status is a FINISHED_* one."""
        return RequestStatus.is_finished(self.status)

    def __lt__(self, other: Request) -> bool:
        """Priority order: priority, then arrival_time, then request_id, then identity."""
        if self.priority != other.priority:
            return self.priority < other.priority
        if self.arrival_time != other.arrival_time:
            return self.arrival_time < other.arrival_time
        if self.request_id != other.request_id:
            return self.request_id < other.request_id
        return id(self) < id(other)

    def __repr__(self) -> str:
        return (
            f"Request(request_id={self.request_id!r}, num_tokens={self.num_tokens}, "
            f"num_computed_tokens={self.num_computed_tokens}, status={self.status})"
        )
