"""Stop checks and small list helpers of the scheduler.

Mirrors: vllm/v1/core/sched/utils.py (check_stop, remove_all) and the finish-reason map of
vllm/v1/request.py. Left out: repetition detection.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from kvlab.core.request import Request, RequestStatus

__all__ = ["FINISH_REASONS", "check_stop", "get_finished_reason", "remove_all"]

FINISH_REASONS: dict[RequestStatus, str] = {
    RequestStatus.FINISHED_STOPPED: "stop",
    RequestStatus.FINISHED_LENGTH_CAPPED: "length",
    RequestStatus.FINISHED_ABORTED: "abort",
    RequestStatus.FINISHED_IGNORED: "length",
    RequestStatus.FINISHED_ERROR: "error",
    RequestStatus.FINISHED_REPETITION: "repetition",
}
"""Finished status -> the OpenAI-style finish reason. Mirrors vLLM's _FINISHED_REASON_MAP."""


def get_finished_reason(status: RequestStatus) -> str | None:
    """The finish reason of ``status`` ("stop", "length", "abort", ...), None if not finished."""
    return FINISH_REASONS.get(status)


def check_stop(request: Request, max_model_len: int) -> bool:
    """Decide whether the token just appended ends the request; set its status if so.

    Order of the checks (as vLLM): fewer than ``min_tokens`` outputs never stops; then the
    eos token; then a stop token (recorded in ``stop_reason``); then the length caps
    (``num_tokens >= max_model_len`` or ``num_output_tokens >= max_tokens``).

    Mirrors: vllm/v1/core/sched/utils.py::check_stop. Reads ``eos_token_id``,
    ``stop_token_ids`` and ``min_tokens`` from ``request.sampling_params`` when present
    (None, none and 0 otherwise).

    Args:
        request: A request with at least one output token.
        max_model_len: Longest sequence allowed (tokens).

    Returns:
        True if the request is now finished (status FINISHED_STOPPED or _LENGTH_CAPPED).
    """
    params: Any = request.sampling_params
    if request.num_output_tokens < (getattr(params, "min_tokens", 0) or 0):
        return False
    last_token_id = request.output_token_ids[-1]
    if last_token_id == getattr(params, "eos_token_id", None):
        request.status = RequestStatus.FINISHED_STOPPED
        return True
    if last_token_id in (getattr(params, "stop_token_ids", None) or ()):
        request.status = RequestStatus.FINISHED_STOPPED
        request.stop_reason = last_token_id
        return True
    if request.num_tokens >= max_model_len or request.num_output_tokens >= request.max_tokens:
        request.status = RequestStatus.FINISHED_LENGTH_CAPPED
        return True
    return False


def remove_all(lst: list, items_to_remove: Iterable) -> list:
    """``lst`` without the items in ``items_to_remove`` (compared by identity/equality).

    Mirrors: vllm/v1/core/sched/utils.py::remove_all (one item: removed in place; several:
    a new list). Callers must use the return value.
    """
    items = set(items_to_remove)
    if not items:
        return lst
    if len(items) == 1:
        item = next(iter(items))
        if item in lst:
            lst.remove(item)
        return lst
    return [x for x in lst if x not in items]
