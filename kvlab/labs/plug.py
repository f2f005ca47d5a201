"""Put a learner's class in place of kvlab's own while kvlab's engine is built.

kvlab.core, like vLLM, builds its parts itself: ``BlockPool.__init__`` makes its
``FreeKVCacheBlockQueue``, the coordinator makes the ``BlockPool`` and picks each group's
manager class from ``spec_manager_map``, ``get_kv_cache_coordinator`` picks the coordinator. So the
learner's class is swapped in under kvlab's name for the duration of the construction (the
objects built keep it); afterwards the engine calls it only through vLLM's public methods.

Examples:
    >>> with plugged(queue_cls=MyQueue):                       # doctest: +SKIP
    ...     manager = KVCacheManager(config, max_model_len=64, hash_block_size=4)
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from typing import Any
from unittest import mock

__all__ = ["plugged"]


@contextmanager
def plugged(
    queue_cls: Any = None,
    pool_cls: Any = None,
    managers: dict[type, Any] | None = None,
    hybrid_cls: Any = None,
) -> Iterator[None]:
    """Build kvlab's engine with the given classes in place of kvlab's.

    Args:
        queue_cls: The ``FreeKVCacheBlockQueue`` kvlab's ``BlockPool`` builds.
        pool_cls: The ``BlockPool`` the coordinators build.
        managers: Spec class -> manager class (``{SlidingWindowSpec: MySlidingWindowManager}``).
        hybrid_cls: The ``HybridKVCacheCoordinator`` ``get_kv_cache_coordinator`` builds.
    """
    from kvlab.core import block_pool, kv_cache_coordinator, single_type_kv_cache_manager

    with ExitStack() as stack:
        if queue_cls is not None:
            stack.enter_context(mock.patch.object(block_pool, "FreeKVCacheBlockQueue", queue_cls))
        if pool_cls is not None:
            stack.enter_context(mock.patch.object(kv_cache_coordinator, "BlockPool", pool_cls))
        if managers:
            stack.enter_context(mock.patch.dict(single_type_kv_cache_manager.spec_manager_map, managers))
        if hybrid_cls is not None:
            stack.enter_context(mock.patch.object(kv_cache_coordinator, "HybridKVCacheCoordinator", hybrid_cls))
        yield
