"""Parallel sweeps: local processes and a Dask LocalCluster give the serial results exactly."""

import random

import pytest

from kvlab.traffic import read_mooncake_lines
from kvlab.traffic.sweep import sweep, sweep_fleet, sweep_models, sweep_rows
from kvlab.traffic.sizing import load_model_config
from kvlab.traffic.synthetic import random_mooncake_lines


def _reqs():
    return read_mooncake_lines(random_mooncake_lines(random.Random(11), 50))


def _all(reqs, **kw):
    rows = sweep_rows(sweep(reqs, ["vllm", "nano", "radix", "belady"], [64 * 8, 64 * 40],
                            [64, 512], warmup=0.5, **kw))
    rows += sweep_rows(sweep_fleet(reqs, 3, ["round-robin", "prefix-aware"], [64 * 20], 64, **kw))
    rows += sweep_rows(sweep_models(reqs, load_model_config("llama-3.1-8b"), [2**27], **kw,
                                    max_model_len=1024))
    return rows


def test_processes_equal_serial():
    reqs = _reqs()
    serial = _all(reqs)
    assert _all(reqs, jobs=2) == serial
    # NOTE: the split is there: infinite - belady and belady - vllm, per capacity.
    vllm = [r for r in serial if r["cache"] == "vllm" and "hits_lost_to_lru" in r]
    assert len(vllm) == 4 and all(r["hits_lost_to_lru"] >= 0 for r in vllm)
    assert [r["warmup_requests"] for r in serial[:1]] == [25]


def test_dask_local_cluster_equals_serial():
    distributed = pytest.importorskip("distributed")  # NOTE: kvlab[cluster], in kvlab[all]
    from kvlab.traffic.parallel import dask_client

    reqs = _reqs()
    serial = _all(reqs)
    client = dask_client("local", 2)
    try:
        assert isinstance(client, distributed.Client)
        assert _all(reqs, client=client) == serial
    finally:
        client.close()
        client.cluster.close()


def test_bad_jobs_and_warmup_are_refused():
    reqs = _reqs()
    with pytest.raises(ValueError, match="warmup must be a fraction of the requests in"):
        sweep(reqs, ["vllm"], [1024], [64], warmup=1.0)
    from kvlab.traffic.parallel import run_tasks

    with pytest.raises(ValueError, match="jobs must be an int >= 1, got 0"):
        run_tasks(reqs, [("infinite", 64, 0, None)], jobs=0)
