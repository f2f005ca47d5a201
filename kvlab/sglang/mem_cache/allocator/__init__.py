"""SGLang's ``mem_cache/allocator``: the token-to-KV-slot allocator (page size 1)."""

from kvlab.sglang.mem_cache.allocator.token import TokenToKVPoolAllocator

__all__ = ["TokenToKVPoolAllocator"]
