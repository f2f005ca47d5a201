"""vLLM V1's own design (kvlab.core): the default of every trace."""

from __future__ import annotations

from kvlab.i18n import N_
from kvlab.trace.designs import register
from kvlab.trace.designs.base import CacheDesign

__all__ = ["DESIGN", "VllmV1Design"]


class VllmV1Design(CacheDesign):
    """BlockPool + FreeKVCacheBlockQueue (doubly linked, O(1) remove) + BlockHashToBlockMap.

    Mirrors: vllm/v1/core/block_pool.py::BlockPool.
    """

    names = (None, "vllm-v1")
    title = N_("vLLM V1 (BlockPool + FreeKVCacheBlockQueue, kvlab.core)")


DESIGN = register(VllmV1Design())
