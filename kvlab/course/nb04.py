"""Notebook 4's exercises (chained block hashes and prefix caching)."""

from __future__ import annotations

from kvlab.course.lab_setup import full_attention_manager, request_factory
from kvlab.course.check import Exercise, register

PROMPT = list(range(100, 114))
"""Notebook 4's 14-token prompt of request ``a``."""


def _manager(block_size: int = 4):
    return full_attention_manager(16, block_size), request_factory(block_size)


def exact_multiple_hits() -> tuple[int, int]:
    """Hits (tokens) of a 16-token lookup equal to a 16-token a, then with a 17th token."""
    manager, make = _manager()
    prompt = list(range(100, 116))
    a = make("a", prompt)
    manager.allocate_slots(a, 16)
    return (manager.get_computed_blocks(make("same 16", prompt))[1],
            manager.get_computed_blocks(make("17", prompt + [7]))[1])  # fmt: skip


def salted_hits() -> tuple[int, int]:
    """a computed with cache_salt='tenant-a'; hits of a same-prompt tenant-a and tenant-b request."""
    manager, make = _manager()
    a = make("a", PROMPT, cache_salt="tenant-a")
    manager.allocate_slots(a, a.num_tokens)
    return tuple(manager.get_computed_blocks(make(f"{t} again", PROMPT, cache_salt=t))[1]
                 for t in ("tenant-a", "tenant-b"))  # fmt: skip


def hit_after_evicting(block_id: int = 2) -> int:
    """The "same prefix" lookup's hit (tokens) after evict_blocks({block_id}) on a's blocks."""
    manager, make = _manager()
    a = make("a", PROMPT)
    manager.allocate_slots(a, a.num_tokens)
    manager.evict_blocks({block_id})
    return manager.get_computed_blocks(make("same prefix", PROMPT[:12] + [7, 7, 7]))[1]


def hits_with_block_size(block_size: int = 16) -> list[int]:
    """The four lookups of notebook 4 (same prefix, 8 shared, exactly 12, first differs)."""
    manager, make = _manager(block_size)
    a = make("a", PROMPT)
    manager.allocate_slots(a, a.num_tokens)
    probes = [PROMPT[:12] + [7, 7, 7], PROMPT[:8] + [1, 2, 3, 4, 5, 6, 7], PROMPT[:12], [0] + PROMPT[1:]]
    return [manager.get_computed_blocks(make(f"p{i}", p))[1] for i, p in enumerate(probes)]


register(Exercise(
    id="04.1",
    question="a's prompt is exactly 16 tokens; look up the same 16 tokens, then 16 + 1 more: "
    "how many tokens hit? Answer (hit_16, hit_17).",
    solve=exact_multiple_hits,
    hint="the cap is num_tokens - 1, and a hit covers whole blocks only.",
    explain="16 tokens: the cap (15) leaves 3 blocks; with a 17th token all 4 blocks fit under it.",
    mistakes=(((16, 16), "the last prompt token is never a hit: cap num_tokens - 1."),
              ((15, 16), "a hit is a whole number of blocks.")),
))  # fmt: skip
register(Exercise(
    id="04.2",
    question="a computes PROMPT with cache_salt='tenant-a'. A second tenant-a request and a "
    "tenant-b request with the same prompt: how many tokens does each hit? Answer (a, b).",
    solve=salted_hits,
    hint="the salt enters the first block's hash, and the chain carries it to every block.",
    explain="One salt per tenant: each tenant reuses its own prefix, never the other's.",
    mistakes=(((12, 12), "the salts differ, so every hash of the chain differs."),
              ((0, 0), "the same salt gives the same chain.")),
))  # fmt: skip
register(Exercise(
    id="04.3",
    question="evict_blocks({2}) (a's second block), then the 'same prefix' lookup: how many "
    "tokens hit? (Try other block ids: check('04.3', hit, block_id=3).)",
    solve=hit_after_evicting,
    hint="full attention scans left to right and stops at the first block not cached.",
    explain="The chain breaks at the evicted block; blocks after it cannot hit.",
    mistakes=((8, "block 2 holds tokens 4-7: the hit stops before it."),
              (12, "an evicted block is gone from cached_block_hash_to_block.")),
))  # fmt: skip
register(Exercise(
    id="04.4",
    question="With block_size = 16, what do the four lookups (same prefix, 8 shared, exactly "
    "12, first differs) hit? Answer a list of 4 token counts.",
    solve=hits_with_block_size,
    hint="how many full 16-token blocks does a's 14-token prompt have?",
    explain="No full block, no hash, no hit: a bigger block_size shares less.",
    mistakes=(([12, 8, 8, 0], "those were the hits with block_size 4."),),
))  # fmt: skip


def eagle_hit(num_extra: int = 1) -> int:
    """With use_eagle=True: a is 16 tokens; hit (tokens) of a's 16 tokens + ``num_extra`` more."""
    from kvlab.core import KVCacheManager

    config = full_attention_manager(16, 4).kv_cache_config
    manager = KVCacheManager(config, max_model_len=128, hash_block_size=4, use_eagle=True)
    make = request_factory(4)
    prompt = list(range(100, 116))
    manager.allocate_slots(make("a", prompt), 16)
    return manager.get_computed_blocks(make("probe", prompt + [7] * num_extra))[1]


def nano_scan_steps(num_blocks: int = 50) -> int:
    """Deque positions nano-vllm scans when a request hits a freed 2-block document."""
    from kvlab.nanovllm import NanoBlockManager, NanoSequence

    nano = NanoBlockManager(num_blocks=num_blocks, block_size=4)
    doc = NanoSequence("doc", list(range(8)), block_size=4)
    nano.allocate(doc)
    nano.deallocate(doc)
    nano.allocate(NanoSequence("hit", list(range(8)) + [99], block_size=4))
    return nano.stats.num_deque_scan_steps


register(Exercise(
    id="04.5",
    question="With use_eagle=True, a computes 16 tokens; how many tokens does a lookup of the "
    "same 16 tokens plus 1 hit? (Try check('04.5', hit, num_extra=5).)",
    solve=eagle_hit,
    hint="without EAGLE all 4 blocks hit (the cap is 16); EAGLE then gives back the last one.",
    explain="4 blocks under the cap, minus the block EAGLE recomputes for its hidden states: 12.",
    mistakes=((16, "EAGLE drops the last matched block."),
              (8, "EAGLE drops one block, once: after the num_tokens - 1 cap.")),
))  # fmt: skip
register(Exercise(
    id="04.6",
    question="nano-vllm with 50 free blocks: a 2-block document is computed and freed, then a "
    "request hits both blocks. How many deque positions do its two removes scan?",
    solve=nano_scan_steps,
    hint="deallocate appends the last block first, so both sit at the tail: block 0 at position "
    "49, then block 1 at 48 once block 0 is gone.",
    explain="(n - 1) + (n - 2) = 97 for n = 50: the scan grows with the pool; vLLM's linked list "
    "relinks 6 nodes whatever its length.",
    mistakes=((6, "6 is what vLLM's two removes relink; nano-vllm's deque must scan."),
              (99, "after the first remove the deque is one shorter.")),
))  # fmt: skip
