"""kvlab.traffic: real request traces through vLLM's exact cache policy (and two others).

* ``load_traffic`` reads any of FORMATS (mooncake, jsonl, kvtrace, kvevents);
  ``read_mooncake`` reads the Mooncake FAST'25 trace format into ``TrafficRequest``s;
  ``synthesize_tokens`` derives token ids from its hash ids (equal ids = equal prefix blocks).
* ``prepare_blocks`` hashes every prompt once at a kvlab block size (``BlockedTraffic``).
* ``replay_sequence`` replays it on the "sequence" clock through vLLM 0.22.1 (kvlab.core),
  nano-vllm's BlockManager, SGLang's radix tree, or the infinite cache (``ReplayResult``);
  ``replay_timed`` on the "timed" clock (arrivals at the trace's timestamps through kvlab's
  Scheduler, vLLM only; ``TimedResult``);
  ``sweep`` does it at every (block size, cache, capacity) and ``hit_rate_figure`` draws the
  hit-rate-vs-capacity curve (matplotlib); ``sweep_mooncake_stream`` does the same over a
  Mooncake file too big to hold, one request at a time (``iter_mooncake``: bounded memory).
* ``top_prefixes``, ``explain_request`` and ``record_vllm`` look inside one run: the most reused
  prefixes, why one request's hit stopped, a kvlab trace for the player.
* ``lru_curve`` / ``LRUCurve`` answer every capacity in one pass (vLLM and nano-vllm; exact,
  streaming in bounded memory), ``LRUPrefixCache`` one capacity with O(1) work a block;
  ``radix_curve`` / ``RadixPrefixCache`` the radix tree's, with kvlab.sglang's decisions;
  ``belady`` is Belady's eviction at a capacity (the policy gap); ``replay_policy`` drives
  libCacheSim's policies (FIFO, S3-FIFO, SIEVE ...).
* ``size_kv_cache`` turns bytes into vLLM's blocks for a model (``load_model_config``:
  ``BUNDLED_MODELS`` or a config.json) and ``replay_kv_cache_config`` replays any sized pool,
  hybrid ones included, through kvlab.core; ``sweep_models`` does both per budget.
* ``replay_fleet`` / ``sweep_fleet`` route the trace across replicas (``ROUTINGS``).
* ``run_tasks`` runs a sweep's replays serially, on local processes or on Dask;
  ``write_report`` is ``kvlab whatif --html``; ``extend_trace`` and ``random_mooncake_lines``
  make traffic at scale and for the exactness checks.

Examples:
    >>> reqs = read_mooncake_lines([
    ...     '{"timestamp": 0, "input_length": 1024, "output_length": 1, "hash_ids": [0, 1]}',
    ...     '{"timestamp": 1, "input_length": 1100, "output_length": 1, "hash_ids": [0, 1, 2]}'])
    >>> replay_sequence(prepare_blocks(reqs, 512), "vllm", 4096).hit_tokens
    1024
"""

from kvlab.traffic.belady import BeladyResult, belady
from kvlab.traffic.blocks import BlockedTraffic, hash_id_keys, prepare_blocks, progress_iter
from kvlab.traffic.fleet import ROUTINGS, FleetResult, replay_fleet
from kvlab.traffic.hybrid import replay_kv_cache_config
from kvlab.traffic.lru import LRUPrefixCache
from kvlab.traffic.formats import (
    FORMATS,
    load_traffic,
    traffic_from_kv_events,
    traffic_from_workload,
)
from kvlab.traffic.insight import (
    PrefixReuse,
    RequestExplanation,
    explain_request,
    record_vllm,
    top_prefixes,
)
from kvlab.traffic.mooncake import (
    MOONCAKE_BLOCK_SIZE,
    TrafficRequest,
    iter_mooncake,
    read_mooncake,
    read_mooncake_lines,
    synthesize_tokens,
)
from kvlab.traffic.parallel import run_tasks
from kvlab.traffic.peer_policies import POLICIES, replay_policy
from kvlab.traffic.plot import IMAGE_FORMATS, hit_rate_figure, save_figure
from kvlab.traffic.radix import RadixPrefixCache, radix_curve
from kvlab.traffic.replay import CACHES, ReplayResult, infinite_hits, replay_sequence
from kvlab.traffic.report import write_report
from kvlab.traffic.sizing import (
    BUNDLED_MODELS,
    KVCacheSizing,
    kv_cache_budgets,
    load_model_config,
    parse_bytes,
    size_kv_cache,
)
from kvlab.traffic.stack import CurvePoint, LRUCurve, lru_curve
from kvlab.traffic.stream import STREAM_CACHES, sweep_mooncake_stream
from kvlab.traffic.sweep import CLOCKS, SWEEP_CACHES, sweep, sweep_fleet, sweep_models, sweep_rows
from kvlab.traffic.synthetic import extend_trace, random_mooncake_lines
from kvlab.traffic.timed import ServiceModel, TimedResult, replay_timed

__all__ = [
    "BUNDLED_MODELS", "CACHES", "CLOCKS", "FORMATS", "IMAGE_FORMATS", "MOONCAKE_BLOCK_SIZE",
    "POLICIES", "ROUTINGS", "SWEEP_CACHES", "BeladyResult", "BlockedTraffic", "CurvePoint",
    "FleetResult", "KVCacheSizing", "LRUCurve", "LRUPrefixCache", "PrefixReuse",
    "RadixPrefixCache", "ReplayResult", "RequestExplanation", "STREAM_CACHES", "ServiceModel", "TimedResult", "TrafficRequest",
    "belady", "explain_request", "extend_trace", "hash_id_keys", "hit_rate_figure",
    "infinite_hits", "iter_mooncake", "kv_cache_budgets", "load_model_config", "load_traffic",
    "lru_curve", "parse_bytes",
    "prepare_blocks", "progress_iter", "radix_curve", "random_mooncake_lines", "read_mooncake",
    "read_mooncake_lines", "record_vllm", "replay_fleet", "replay_kv_cache_config",
    "replay_policy", "replay_sequence", "replay_timed", "run_tasks", "save_figure",
    "size_kv_cache", "sweep", "sweep_fleet", "sweep_models", "sweep_mooncake_stream",
    "sweep_rows", "synthesize_tokens",
    "top_prefixes", "traffic_from_kv_events", "traffic_from_workload", "write_report",
]  # fmt: skip
