"""kvlab.compare: one workload through vLLM V1's prefix cache, nano-vllm's and SGLang's.

The harness only; the caches it runs live in their own packages, one per system kvlab mirrors:
``kvlab.core`` (vLLM 0.22.1), ``kvlab.nanovllm`` (nano-vllm's BlockManager) and ``kvlab.sglang``
(SGLang's radix cache). This package holds what runs them side by side:

* workloads: ``shared_system_prompt``, ``multi_turn_chat``, ``rag``, ``few_shot``, or read from
  a file (``from_jsonl``, ``from_trace``; ``to_jsonl`` writes one);
* ``CachePolicy`` and its three adapters (``VllmPolicy``, ``NanoPolicy``, ``RadixPolicy``: the
  driver's questions answered through each system's own calls), and ``run_workload``, the
  driver (vLLM V1's scheduler loop reduced to whole prefills);
* ``compare(workload, pool_tokens)``: every policy on the same requests and pool; its
  ``Comparison`` holds per-request and overall outcomes and per-step series (``figure`` and
  ``to_svg`` draw them with matplotlib);
* ``cli_compare``, the ``kvlab compare`` command.

Every name this package exported before the caches and the KV-event reader moved out is still
importable from it (``NanoBlockManager``, ``RadixCache``, ``read_kv_event_file``, ...): they are
the same objects as in ``kvlab.nanovllm``, ``kvlab.sglang`` and ``kvlab.kv_events``, where new
code should import them from.

Examples:
    >>> from kvlab.compare import compare, shared_system_prompt
    >>> c = compare(shared_system_prompt(4, 32, 8, 4), pool_tokens=256, block_size=16)
    >>> {s.policy: s.hit_tokens for s in c.summaries()}
    {'vllm': 96, 'nano-vllm': 96, 'radix': 96}
"""

from kvlab.compare.analyzer import SERIES, Comparison, Summary, compare, series, summarize
from kvlab.compare.cli import WORKLOADS, cli_compare, load_workload
from kvlab.compare.driver import (
    POLICIES,
    RequestRecord,
    RunResult,
    StepRecord,
    make_policy,
    run_workload,
)
from kvlab.compare.plot import line_plot_svg, series_figure
from kvlab.compare.policies import CachePolicy, NanoPolicy, RadixPolicy, Usage, VllmPolicy
from kvlab.compare.workload_io import from_jsonl, from_jsonl_lines, from_trace, to_jsonl
from kvlab.compare.workloads import (
    Workload,
    WorkloadRequest,
    few_shot,
    multi_turn_chat,
    rag,
    shared_system_prompt,
)

# NOTE: re-exports kept for code written against the old layout (the same objects).
from kvlab.kv_events import (
    FIELDS_SINCE,
    MAX_GROUP_IDX,
    WIRE_CHANGES,
    DecodedPayload,
    KVEventFormatError,
    KVEventSequencer,
    KVEventSubscriber,
    KVEventTraceBuilder,
    StreamHealth,
    cached_key_counts,
    decode_kv_event_batch,
    decode_kv_event_payload,
    encode_kv_event_batch,
    encode_kv_event_payload,
    external_hash_bytes,
    manager_cached_key_counts,
    medium_tier,
    peak_cached_blocks,
    publisher_binds,
    read_kv_event_file,
    read_kv_event_messages,
    write_kv_event_messages,
)
from kvlab.nanovllm import (
    NanoBlock,
    NanoBlockManager,
    NanoSequence,
    NanoStats,
    compute_hash,
    nano_config,
    nano_state,
    record_nano,
)
from kvlab.sglang import (
    NodeView,
    RadixCache,
    RadixEvent,
    RadixEventKind,
    RadixRecorder,
    RadixSnapshot,
    TokenToKVPoolAllocator,
    TreeNode,
)

__all__ = [
    "FIELDS_SINCE", "MAX_GROUP_IDX", "POLICIES", "SERIES", "WIRE_CHANGES", "WORKLOADS",
    "CachePolicy", "Comparison", "DecodedPayload", "KVEventFormatError", "KVEventSequencer",
    "KVEventSubscriber", "KVEventTraceBuilder", "NanoBlock", "NanoBlockManager", "NanoPolicy",
    "NanoSequence", "NanoStats", "NodeView", "RadixCache", "RadixEvent", "RadixEventKind",
    "RadixPolicy", "RadixRecorder", "RadixSnapshot", "RequestRecord", "RunResult", "StepRecord",
    "StreamHealth", "Summary", "TokenToKVPoolAllocator", "TreeNode", "Usage", "VllmPolicy",
    "Workload", "WorkloadRequest",
    "cached_key_counts", "cli_compare", "compare", "compute_hash", "decode_kv_event_batch",
    "decode_kv_event_payload", "encode_kv_event_batch", "encode_kv_event_payload",
    "external_hash_bytes", "few_shot", "from_jsonl", "from_jsonl_lines", "from_trace",
    "line_plot_svg", "load_workload", "make_policy", "manager_cached_key_counts", "medium_tier",
    "multi_turn_chat", "nano_config", "nano_state", "peak_cached_blocks", "publisher_binds",
    "rag", "read_kv_event_file", "read_kv_event_messages", "record_nano", "run_workload",
    "series", "series_figure", "shared_system_prompt", "summarize", "to_jsonl",
    "write_kv_event_messages",
]  # fmt: skip
