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

Examples:
    >>> reqs = read_mooncake_lines([
    ...     '{"timestamp": 0, "input_length": 1024, "output_length": 1, "hash_ids": [0, 1]}',
    ...     '{"timestamp": 1, "input_length": 1100, "output_length": 1, "hash_ids": [0, 1, 2]}'])
    >>> replay_sequence(prepare_blocks(reqs, 512), "vllm", 4096).hit_tokens
    1024
"""

from kvlab.traffic.blocks import BlockedTraffic, prepare_blocks, progress_iter
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
from kvlab.traffic.plot import IMAGE_FORMATS, hit_rate_figure, save_figure
from kvlab.traffic.replay import CACHES, ReplayResult, infinite_hits, replay_sequence
from kvlab.traffic.stream import sweep_mooncake_stream
from kvlab.traffic.sweep import CLOCKS, sweep, sweep_rows
from kvlab.traffic.timed import ServiceModel, TimedResult, replay_timed

__all__ = [
    "CACHES", "CLOCKS", "FORMATS", "IMAGE_FORMATS", "MOONCAKE_BLOCK_SIZE", "BlockedTraffic",
    "PrefixReuse", "ReplayResult", "RequestExplanation", "ServiceModel", "TimedResult",
    "TrafficRequest", "explain_request", "hit_rate_figure", "infinite_hits", "load_traffic",
    "iter_mooncake", "prepare_blocks", "progress_iter", "read_mooncake", "read_mooncake_lines",
    "record_vllm", "replay_sequence", "replay_timed", "save_figure", "sweep",
    "sweep_mooncake_stream", "sweep_rows", "synthesize_tokens", "top_prefixes",
    "traffic_from_kv_events", "traffic_from_workload",
]  # fmt: skip
