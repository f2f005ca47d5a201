"""nano-vllm's BlockManager (a recorded kvlab.nanovllm.NanoBlockManager)."""

from __future__ import annotations

from typing import Any

from kvlab.i18n import N_, _
from kvlab.trace.designs import register
from kvlab.trace.designs.base import CacheDesign
from kvlab.trace.events import EventKind

__all__ = ["DESIGN", "NanoVllmDesign", "nano_summary"]

K = EventKind


def nano_summary(facts: Any) -> str:
    """One line of nano-vllm's counters (lookups, mismatches, stale entries, deque scans)."""
    return _(
        "nano-vllm so far: lookups {lookups}, hits {hits}, "
        "token-id mismatch misses {mismatches}, "
        "stale-entry hits {stale_hits}, "
        "re-activated blocks {reactivated} "
        "({scan_steps} deque positions scanned), "
        "stale map entries {stale_entries}"
    ).format(
        lookups=facts.num_lookups,
        hits=facts.num_hits,
        mismatches=facts.num_token_mismatches,
        stale_hits=facts.num_stale_hits,
        reactivated=facts.num_reactivated_blocks,
        scan_steps=facts.num_deque_scan_steps,
        stale_entries=len(facts.stale_entries),
    )


class NanoVllmDesign(CacheDesign):
    """hash_to_block_id (never pruned) + a deque free list (popleft / append, O(n) remove).

    Its lookups sit inside ``allocate`` (no get_computed_blocks), scan forward only, and check
    the token ids of an entry's block; see kvlab.trace.explain_nano for the facts it derives.
    """

    names = ("nano-vllm",)
    title = N_("nano-vllm BlockManager (hash_to_block_id + deque free_block_ids)")
    lookup_call_names = ("get_computed_blocks", "allocate")
    lookups_scan_forward = True

    def queue_labels(self, length: int) -> tuple[str, str]:
        return (
            _(
                "free_block_ids · nano-vllm deque · {length} blocks · popleft / append; "
                "a hit on a free block is removed by an O(n) scan"
            ).format(length=length),
            _("◀ deallocate appends here (last block first)"),
        )

    def explain_call(self, trace: Any, call: Any) -> Any | None:
        if call.name != "allocate":
            return None
        from kvlab.trace.explain_nano import explain_allocate  # NOTE: explain_nano imports explain

        return explain_allocate(trace, call)

    def how_evicted(self, trace: Any, i: int, j: int, top: Any, block_id: int | None) -> str:
        """A NanoBlockManager drops a cached block by resetting it or by overwriting its entry."""
        from kvlab.trace.explain import caller_text, evicted_text  # NOTE: explain imports designs

        cols, who = trace.cols, caller_text(top)
        if j > 1 and cols.kind[j - 1] == K.GET_NEW_BLOCKS and cols.kind[j - 2] == K.POPLEFT:
            return _(
                "{who} took block {block_id} from the head of free_block_ids (popleft) and "
                "reset its hash; its hash_to_block_id entry stayed behind, stale"
            ).format(who=who, block_id=block_id)
        k = i + 1
        while k < len(trace) and cols.kind[k] == K.BLOCK_REMOVED:
            k += 1
        stored = trace.payload(k) if k < len(trace) and cols.kind[k] == K.BLOCK_STORED else []
        if int(cols.b[i]) in stored[len(stored) // 2 :]:
            return _(
                "{who} stored the same hash in another block after its first miss: the "
                "hash_to_block_id entry was overwritten and block {block_id} can no longer be found"
            ).format(who=who, block_id=block_id)
        return evicted_text(block_id, top)

    def header_lines(self, trace: Any, index: int) -> list[str]:
        from kvlab.trace.explain_nano import nano_facts

        return [nano_summary(nano_facts(trace, index))]

    def event_notes(self, trace: Any, first: int, last: int) -> dict[int, str]:
        """A REMOVE is a re-activation (with its O(n) scan); a LOOKED_UP miss whose hash had an
        entry is a token-id mismatch; a hit through a stale entry is flagged."""
        from kvlab.trace.explain_nano import nano_facts

        if last < 0:
            return {}
        facts, notes = nano_facts(trace, last), {}
        for seq, steps in facts.scans.items():
            if seq >= first:
                notes[seq] = _(
                    "re-activates freed cached block {block_id} (O(n) deque scan: {steps} positions)"
                ).format(block_id=int(trace.cols.a[seq]), steps=steps)
        for seq, p in facts.probes.items():
            if seq < first:
                continue
            if p.verdict == "token_mismatch":
                msg = (
                    _("token-id mismatch: stale entry names block {block_id}")
                    if p.entry_stale
                    else _("token-id mismatch: entry names block {block_id}")
                )
                notes[seq] = msg.format(block_id=p.entry_block_id)
            elif p.verdict == "stale_hit":
                notes[seq] = _(
                    "hit through a stale entry: block {block_id}, another prefix"
                ).format(block_id=p.block_id)
        return notes

    def free_list_scans(self, trace: Any, index: int) -> dict[int, int]:
        from kvlab.trace.explain_nano import nano_facts

        return dict(nano_facts(trace, index).scans) if index >= 0 else {}


DESIGN = register(NanoVllmDesign())
