"""The engine-side records on a Request that vLLM's scheduler reads and writes."""
from __future__ import annotations

from unittest.mock import patch

import pytest

from kvlab.core.request import (
    EngineCoreEventType,
    FinishReason,
    PrefillStats,
    Request,
    RequestStatus,
    SamplingParams,
    StreamingUpdate,
)


def _req(**kw):
    return Request("r0", [1, 2, 3], SamplingParams(max_tokens=4), None, arrival_time=5.0, **kw)


def test_finish_reasons_follow_vllms_map():
    req = _req()
    assert req.get_finished_reason() is None
    expected = {
        RequestStatus.FINISHED_STOPPED: FinishReason.STOP,
        RequestStatus.FINISHED_LENGTH_CAPPED: FinishReason.LENGTH,
        RequestStatus.FINISHED_ABORTED: FinishReason.ABORT,
        RequestStatus.FINISHED_IGNORED: FinishReason.LENGTH,
        RequestStatus.FINISHED_ERROR: FinishReason.ERROR,
        RequestStatus.FINISHED_REPETITION: FinishReason.REPETITION,
        RequestStatus.WAITING_FOR_STREAMING_REQ: FinishReason.STOP,
    }
    for status, reason in expected.items():
        req.status = status
        assert req.get_finished_reason() is reason
    assert [int(r) for r in FinishReason] == [0, 1, 2, 3, 4]
    assert [str(r) for r in FinishReason] == ["stop", "length", "abort", "error", "repetition"]


def test_events_are_taken_once_with_monotonic_time_read_at_call():
    req = _req()
    assert req.take_events() is None
    with patch("time.monotonic", return_value=42.0):
        req.record_event(EngineCoreEventType.QUEUED)
    req.record_event(EngineCoreEventType.SCHEDULED, 43.5)
    events = req.take_events()
    assert [(e.type, e.timestamp) for e in events] == [
        (EngineCoreEventType.QUEUED, 42.0), (EngineCoreEventType.SCHEDULED, 43.5)]
    assert req.take_events() is None


def test_prefill_stats_set_and_taken_once():
    req = _req()
    req.prefill_stats.set(num_prompt_tokens=10, num_local_cached_tokens=4,
                          num_external_cached_tokens=2)
    stats = req.take_prefill_stats()
    assert stats == PrefillStats(10, 4, 6, 4, 2) and req.take_prefill_stats() is None
    with pytest.raises(ValueError, match="exceed the prompt's 3"):
        PrefillStats().set(3, 2, 2)


def test_streaming_update_only_for_resumable_requests():
    assert StreamingUpdate.from_request(_req()) is None
    update = StreamingUpdate.from_request(_req(resumable=True))
    assert (update.prompt_token_ids, update.max_tokens, update.arrival_time) == ([1, 2, 3], 4, 5.0)
    assert _req().streaming_queue is None and not _req().use_structured_output


class _Constraint:
    def __init__(self, regex):
        self.regex = regex

    def all_constraints_none(self):
        return self.regex is None


def _params(regex):
    import dataclasses

    params = dataclasses.replace(SamplingParams(max_tokens=4))
    object.__setattr__(params, "structured_outputs", _Constraint(regex))
    return params


def test_structured_output_request_waits_for_its_grammar():
    from concurrent.futures import Future

    assert _req().structured_output_request is None
    plain = Request("r1", [1, 2], _params(None), None)  # a constraint with nothing set
    assert plain.structured_output_request is None and plain.status == RequestStatus.WAITING
    req = Request("r2", [1, 2], _params("[0-9]+"), None, reasoning_ended=True)
    so = req.structured_output_request
    assert req.use_structured_output and so.params.regex == "[0-9]+" and so.reasoning_ended
    assert req.status == RequestStatus.WAITING_FOR_STRUCTURED_OUTPUT_GRAMMAR
    assert so.grammar is None and so.is_grammar_ready  # nothing compiling, nothing compiled
    pending = Future()
    so.grammar = pending
    assert not so.is_grammar_ready and so.grammar is None
    pending.set_result("compiled")
    assert so.is_grammar_ready and so.grammar == "compiled"
