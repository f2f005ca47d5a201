"""kvlab.core.sched: the continuous-batching scheduler that drives the KVCacheManager.

Mirrors ``vllm/v1/core/sched`` file for file (scheduler, output, utils, request_queue; plus
kvlab's config), first-come-first-served and synchronous. Pure Python: imports only
kvlab.core and the standard library.
"""

from kvlab.core.sched.config import SchedulerConfig
from kvlab.core.sched.output import (
    CachedRequestData,
    EngineCoreOutput,
    EngineCoreOutputs,
    NewRequestData,
    ScheduledRequest,
    SchedulerOutput,
    SchedulerStats,
    StepRecord,
)
from kvlab.core.sched.request_queue import (
    FCFSRequestQueue,
    RequestQueue,
    SchedulingPolicy,
    create_request_queue,
)
from kvlab.core.sched.scheduler import Scheduler
from kvlab.core.sched.utils import check_stop, get_finished_reason

__all__ = [
    "CachedRequestData",
    "EngineCoreOutput",
    "EngineCoreOutputs",
    "FCFSRequestQueue",
    "NewRequestData",
    "RequestQueue",
    "ScheduledRequest",
    "Scheduler",
    "SchedulerConfig",
    "SchedulerOutput",
    "SchedulerStats",
    "SchedulingPolicy",
    "StepRecord",
    "check_stop",
    "create_request_queue",
    "get_finished_reason",
]
