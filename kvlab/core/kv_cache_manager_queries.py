"""KVCacheManager's read-only queries and event drain (a mixin; see kv_cache_manager.py).

Mirrors: vllm/v1/core/kv_cache_manager.py::KVCacheManager (get_num_common_prefix_blocks,
take_events, get_blocks, get_block_ids, take_new_block_ids)
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from kvlab.core.kv_events import BlockStored

if TYPE_CHECKING:
    from kvlab.core.kv_cache_blocks import KVCacheBlocks
    from kvlab.core.kv_events import KVCacheEvent

__all__ = ["KVCacheManagerQueries"]

logger = logging.getLogger("kvlab.core.kv_cache_manager")


class KVCacheManagerQueries:
    """The queries of KVCacheManager (which inherits them); they change nothing but drains.

    Needs ``coordinator``, ``block_pool``, ``kv_cache_event_metadata`` and
    ``create_kv_cache_blocks`` from the manager.
    """

    coordinator: Any
    block_pool: Any
    kv_cache_event_metadata: tuple

    def get_num_common_prefix_blocks(self, running_request_id: str) -> list[int]:
        """Per group, the leading blocks every request holding blocks shares (cascade attention).

        Requests holding blocks but not scheduled this step count too (the answer may be 0).

        Mirrors: vllm/v1/core/kv_cache_manager.py::KVCacheManager.get_num_common_prefix_blocks

        Raises:
            KeyError: ``running_request_id`` holds no blocks entry in any group.
        """
        managers = self.coordinator.single_type_managers
        if managers and not any(running_request_id in m.req_to_blocks for m in managers):
            raise KeyError(
                f"request {running_request_id!r} holds no blocks; pass a running request id"
            )
        return self.coordinator.get_num_common_prefix_blocks(running_request_id)

    def take_events(self) -> list[KVCacheEvent]:
        """Drain the queued KV events; BlockStored events get their group's spec kind/window.

        Mirrors: vllm/v1/core/kv_cache_manager.py::KVCacheManager.take_events
        """
        events = self.block_pool.take_events()
        for event in events:
            if not isinstance(event, BlockStored) or event.group_idx is None:
                continue
            if not 0 <= event.group_idx < len(self.kv_cache_event_metadata):
                logger.warning("Group index `%s` not in KV cache metadata", event.group_idx)
                continue
            kind, sliding_window = self.kv_cache_event_metadata[event.group_idx]
            event.kv_cache_spec_kind = kind
            event.kv_cache_spec_sliding_window = sliding_window
        return events

    def get_blocks(self, request_id: str) -> KVCacheBlocks:
        """The request's blocks per group (empty for an unknown request)."""
        return self.create_kv_cache_blocks(self.coordinator.get_blocks(request_id))

    def get_block_ids(self, request_id: str) -> tuple[list[int], ...]:
        """The request's block ids per group (empty lists for an unknown request)."""
        return self.get_blocks(request_id).get_block_ids()

    def take_new_block_ids(self) -> list[int]:
        """Ids of full-attention blocks allocated since the last call (for zeroing), drained."""
        ids: list[int] = []
        for manager in self.coordinator.single_type_managers:
            ids.extend(manager.take_new_block_ids())
        return ids
