"""The engine-side records a Request carries: finish reasons, timestamped events, prefill stats.

Mirrors: vllm/v1/engine/__init__.py::{FinishReason, EngineCoreEventType, EngineCoreEvent},
vllm/v1/metrics/stats.py::PrefillStats and the bookkeeping
half of vllm/v1/structured_output/request.py::StructuredOutputRequest (a request waits for its
grammar; kvlab compiles no grammar: whoever does sets ``grammar``). vLLM's scheduler
reads and writes these on every request (``record_event``, ``take_events``,
``get_finished_reason``, ``prefill_stats.set``), so kvlab's Request has them too and vLLM's
scheduler runs on it unchanged. kvlab's own scheduler reports finish reasons as strings
(``kvlab.core.sched.get_finished_reason``); ``str(FinishReason.LENGTH)`` is the same string.

Examples:
    >>> FinishReason.LENGTH, str(FinishReason.LENGTH)
    (<FinishReason.LENGTH: 1>, 'length')
    >>> EngineCoreEvent.new_event(EngineCoreEventType.QUEUED, 12.5)
    EngineCoreEvent(type=<EngineCoreEventType.QUEUED: 1>, timestamp=12.5)
"""

from __future__ import annotations

import enum
import time
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass
from typing import Any

__all__ = [
    "EngineCoreEvent",
    "EngineCoreEventType",
    "FINISH_REASON_STRINGS",
    "FinishReason",
    "PrefillStats",
    "StructuredOutputRequest",
]

FINISH_REASON_STRINGS = ("stop", "length", "abort", "error", "repetition")


class FinishReason(enum.IntEnum):
    """Why a request finished (an int, as vLLM serialises it; ``str()`` gives the name).

    Mirrors: vllm/v1/engine/__init__.py::FinishReason.
    """

    STOP = 0
    LENGTH = 1
    ABORT = 2
    ERROR = 3
    REPETITION = 4

    def __str__(self) -> str:
        return FINISH_REASON_STRINGS[self.value]


class EngineCoreEventType(enum.IntEnum):
    """What happened to a request. Mirrors: vllm/v1/engine/__init__.py::EngineCoreEventType."""

    QUEUED = 1
    SCHEDULED = 2
    PREEMPTED = 3


@dataclass
class EngineCoreEvent:
    """A timestamped request event (``time.monotonic()`` seconds; same process only).

    Mirrors: vllm/v1/engine/__init__.py::EngineCoreEvent (a msgspec struct there).
    """

    type: Any  # EngineCoreEventType, kvlab's or vLLM's (both are IntEnums with the same values)
    timestamp: float

    @classmethod
    def new_event(cls, event_type: Any, timestamp: float | None = None) -> EngineCoreEvent:
        """An event now (``time.monotonic()``, read at call time) or at ``timestamp``."""
        return cls(event_type, time.monotonic() if timestamp is None else timestamp)


@dataclass
class PrefillStats:
    """How a scheduled prefill splits into computed and cached tokens (tokens).

    Mirrors: vllm/v1/metrics/stats.py::PrefillStats.
    """

    num_prompt_tokens: int = 0
    num_computed_tokens: int = 0
    num_cached_tokens: int = 0
    num_local_cached_tokens: int = 0
    num_external_cached_tokens: int = 0

    def set(
        self, num_prompt_tokens: int, num_local_cached_tokens: int, num_external_cached_tokens: int
    ) -> None:
        """Record a prefill of ``num_prompt_tokens``, some of them cached locally or remotely.

        Raises:
            ValueError: If the cached tokens exceed the prompt (vLLM asserts); nothing changes.
        """
        num_cached_tokens = num_local_cached_tokens + num_external_cached_tokens
        if num_cached_tokens > num_prompt_tokens:
            raise ValueError(
                f"cached tokens ({num_local_cached_tokens} local + {num_external_cached_tokens} "
                f"external) exceed the prompt's {num_prompt_tokens}"
            )
        self.num_prompt_tokens = num_prompt_tokens
        self.num_computed_tokens = num_prompt_tokens - num_cached_tokens
        self.num_cached_tokens = num_cached_tokens
        self.num_local_cached_tokens = num_local_cached_tokens
        self.num_external_cached_tokens = num_external_cached_tokens


@dataclass
class StructuredOutputRequest:
    """A request's structured-output constraint and, once compiled, its grammar.

    Mirrors: vllm/v1/structured_output/request.py::StructuredOutputRequest (the bookkeeping
    only: kvlab compiles no grammar). A request with one starts in
    WAITING_FOR_STRUCTURED_OUTPUT_GRAMMAR and the scheduler skips it until ``grammar`` is set
    (an object, or a Future that has resolved).
    """

    params: Any
    _grammar: Any = None
    reasoning_ended: bool | None = None
    reasoning_parser_kwargs: dict[str, Any] | None = None
    reasoner: Any = None

    @staticmethod
    def from_sampling_params(sampling_params: Any) -> StructuredOutputRequest | None:
        """A record if the params carry a constraint (vLLM's ``all_constraints_none`` rule)."""
        params = getattr(sampling_params, "structured_outputs", None)
        if not params or params.all_constraints_none():
            return None
        return StructuredOutputRequest(params=params)

    def _check_grammar_completion(self) -> bool:
        if isinstance(self._grammar, Future):
            try:
                self._grammar = self._grammar.result(timeout=0.0001)
            except FutureTimeout:
                return False
        return True

    @property
    def is_grammar_ready(self) -> bool:
        """False only while the grammar is a Future still being compiled."""
        return self._check_grammar_completion()

    @property
    def grammar(self) -> Any:
        """The compiled grammar, or None (not set, or its Future not done yet)."""
        return self._grammar if self._check_grammar_completion() else None

    @grammar.setter
    def grammar(self, grammar: Any) -> None:
        self._grammar = grammar
