"""kvlab.kv_events: a real vLLM's KV-event stream read from outside, wire form by wire form.

Mirrors the reader's side of ``vllm/distributed/kv_events.py``, the one vLLM file that declares
the events (``BlockStored``, ``BlockRemoved``, ``AllBlocksCleared``), their batch and the ZMQ
publisher, in every release from 0.22.1 (kvlab's spec release) to 0.33.0. The package is named
after that file; vLLM keeps everything in it, kvlab splits the reader by concept:

=================  =========================================================================
``versions.py``    which release put which field, medium and form on the wire (``FIELDS_SINCE``,
                   ``MEDIA_SINCE``, ``WIRE_CHANGES``), read from each release's kv_events.py
``format.py``      one payload in both forms (arrays up to 0.23, maps from 0.24): validated
                   decoding and encoding (msgspec, optional)
``wire.py``        the three-frame ZMQ message, and recorded ``.kvev`` / ``.jsonl`` files
``sequencer.py``   seq order: duplicates, gaps, what the replay socket recovered (``StreamHealth``)
``subscriber.py``  the live ZMQ subscriber with gap recovery through vLLM's replay socket
                   (mirrors ``ZmqEventPublisher``'s bind/connect rule and replay protocol; pyzmq)
``stream.py``      the GPU cached set rebuilt as a kvlab trace (``KVEventTraceBuilder``)
=================  =========================================================================

What differs from vLLM: nothing here publishes (vLLM does); the event classes themselves are
kvlab.core's (``kvlab.core.kv_events``, vLLM 0.22.1's fields), fields newer than 0.22.1 travel
beside them (``DecodedPayload.newer_fields``); a rebuilt trace shows which hashes are cached,
never block ids or usage (vLLM does not send them). The trace adapter
``kvlab.trace.designs.kv_events`` tells the views how to draw a rebuilt trace.

Examples:
    >>> from kvlab.core.kv_events import BlockStored, KVEventBatch
    >>> from kvlab.kv_events import KVEventTraceBuilder, cached_key_counts
    >>> b = KVEventTraceBuilder(num_blocks=4)
    >>> b.add_batch(KVEventBatch(0.0, [BlockStored([7], None, [], 16, None, "GPU", None)]))
    >>> t = b.trace(); len(cached_key_counts(t.state_at(len(t) - 1)))
    1
"""

from kvlab.kv_events.format import (
    END_SEQ,
    MAX_GROUP_IDX,
    DecodedPayload,
    check_kv_event_batch,
    decode_kv_event_payload,
    decode_seq_frame,
    encode_kv_event_payload,
    encode_seq_frame,
)
from kvlab.kv_events.sequencer import KVEventSequencer, StreamHealth
from kvlab.kv_events.stream import (
    KVEventTraceBuilder,
    cached_key_counts,
    external_hash_bytes,
    manager_cached_key_counts,
    medium_tier,
    peak_cached_blocks,
    read_kv_event_file,
)
from kvlab.kv_events.subscriber import KVEventSubscriber, publisher_binds
from kvlab.kv_events.versions import (
    BASE_VERSION,
    FIELDS,
    FIELDS_SINCE,
    MEDIA_SINCE,
    MEDIUM_CPU,
    MEDIUM_FS,
    MEDIUM_GPU,
    MEDIUM_OBJ,
    MEDIUM_STORAGE,
    NUM_REQUIRED,
    WIRE_CHANGES,
    KVEventFormatError,
    fields_in,
    form_of,
)
from kvlab.kv_events.wire import (
    MAGIC,
    decode_kv_event_batch,
    encode_kv_event_batch,
    read_kv_event_messages,
    write_kv_event_messages,
)

__all__ = [
    "BASE_VERSION", "END_SEQ", "FIELDS", "FIELDS_SINCE", "MAGIC", "MAX_GROUP_IDX", "MEDIA_SINCE",
    "MEDIUM_CPU", "MEDIUM_FS", "MEDIUM_GPU", "MEDIUM_OBJ", "MEDIUM_STORAGE", "NUM_REQUIRED",
    "WIRE_CHANGES", "DecodedPayload", "KVEventFormatError", "KVEventSequencer",
    "KVEventSubscriber", "KVEventTraceBuilder", "StreamHealth", "cached_key_counts",
    "check_kv_event_batch", "decode_kv_event_batch", "decode_kv_event_payload",
    "decode_seq_frame", "encode_kv_event_batch", "encode_kv_event_payload", "encode_seq_frame",
    "external_hash_bytes", "fields_in", "form_of", "manager_cached_key_counts", "medium_tier",
    "peak_cached_blocks", "publisher_binds", "read_kv_event_file", "read_kv_event_messages",
    "write_kv_event_messages",
]  # fmt: skip
