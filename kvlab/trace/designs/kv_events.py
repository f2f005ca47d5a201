"""A trace rebuilt from a real vLLM's KV-event stream (kvlab.kv_events.KVEventTraceBuilder)."""

from __future__ import annotations

from kvlab.i18n import N_, _
from kvlab.trace.designs import register
from kvlab.trace.designs.base import CacheDesign

__all__ = ["DESIGN", "KVEventsDesign"]


class KVEventsDesign(CacheDesign):
    """BlockStored / BlockRemoved / AllBlocksCleared only: the stream carries hashes, not the
    free queue, so kvlab assigns slots and the queue shows slot order, not eviction order."""

    names = ("vllm-kv-events",)
    title = N_("vLLM KV events (BlockStored / BlockRemoved stream; slots are kvlab's)")

    def queue_labels(self, length: int) -> tuple[str, str]:
        return (
            _("slots rebuilt from vLLM KV events · {length} slots · slot order, "
              "not vLLM's eviction order").format(length=length),
            _("◀ (no free order is in the event stream)"),
        )


DESIGN = register(KVEventsDesign())
