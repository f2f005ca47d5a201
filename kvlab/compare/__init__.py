"""kvlab.compare: vLLM V1's prefix cache next to nano-vllm's BlockManager and a radix tree.

Three caches, one workload, one driver, one set of numbers:

* ``NanoBlockManager`` — nano-vllm's BlockManager (seed 004), recorded with kvlab's recorder so
  the kvlab views and player draw it (``record_nano``, ``nano_state``).
* ``RadixCache`` — SGLang's token-granular radix tree (match_prefix / insert / lock_ref /
  leaf LRU evict) over a ``TokenToKVPoolAllocator``, with its own event list
  (``RadixRecorder``) and tree view (``kvlab.viz.compare_radix.render_radix_tree``).
* ``compare(workload, pool_tokens)`` runs vLLM V1 (kvlab.core), nano-vllm and the radix cache on
  the same requests and pool; ``Comparison`` holds per-request and overall outcomes and per-step
  series (``to_svg``). Workloads: ``shared_system_prompt``, ``multi_turn_chat``, ``rag``,
  ``few_shot``, ``from_jsonl``, ``from_trace``.
* ``read_kv_event_file`` / ``KVEventSubscriber`` read a real vLLM's KV events, both wire forms
  (arrays up to vLLM 0.23, maps from 0.24; msgspec, pyzmq optional), the subscriber recovering
  gaps through vLLM's replay socket, and ``KVEventTraceBuilder`` rebuilds its GPU cached set as a
  kvlab trace (offloaded tiers apart in ``.tiers``).
* ``cli_compare`` is the ``kvlab compare`` command.

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
from kvlab.compare.kv_event_format import (
    FIELDS_SINCE,
    MAX_GROUP_IDX,
    WIRE_CHANGES,
    DecodedPayload,
    KVEventFormatError,
    decode_kv_event_payload,
    encode_kv_event_payload,
)
from kvlab.compare.kv_event_sequencer import KVEventSequencer, StreamHealth
from kvlab.compare.kv_event_stream import (
    KVEventTraceBuilder,
    cached_key_counts,
    external_hash_bytes,
    manager_cached_key_counts,
    medium_tier,
    peak_cached_blocks,
    read_kv_event_file,
)
from kvlab.compare.kv_event_subscriber import KVEventSubscriber, publisher_binds
from kvlab.compare.kv_event_wire import (
    decode_kv_event_batch,
    encode_kv_event_batch,
    read_kv_event_messages,
    write_kv_event_messages,
)
from kvlab.compare.nano_block_manager import (
    NanoBlock,
    NanoBlockManager,
    NanoSequence,
    NanoStats,
    compute_hash,
)
from kvlab.compare.nano_trace import nano_config, nano_state, record_nano
from kvlab.compare.policies import CachePolicy, NanoPolicy, Usage, VllmPolicy
from kvlab.compare.policy_radix import RadixPolicy
from kvlab.compare.radix_cache import RadixCache, TreeNode
from kvlab.compare.radix_events import (
    NodeView,
    RadixEvent,
    RadixEventKind,
    RadixRecorder,
    RadixSnapshot,
)
from kvlab.compare.radix_pool import TokenToKVPoolAllocator
from kvlab.compare.svg_plot import line_plot_svg
from kvlab.compare.workload_io import from_jsonl, from_jsonl_lines, from_trace, to_jsonl
from kvlab.compare.workloads import (
    Workload,
    WorkloadRequest,
    few_shot,
    multi_turn_chat,
    rag,
    shared_system_prompt,
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
    "series", "shared_system_prompt", "summarize", "to_jsonl", "write_kv_event_messages",
]  # fmt: skip
