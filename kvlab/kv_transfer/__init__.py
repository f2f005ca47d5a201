"""kvlab.kv_transfer: KV connectors as the KV cache sees them (P/D loads, CPU offloading).

Mirrors the scheduler side of vllm/distributed/kv_transfer and the connector paths of
vllm/v1/core/sched/scheduler.py: a waiting request whose KV can be loaded from elsewhere is
allocated its blocks with ``num_external_computed_tokens`` and ``delay_cache_blocks``, waits in
``WAITING_FOR_REMOTE_KVS`` until the load has finished, then has its blocks cached and runs.
Taught in notebook 8 ("KV from elsewhere") and notebook 12 §1 (preemption with offloading).
"""

from kvlab.core.request import RequestStatus
from kvlab.kv_transfer.connectors import (
    CPUOffloadingConnector,
    KVConnector,
    LoadJob,
    RemotePrefillConnector,
)
from kvlab.kv_transfer.scheduler import ConnectorScheduler

__all__ = [
    "CPUOffloadingConnector",
    "ConnectorScheduler",
    "KVConnector",
    "LoadJob",
    "RemotePrefillConnector",
    "RequestStatus",
]
