"""A request as SGLang's prefix cache sees it: its tokens, its KV slots, its locked node.

Mirrors: sglang/srt/managers/schedule_batch.py::Req and ReqKvInfo (SGLang 0.5.23), reduced to the
fields the radix cache's life cycle reads and writes (``RadixCache.checkpoint``,
``release_kv_cache``). Differs: the request's row of slots lives on the request
(``kv_indices``; SGLang keeps it in ``ReqToTokenPool.req_to_token[req.kv.req_pool_idx]``), the
ReqKvInfo fields sit on the request itself, and the lock is the locked node (``last_node``;
SGLang also keeps a ``TreeLock`` receipt in ``req.lock``).

Examples:
    >>> req = Req("r0", [1, 2, 3]); req.output_ids.append(7); req.fill_ids
    [1, 2, 3, 7]
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

__all__ = ["Req"]


@dataclass
class Req:
    """One request's state in the radix cache's life cycle.

    Attributes:
        rid: The request id.
        origin_input_ids: The prompt (token ids).
        output_ids: Tokens sampled so far (token ids).
        kv_indices: The KV slot of each token whose KV exists, tokens 0..n-1 (the request's
            req_to_token row).
        cache_protected_len: The tree owns ``kv_indices[:cache_protected_len]`` (matched or
            inserted), the request the rest (ReqKvInfo.cache_protected_len) (tokens).
        last_node: The tree node this request holds a lock on (None before its first match).
    """

    rid: str
    origin_input_ids: list[int]
    output_ids: list[int] = field(default_factory=list)
    kv_indices: list[int] = field(default_factory=list)
    cache_protected_len: int = 0
    last_node: Any = None

    @property
    def fill_ids(self) -> list[int]:
        """Prompt then outputs (SGLang's ``full_untruncated_fill_ids``) (token ids)."""
        return self.origin_input_ids + self.output_ids
