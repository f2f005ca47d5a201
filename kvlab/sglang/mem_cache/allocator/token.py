"""The token pool behind a radix cache: a fixed number of KV slots, one token each.

Mirrors: sglang/srt/mem_cache/allocator/token.py::TokenToKVPoolAllocator of SGLang 0.5.23 (page
size 1, ``need_sort`` off): slot 0 is reserved for padding, slots 1..size are handed out from the
front of a free list and returned to its end; and, inherited there from
allocator/base.py::BaseTokenToKVPoolAllocator, ``evict_to_free_tokens``, which asks the tree for
the shortfall only. kvlab keeps the free list as a deque (SGLang: a tensor it slices and
concatenates) and refuses to free a slot that is not allocated (SGLang does not check).

Examples:
    >>> pool = TokenToKVPoolAllocator(size=4)
    >>> pool.alloc(3), pool.available_size()
    ([1, 2, 3], 1)
    >>> pool.free([2]); pool.alloc(2)
    [4, 2]
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable
from typing import Any, Protocol

__all__ = ["TokenToKVPoolAllocator"]


class _Evictable(Protocol):
    def evict(self, num_tokens: int) -> int: ...


class TokenToKVPoolAllocator:
    """Hands out KV slots (token indices) from a fixed pool.

    Mirrors: sglang/srt/mem_cache/allocator.py::TokenToKVPoolAllocator (page_size 1).

    Args:
        size: Usable slots (tokens), >= 1. Slot ids run 1..size; 0 is the padding slot.
        recorder: None (off) or an object with ``slots_allocated(slots)`` and
            ``slots_freed(slots)`` (``kvlab.sglang.recording.RadixRecorder``).

    Raises:
        ValueError: If size is not an int >= 1.
    """

    def __init__(self, size: int, recorder: object = None) -> None:
        if isinstance(size, bool) or not isinstance(size, int) or size < 1:
            raise ValueError(f"size must be an int >= 1 (tokens), got {size!r}")
        self.size = size
        # NOTE: free_slots holds each slot id 1..size at most once; allocated ones are absent.
        self.free_slots: deque[int] = deque(range(1, size + 1))
        self._allocated: set[int] = set()
        self.recorder: Any = recorder

    def available_size(self) -> int:
        """Free slots (tokens)."""
        return len(self.free_slots)

    @property
    def num_used_tokens(self) -> int:
        """Allocated slots (tokens)."""
        return self.size - len(self.free_slots)

    def alloc(self, need_size: int) -> list[int] | None:
        """Take ``need_size`` slots from the front of the free list.

        Args:
            need_size: Slots wanted (tokens), >= 0.

        Returns:
            The slot ids, or None (nothing taken) when fewer are free.

        Raises:
            ValueError: If need_size is negative or not an int.
        """
        if isinstance(need_size, bool) or not isinstance(need_size, int) or need_size < 0:
            raise ValueError(f"need_size must be an int >= 0 (tokens), got {need_size!r}")
        if need_size > len(self.free_slots):
            return None
        out = [self.free_slots.popleft() for _ in range(need_size)]
        self._allocated.update(out)
        if self.recorder is not None and out:
            self.recorder.slots_allocated(out)
        return out

    def free(self, free_index: Iterable[int]) -> None:
        """Return slots to the end of the free list, in order.

        Raises:
            ValueError: If a slot is not currently allocated (nothing is freed then).
        """
        slots = list(free_index)
        bad = [s for s in slots if s not in self._allocated]
        if bad or len(set(slots)) != len(slots):
            raise ValueError(
                f"cannot free slots {bad[:8] or slots[:8]}: not allocated or listed twice"
            )
        self._allocated.difference_update(slots)
        self.free_slots.extend(slots)
        if self.recorder is not None and slots:
            self.recorder.slots_freed(slots)

    def evict_to_free_tokens(self, tree_cache: _Evictable | None, num_tokens: int) -> int:
        """Evict from ``tree_cache`` until ``num_tokens`` slots are free, or nothing is left.

        Mirrors: sglang/srt/mem_cache/allocator/base.py::BaseTokenToKVPoolAllocator
        .evict_to_free_tokens (0.5.23): the tree is asked for the *shortfall*, ``num_tokens``
        minus the free slots, and for nothing when enough are free.

        Args:
            tree_cache: The RadixCache whose values hold this pool's slots (None: no tree).
            num_tokens: Slots the caller is about to allocate (tokens), >= 0.

        Returns:
            Tokens the tree evicted (SGLang returns nothing; kvlab counts them).

        Raises:
            ValueError: If num_tokens is negative or not an int.
        """
        if isinstance(num_tokens, bool) or not isinstance(num_tokens, int) or num_tokens < 0:
            raise ValueError(f"num_tokens must be an int >= 0 (tokens), got {num_tokens!r}")
        if tree_cache is None:
            return 0
        shortfall = num_tokens - self.available_size()
        if shortfall > 0:
            return tree_cache.evict(shortfall)
        return 0
