"""Run a playground scenario on kvlab.core, with any recorder attached.

The same function runs in CPython (with ``kvlab.trace.Recorder``, for traces and tests) and in
the browser under Pyodide (with ``kvlab.playground.events.EventRecorder``, no numpy). It builds
what the course's notebooks build by hand: a ``KVCacheConfig`` of ``num_gpu_blocks`` blocks with
one KV cache group per entry of ``layers`` (``FullAttentionSpec`` or ``SlidingWindowSpec`` of
``block_size`` tokens, 1 KV head of size 1, float32), a ``KVCacheManager``, and requests whose
block hashes the engine core's hasher computes (``get_request_block_hasher``), with
``NONE_HASH`` seeded as ``PYTHONHASHSEED=0`` (the course's seed), whatever the environment says.

Two drivers:

* ``scheduler``: ``kvlab.core.sched.Scheduler`` (FCFS, chunked prefill, preemption). At step s
  the requests whose ``arrival`` is s are added in the order given, ``schedule()`` runs, and
  every scheduled request samples its next ``output`` token (7 once the list runs out);
  finished requests are freed by ``update_from_output``. Stops when every request finished,
  or when nothing can be scheduled any more (a note says which requests never fit).
* ``calls``: the script's lines call the KVCacheManager directly, as the notebooks do:

  ===========================  ============================================================
  ``admit R``                  get_computed_blocks, then allocate_slots for the rest of the
                               prompt after the hit; R is then computed (the course's admit)
  ``prefill R``                allocate_slots for R's uncomputed tokens, no lookup
  ``decode R [N]``             N times (default 1): append R's next output token,
                               allocate_slots(R, 1), one more token computed
  ``lookup R``                 get_computed_blocks only (nothing changes)
  ``free R``                   free(R)
  ``evict B ...``              evict_blocks({B, ...})
  ``reset``                    reset_prefix_cache()
  ===========================  ============================================================

  A refused allocate_slots (None) leaves R as it was and adds a note; later lines still run.

Examples:
    >>> from kvlab.playground import parse_scenario
    >>> s = parse_scenario({"requests": [{"id": "a", "prompt": "0..9"}], "driver": "calls",
    ...                     "calls": "admit a"})
    >>> run_scenario(s).manager.get_block_ids("a")
    ([1, 2, 3],)
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any

from kvlab.core.kv_cache_interface import (
    FullAttentionSpec,
    KVCacheConfig,
    KVCacheGroupSpec,
    SlidingWindowSpec,
)
from kvlab.core.kv_cache_manager import KVCacheManager
from kvlab.core.kv_cache_utils import get_hash_fn_by_name, get_request_block_hasher, init_none_hash
from kvlab.core.request import Request
from kvlab.core.request_params import SamplingParams
from kvlab.i18n import _
from kvlab.playground.scenario import LIMITS, Call, RequestSpec, Scenario, ScenarioError

__all__ = ["DEFAULT_OUTPUT_TOKEN", "HASH_SEED", "RunResult", "build_manager", "run_scenario"]

DEFAULT_OUTPUT_TOKEN = 7
"""The token a request generates once its ``output`` list runs out (notebook 8's)."""

HASH_SEED = "0"
"""``PYTHONHASHSEED`` used for ``init_none_hash``: NONE_HASH = hash_fn("0"), as in the course."""


@dataclass
class RunResult:
    """What a run leaves.

    Attributes:
        manager: The KVCacheManager after the run.
        recorder: The recorder attached to it (None if the run had none).
        num_steps: Scheduler steps run (0 for the calls driver).
        notes: Plain sentences about what did not happen (refused allocations, requests that
            never fit), in order, in the current language (``kvlab.i18n``).
    """

    manager: KVCacheManager
    recorder: Any
    num_steps: int = 0
    notes: list[str] = field(default_factory=list)


def _spec(layer: Any, block_size: Any) -> Any:
    common = {"block_size": block_size, "num_kv_heads": 1, "head_size": 1, "dtype": "float32"}
    if layer == "full":
        return FullAttentionSpec(**common)
    return SlidingWindowSpec(**common, sliding_window=layer)


def _hash_fn(name: Any) -> Any:
    hash_fn = get_hash_fn_by_name(name)
    if name.startswith("xxhash"):
        try:
            import xxhash  # noqa: F401 - only to know whether it can be used here
        except ImportError:
            raise ScenarioError(
                f"the {name!r} hash function needs the compiled xxhash package, which this "
                "Python (the browser playground) does not have; choose sha256 or sha256_cbor, "
                "or run the scenario with kvlab in Python"
            ) from None
    return hash_fn


def build_manager(scenario: Scenario) -> tuple[KVCacheManager, Any]:
    """The scenario's KVCacheManager and hash function (NONE_HASH initialised).

    Raises:
        ScenarioError: A window longer than max_model_len, or an xxhash function where the
            xxhash package is missing.
        ValueError, TypeError: kvlab.core refuses a block_size, window, max_model_len or hash
            name (its own message).
    """
    specs = [_spec(layer, scenario.block_size) for layer in scenario.layers]
    manager_args = {
        "max_model_len": scenario.max_model_len,
        "hash_block_size": scenario.block_size,
        "enable_caching": scenario.enable_caching,
    }
    groups = [KVCacheGroupSpec([f"layer{i}"], spec) for i, spec in enumerate(specs)]
    config = KVCacheConfig(scenario.num_gpu_blocks, [], groups)
    manager = KVCacheManager(config, **manager_args)
    for spec in specs:
        window = getattr(spec, "sliding_window", None)
        if window is not None and window > scenario.max_model_len:
            raise ScenarioError(
                f"a sliding window of {window} tokens is longer than "
                f"max_model_len ({scenario.max_model_len} tokens); a window "
                "must be at most max_model_len"
            )
    hash_fn = _hash_fn(scenario.hash)
    seed = os.environ.get("PYTHONHASHSEED")
    os.environ["PYTHONHASHSEED"] = HASH_SEED
    try:
        init_none_hash(hash_fn)
    finally:
        if seed is None:
            del os.environ["PYTHONHASHSEED"]
        else:
            os.environ["PYTHONHASHSEED"] = seed
    return manager, hash_fn


class _Requests:
    """The scenario's Request objects, built on first use, and their output tokens."""

    def __init__(self, scenario: Scenario, hash_fn: Any) -> None:
        self.specs = {r.request_id: r for r in scenario.requests}
        self.hasher = (
            get_request_block_hasher(scenario.block_size, hash_fn)
            if scenario.enable_caching
            else None
        )
        self.built: dict[str, Request] = {}

    def get(self, request_id: str) -> Request:
        req = self.built.get(request_id)
        if req is None:
            req = self.built[request_id] = self.make(self.specs[request_id])
        return req

    def make(self, spec: RequestSpec) -> Request:
        try:
            params = SamplingParams(max_tokens=spec.max_tokens)
            return Request(
                spec.request_id, list(spec.prompt), params, None, block_hasher=self.hasher
            )
        except (TypeError, ValueError) as exc:
            raise ScenarioError(f"request {spec.request_id!r}: {exc}") from None

    def next_output(self, req: Request) -> int:
        output = self.specs[req.request_id].output
        k = req.num_output_tokens
        return output[k] if k < len(output) else DEFAULT_OUTPUT_TOKEN


def _run_calls(
    scenario: Scenario, manager: KVCacheManager, requests: _Requests, notes: list[str]
) -> None:
    for call in scenario.calls:
        _one_call(call, manager, requests, notes)


def _refused(call: Call, notes: list[str], what: str) -> None:
    notes.append(
        _(
            "calls, line {line}: allocate_slots for {what} was refused (None): the free "
            "blocks do not cover it"
        ).format(line=call.line, what=what)
    )


def _one_call(call: Call, manager: KVCacheManager, requests: _Requests, notes: list[str]) -> None:
    name = call.name
    if name == "evict":
        manager.evict_blocks({int(b) for b in call.args})
        return
    if name == "reset":
        manager.reset_prefix_cache()
        return
    req = requests.get(call.args[0])
    if name == "admit":
        hit_blocks, num_hit = manager.get_computed_blocks(req)
        if manager.allocate_slots(req, req.num_tokens - num_hit, num_hit, hit_blocks) is None:
            _refused(call, notes, repr(req.request_id))
        else:
            req.num_computed_tokens = req.num_tokens
    elif name == "prefill":
        if manager.allocate_slots(req, req.num_tokens - req.num_computed_tokens) is None:
            _refused(call, notes, repr(req.request_id))
        else:
            req.num_computed_tokens = req.num_tokens
    elif name == "decode":
        for _ in range(int(call.args[1]) if len(call.args) > 1 else 1):
            req.append_output_token_ids(requests.next_output(req))
            if manager.allocate_slots(req, 1) is None:
                _refused(
                    call, notes, _("{request}'s next token").format(request=repr(req.request_id))
                )
                return
            req.num_computed_tokens += 1
    elif name == "lookup":
        manager.get_computed_blocks(req)
    else:  # free
        manager.free(req)


def _run_scheduler(
    scenario: Scenario,
    manager: KVCacheManager,
    recorder: Any,
    requests: _Requests,
    notes: list[str],
) -> int:
    from kvlab.core.sched import Scheduler, SchedulerConfig

    config = SchedulerConfig(
        max_num_seqs=scenario.max_num_seqs,
        max_num_batched_tokens=scenario.max_num_batched_tokens,
        max_model_len=scenario.max_model_len,
        enable_chunked_prefill=scenario.enable_chunked_prefill,
        scheduler_reserve_full_isl=scenario.scheduler_reserve_full_isl,
        enable_prefix_caching=scenario.enable_caching,
    )
    scheduler = Scheduler(manager, config, recorder=recorder)
    arrivals: dict[int, list[Request]] = {}
    for spec in scenario.requests:  # NOTE: built up front, so a bad prompt fails before step 0
        arrivals.setdefault(spec.arrival, []).append(requests.get(spec.request_id))
    last_arrival = max(arrivals, default=-1)
    step = 0
    while scheduler.has_unfinished_requests() or step <= last_arrival:
        if step >= LIMITS["steps"]:
            notes.append(
                _("stopped after {steps} scheduler steps (the playground's limit)").format(
                    steps=step
                )
            )
            break
        for req in arrivals.get(step, ()):
            scheduler.add_request(req)
        output = scheduler.schedule()
        sampled = {
            rid: [requests.next_output(scheduler.requests[rid])]
            for rid in output.num_scheduled_tokens
        }
        scheduler.update_from_output(output, sampled)
        step += 1
        if not output.num_scheduled_tokens and not scheduler.running and step > last_arrival:
            stuck = ", ".join(repr(r.request_id) for r in scheduler.waiting)
            notes.append(
                _(
                    "stopped at step {step}: nothing could be scheduled; the waiting "
                    "request(s) {requests} do not fit in the pool ({free} free blocks)"
                ).format(
                    step=step - 1, requests=stuck, free=manager.block_pool.get_num_free_blocks()
                )
            )
            break
    return step


def run_scenario(scenario: Scenario, recorder: Any = None) -> RunResult:
    """Build the scenario's KVCacheManager, attach ``recorder`` and run the driver.

    Args:
        scenario: From ``parse_scenario``.
        recorder: None, or a fresh recorder with ``attach(manager)`` and ``mark_step(step)``
            (``kvlab.trace.Recorder``, ``kvlab.playground.events.EventRecorder``).

    Returns:
        The RunResult.

    Raises:
        ScenarioError: See ``build_manager``; or kvlab.core refused a request's prompt or
            max_tokens (its message, prefixed with the request), before anything ran.
        ValueError, TypeError: kvlab.core refuses a pool or design value, or a call of the
            script (its own message).
    """
    manager, hash_fn = build_manager(scenario)
    requests = _Requests(scenario, hash_fn)
    for spec in scenario.requests:  # every prompt checked by kvlab.core before anything runs
        requests.get(spec.request_id)
    if recorder is not None:
        recorder.attach(manager)
    result = RunResult(manager, recorder)
    if scenario.driver == "calls":
        _run_calls(scenario, manager, requests, result.notes)
    else:
        result.num_steps = _run_scheduler(scenario, manager, recorder, requests, result.notes)
    return result
