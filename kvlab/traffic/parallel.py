"""The independent replays of a sweep, run one after another, on local processes, or on Dask.

A sweep is a list of tasks (a curve of one cache at one block size, a Belady replay at one
capacity, a model's budget, a fleet's routing), each a pure function of the trace and its
arguments, so their results do not depend on where or in which order they run (tests compare
every backend with the serial run, field by field).

* ``jobs=1``: in this process.
* ``jobs=N``: N local processes (``concurrent.futures.ProcessPoolExecutor``, fork start
  method: the trace is inherited, not copied; Linux and macOS).
* ``client``: a ``dask.distributed.Client`` (``kvlab whatif --dask-scheduler ADDRESS``, or
  ``local`` for a ``LocalCluster`` of ``jobs`` processes here): the trace is scattered to
  every worker once, the tasks are submitted, the results gathered in task order.

Why Dask rather than Ray: the tasks are plain Python functions over picklable arguments with
no state to keep between them, which is what ``Client.submit`` takes; ``distributed`` is pure
Python (installs in seconds, no daemon, no native wheels) and the same code runs on a laptop's
``LocalCluster``, on an SSH or Kubernetes cluster, or on an HPC queue (dask-jobqueue). Ray's
actor model and object store are not needed here and its wheels are large and platform-bound.

Each worker prepares the traffic at a block size once and keeps it for its next tasks.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from typing import Any

__all__ = ["TASK_KINDS", "dask_client", "run_task", "run_tasks"]

TASK_KINDS = ("infinite", "curve", "radix", "belady", "timed", "policy", "model", "fleet")
"""What a task tuple's first element may name."""

_SHARED: dict[str, Any] = {}  # NOTE: trace token -> requests, in this process
_BLOCKS: dict[tuple[str, int], Any] = {}  # NOTE: (token, block size) -> BlockedTraffic


def _blocked(token: str, requests: Sequence[Any], block_size: int) -> Any:
    from kvlab.traffic.blocks import prepare_blocks

    key = (token, block_size)
    if key not in _BLOCKS:
        _BLOCKS.clear()  # NOTE: one block size's hashes in memory at a time
        _BLOCKS[key] = prepare_blocks(requests, block_size, any_block_size=True)
    return _BLOCKS[key]


def run_task(token: str, requests: Sequence[Any], task: tuple) -> list[Any]:
    """Run one task; returns its ReplayResults / FleetResults (see ``kvlab.traffic.sweep``)."""
    from kvlab.traffic import sweep_tasks

    return sweep_tasks.run(task, lambda bs: _blocked(token, requests, bs))


def _run_shared(token: str, task: tuple) -> list[Any]:
    return run_task(token, _SHARED[token], task)


def run_tasks(requests: Sequence[Any], tasks: Sequence[tuple], jobs: int = 1,
              client: Any = None) -> list[list[Any]]:  # fmt: skip
    """Run every task; results in task order.

    Args:
        requests: The traffic (TrafficRequests).
        tasks: Task tuples (``sweep_tasks``).
        jobs: Local processes (1 = this process).
        client: A dask.distributed Client (then ``jobs`` is not used).

    Raises:
        ValueError: If jobs < 1.
    """
    if isinstance(jobs, bool) or not isinstance(jobs, int) or jobs < 1:
        raise ValueError(f"jobs must be an int >= 1, got {jobs!r}")
    token = uuid.uuid4().hex
    if client is not None:
        # NOTE: one future, a fresh key each time (a hashed key freed by the previous sweep
        # could be released while this one is being scattered)
        [shared] = client.scatter([list(requests)], broadcast=True, hash=False)
        futures = [client.submit(run_task, token, shared, t, pure=False) for t in tasks]
        return client.gather(futures)
    if jobs == 1 or len(tasks) <= 1:
        return [run_task(token, requests, t) for t in tasks]
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    _SHARED[token] = requests  # NOTE: inherited by the forked workers, never pickled
    try:
        ctx = multiprocessing.get_context("fork")
        with ProcessPoolExecutor(max_workers=min(jobs, len(tasks)), mp_context=ctx) as pool:
            return list(pool.map(_run_shared, [token] * len(tasks), tasks))
    finally:
        del _SHARED[token]


def dask_client(address: str, jobs: int) -> Any:
    """A Dask client: ``"local"`` starts a LocalCluster of ``jobs`` single-threaded processes.

    Raises:
        ImportError: Without dask.distributed (``pip install kvlab[cluster]``).
    """
    from dask.distributed import Client, LocalCluster

    if address == "local":
        cluster = LocalCluster(n_workers=jobs, threads_per_worker=1, processes=True,
                               dashboard_address=None)  # fmt: skip
        return Client(cluster)
    return Client(address)
