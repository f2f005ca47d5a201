"""Lab ``nano_block_manager``: the learner writes nano-vllm's BlockManager (allocate, deallocate,
can_allocate, can_append, may_append), the simple prefix cache vLLM V1 is best read against.

nano-vllm is not vLLM: there are no recorded vLLM decisions here. Fresh randomized workloads are
decided by kvlab's re-implementation of nano-vllm's BlockManager (``kvlab.compare``), and the
learner's class is compared with it after every call: block tables, ``num_cached_tokens``,
``free_block_ids`` in order, ref counts, hashes, tokens and ``hash_to_block_id``.
"""

from __future__ import annotations

import random
from collections import deque
from typing import Any

from kvlab.i18n import N_
from kvlab.labs.common import accept_class, randomized
from kvlab.labs.nano import NanoSide, record_nano_ops
from kvlab.labs.patterns import same_divergence
from kvlab.labs.registry import Accepted, Lab, Misconception, register

__all__ = ["LAB", "nano_model"]

METHODS = ("can_allocate", "allocate", "deallocate", "can_append", "may_append")
NB4 = "04_block_hashes_and_prefix_caching"


def _accept(value: Any) -> Accepted:
    return accept_class(value, "BlockManager", METHODS)


def _scenarios(seed: int) -> list:
    r = random.Random(seed)
    out = []
    for k in range(8):
        cfg = {"num_blocks": r.randint(5, 16), "block_size": r.choice([2, 2, 4])}
        run_seed = r.randrange(2**31)
        out.append(randomized(f"nano · {k}", lambda cfg=cfg, s=run_seed: record_nano_ops(NanoSide(cfg), s, 70)))
    return out


def _learner_side(rec: Any, accepted: Accepted) -> Any:
    return NanoSide(rec.config, accepted.parts["BlockManager"])


def _reference_side(rec: Any) -> Any:
    return NanoSide(rec.config)


# ------------------------------------------------------------------ models of the mistakes
def nano_model(*, check_tokens: bool = True, clear_seq: bool = True, count_hits: bool = False,
               tail_first: bool = True, chain_append: bool = True, reactivate: bool = True) -> Any:
    """nano-vllm's BlockManager with one mistake (keyword = nano-vllm's way)."""
    from kvlab.compare import NanoBlock, compute_hash

    class Model:
        def __init__(self, num_blocks: int, block_size: int) -> None:
            self.block_size = block_size
            self.blocks = [NanoBlock(i) for i in range(num_blocks)]
            self.hash_to_block_id: dict[int, int] = {}
            self.free_block_ids = deque(range(num_blocks))
            self.used_block_ids: set[int] = set()

        def _take(self, block_id: int) -> Any:
            block = self.blocks[block_id]
            block.reset()
            self.free_block_ids.remove(block_id)
            self.used_block_ids.add(block_id)
            return block

        def _lookup(self, seq: Any) -> list[int]:
            h, out = -1, []
            for i in range(seq.num_blocks):
                tokens = seq.block(i)
                h = compute_hash(tokens, h) if len(tokens) == self.block_size else -1
                b = self.hash_to_block_id.get(h, -1)
                out.append(b if b != -1 and (not check_tokens or self.blocks[b].token_ids == tokens) else -1)
            return out

        def can_allocate(self, seq: Any) -> bool:
            hits = sum(1 for b in self._lookup(seq) if b != -1) if count_hits else 0
            return len(self.free_block_ids) >= seq.num_blocks - hits

        def allocate(self, seq: Any) -> None:
            h, miss = -1, False
            for i, hit in enumerate(self._lookup(seq)):
                tokens = seq.block(i)
                h = compute_hash(tokens, h) if len(tokens) == self.block_size else -1
                miss = miss or hit == -1
                if miss:
                    block = self._take(self.free_block_ids[0])
                else:
                    seq.num_cached_tokens += self.block_size
                    block = self.blocks[hit]
                    if hit in self.used_block_ids or not reactivate:
                        block.ref_count += 1
                        self.used_block_ids.add(hit)
                    else:
                        block = self._take(hit)
                if h != -1:
                    block.update(h, tokens)
                    self.hash_to_block_id[h] = block.block_id
                seq.block_table.append(block.block_id)

        def deallocate(self, seq: Any) -> None:
            for block_id in (reversed(seq.block_table) if tail_first else list(seq.block_table)):
                block = self.blocks[block_id]
                block.ref_count -= 1
                if block.ref_count == 0:
                    self.used_block_ids.discard(block_id)
                    self.free_block_ids.append(block_id)
            if clear_seq:
                seq.num_cached_tokens = 0
            seq.block_table.clear()

        def can_append(self, seq: Any) -> bool:
            return len(self.free_block_ids) >= (len(seq) % self.block_size == 1)

        def may_append(self, seq: Any) -> None:
            table = seq.block_table
            if len(seq) % self.block_size == 1:
                table.append(self._take(self.free_block_ids[0]).block_id)
            elif len(seq) % self.block_size == 0:
                tokens = seq.block(seq.num_blocks - 1)
                prefix = self.blocks[table[-2]].hash if len(table) > 1 and chain_append else -1
                h = compute_hash(tokens, prefix)
                self.blocks[table[-1]].update(h, tokens)
                self.hash_to_block_id[h] = table[-1]

    return Model


def _model(**flags: Any) -> Any:
    def matches(div: Any) -> bool:
        return same_divergence(div, lambda: NanoSide(div.recording.config, nano_model(**flags)))

    return matches


CATALOGUE = (
    Misconception("nano_block_manager.no_token_check", N_("nano-vllm checks the tokens of a hit"),
                  N_("hash_to_block_id is never cleaned: an entry may point at a block reused for other tokens since, so a hit needs the block's token_ids to equal the block's tokens"),
                  NB4, N_("The contrast: nano-vllm"), _model(check_tokens=False)),
    Misconception("nano_block_manager.keeps_cached_count", N_("a deallocated sequence starts over"),
                  N_("deallocate also resets the sequence: its block_table is emptied and num_cached_tokens goes back to 0, so a preempted sequence is looked up again like a new one"),
                  NB4, N_("The contrast: nano-vllm"), _model(clear_seq=False)),
    Misconception("nano_block_manager.can_allocate_counts_hits", N_("can_allocate asks for every block"),
                  N_("nano-vllm's admission does not subtract hits: it wants a free block for each block of the sequence (vLLM's allocate_slots counts only new blocks and evictable hits)"),
                  NB4, N_("The study notes' example: one block, ref_count 2"), _model(count_hits=True)),
    Misconception("nano_block_manager.deallocate_head_first", N_("deallocate frees the last block first"),
                  N_("blocks go back to free_block_ids from the sequence's end, so its tail (the longest prefix, least likely shared) is reused first"),
                  NB4, N_("The contrast: nano-vllm"), _model(tail_first=False)),
    Misconception("nano_block_manager.unchained_append", N_("a block filled by decoding is hashed in its chain"),
                  N_("when may_append fills the last block, its hash chains the previous block's hash, exactly as allocate does"),
                  NB4, N_("Decode: can_append and may_append"), _model(chain_append=False)),
    Misconception("nano_block_manager.no_reactivation", N_("a hit on a freed block takes it back"),
                  N_("a freed block keeps its hash and tokens in free_block_ids; a hit on it must take it out of free_block_ids again (_allocate_block), not only count a reference"),
                  NB4, N_("deque.remove is O(n); vLLM's remove is O(1)"), _model(reactivate=False)),
)  # fmt: skip

LAB = register(Lab(
    name="nano_block_manager",
    title=N_("nano-vllm's BlockManager: the simple prefix cache, for contrast"),
    notebook="lab08_nano_block_manager",
    accept=_accept,
    scenarios=_scenarios,
    learner_side=_learner_side,
    reference_side=_reference_side,
    catalogue=CATALOGUE,
    after=("04_block_hashes_and_prefix_caching",),
    reference_name="nano-vllm",
))  # fmt: skip
