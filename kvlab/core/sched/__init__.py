"""kvlab.core.sched: the continuous-batching scheduler that drives the KVCacheManager.

Mirrors ``vllm/v1/core/sched`` (scheduler, output, utils), first-come-first-served and
synchronous. Pure Python: imports only kvlab.core and the standard library.
"""

from kvlab.core.sched.config import SchedulerConfig
from kvlab.core.sched.output import (
    CachedRequestData,
    EngineCoreOutput,
    EngineCoreOutputs,
    NewRequestData,
    SchedulerOutput,
    SchedulerStats,
)
from kvlab.core.sched.scheduler import Scheduler
from kvlab.core.sched.step_log import ScheduledRequest, StepRecord
from kvlab.core.sched.utils import check_stop, get_finished_reason

__all__ = [
    "CachedRequestData",
    "EngineCoreOutput",
    "EngineCoreOutputs",
    "NewRequestData",
    "ScheduledRequest",
    "Scheduler",
    "SchedulerConfig",
    "SchedulerOutput",
    "SchedulerStats",
    "StepRecord",
    "check_stop",
    "get_finished_reason",
]
