"""Lab ``free_queue``: the learner writes vLLM's FreeKVCacheBlockQueue.

The learner's class is graded directly (popleft, popleft_n, remove, append, append_n,
get_all_free_blocks on a queue of fresh blocks, against vLLM 0.22.1's recorded answers) and as
the free queue kvlab's BlockPool builds (whole scheduler-like workloads: vLLM's recorded free-queue
order after every call). A deque-based queue passes (same decisions) but is O(n) per ``remove``
(``kvlab.labs.free_queue_timing`` shows it on a large pool).
"""

from __future__ import annotations

from typing import Any

from kvlab.i18n import N_
from kvlab.labs.common import accept_class, manager_scenarios, recorded, randomized
from kvlab.labs.direct import QueueSide, record_queue_ops
from kvlab.labs.patterns import field_is, flat, queue_change
from kvlab.labs.plug import plugged
from kvlab.labs.registry import Accepted, Lab, Misconception, register
from kvlab.labs.sides import ManagerSide

__all__ = ["LAB"]

METHODS = ("popleft", "popleft_n", "remove", "append", "append_n", "get_all_free_blocks")
NB = "03_the_lru_free_queue"


def _accept(value: Any) -> Accepted:
    return accept_class(value, "FreeKVCacheBlockQueue", METHODS)


def _scenarios(seed: int) -> list:
    out = recorded("queue", limit=4)
    out += recorded("manager", lambda rec: rec.config["family"] in ("full", "full+sw", "sw")
                    and rec.config["events"], limit=3)  # fmt: skip
    for k in range(2):
        n = 6 + 7 * k
        out.append(randomized(f"queue · {k}", lambda n=n, k=k: record_queue_ops(QueueSide({"num_blocks": n}), n, seed + k, 40)))
    out += manager_scenarios(["full", "full+sw"], seed, 2, 40)
    return out


def _learner_side(rec: Any, accepted: Accepted) -> Any:
    cls = accepted.parts["FreeKVCacheBlockQueue"]
    if rec.kind == "queue":
        return QueueSide(rec.config, queue_cls=cls)
    return ManagerSide(rec.config, plug=lambda: plugged(queue_cls=cls))


def _reference_side(rec: Any) -> Any:
    return QueueSide(rec.config) if rec.kind == "queue" else ManagerSide(rec.config)


# ------------------------------------------------------------------ the catalogue's patterns
def _moves(div: Any) -> tuple[list, list, list, list, list] | None:
    q = queue_change(div)
    if q is None:
        return None
    before, want, got = q
    joined = [x for x in want if x not in before]  # blocks that joined the queue, in vLLM's order
    left_want = [x for x in before if x not in want]
    left_got = [x for x in before if x not in got]
    return before, want, got, joined, (left_want, left_got)


def _appends_at_head(div: Any) -> bool:
    m = _moves(div)
    if m is None:
        return False
    _, want, got, joined, _left = m
    k = len(joined)
    return 0 < k < len(want) and got != want and set(got) == set(want) and set(got[:k]) == set(joined) and got[k:] == [x for x in want if x not in joined]


def _append_n_reversed(div: Any) -> bool:
    m = _moves(div)
    if m is None:
        return False
    _, want, got, joined, _left = m
    return len(joined) >= 2 and got != want and got == [x for x in want if x not in joined] + joined[::-1]


def _pops_from_tail(div: Any) -> bool:
    m = _moves(div)
    if m is None:
        return False
    before, _, _, _, (left_want, left_got) = m
    k = len(left_got)
    return 0 < k < len(before) and set(left_got) == set(before[-k:]) and set(left_got) != set(left_want)


def _lowest_id_first(div: Any) -> bool:
    m = _moves(div)
    if m is None:
        return False
    before, want, got, _, (left_want, left_got) = m
    if len(got) >= 2 and got == sorted(got) and set(got) == set(want) and want != sorted(want):
        return True  # the queue is kept in block_id order
    k = len(left_got)
    lowest = sorted(before)[:k]
    return 0 < k < len(before) and got and set(left_got) == set(lowest) and set(left_want) != set(lowest)


def _popleft_n_order(div: Any) -> bool:
    if div.field != "return value" or div.op not in ("popleft_n", "allocate_slots"):
        return False
    want, got = flat(div.want), flat(div.got)
    return len(want) >= 2 and got == want[::-1]


def _count_out_of_sync(div: Any) -> bool:
    return div.field == "num_free_blocks" and "free queue" not in div.fields


def _lost_blocks(div: Any) -> bool:
    q = queue_change(div)
    if q is None or not field_is(div, "free queue"):
        return False
    _, want, got = q
    counted = div.got_state.get("num_free_blocks") == div.want_state.get("num_free_blocks")
    return counted and len(got) < len(want) and set(got) < set(want) and [x for x in want if x in got] == got


def _empty_popleft(div: Any) -> bool:
    return div.op == "popleft" and isinstance(div.want, dict) and div.want.get("raises") == "ValueError"


CATALOGUE = (
    Misconception("free_queue.empty_popleft", N_("an empty queue"),
                  N_("vLLM's popleft raises ValueError (“No free blocks available”) when only the two sentinels are left; it never returns a sentinel or None"),
                  NB, N_("popleft_n: new blocks come from the head"), _empty_popleft),
    Misconception("free_queue.lost_blocks", N_("a doubly linked list updates both neighbours"),
                  N_("some blocks can no longer be reached from the fake head: when a block is unlinked or linked, both the previous block's next_free_block and the next block's prev_free_block must change (and the sentinels' links)"),
                  NB, N_("remove: a hit takes blocks out of the middle"), _lost_blocks),
    Misconception("free_queue.append_n_reversed", N_("append_n keeps the order it is given"),
                  N_("free_blocks already passes a request's blocks tail first; the queue links them in exactly that order and does not reverse them again"),
                  NB, N_("append_n in reverse: the tail of a request is evicted first"), _append_n_reversed),
    Misconception("free_queue.lowest_id_first", N_("the order is the policy, not block ids or timestamps"),
                  N_("the queue does not sort or scan: the block at the head is evicted, whatever its block_id; nothing records when a block was used"),
                  "12_misconceptions", N_("4. \"Each block has an access timestamp; eviction picks the oldest\""), _lowest_id_first),
    Misconception("free_queue.append_at_head", N_("LRU order: a freed block joins the tail"),
                  N_("blocks that become free wait behind every block already in the queue; the head is what get_new_blocks takes next, so a block freed just now must not be reused first"),
                  NB, N_("append_n in reverse: the tail of a request is evicted first"), _appends_at_head),
    Misconception("free_queue.pops_from_tail", N_("new blocks come from the head"),
                  N_("popleft and popleft_n take the least recently freed blocks, at the head next to the fake head; the tail holds the most recently freed ones"),
                  NB, N_("popleft_n: new blocks come from the head"), _pops_from_tail),
    Misconception("free_queue.popleft_n_order", N_("popleft_n returns the blocks head first"),
                  N_("the n blocks come back in queue order, the old head first: they become the request's blocks in that order"),
                  NB, N_("popleft_n: new blocks come from the head"), _popleft_n_order),
    Misconception("free_queue.count_out_of_sync", N_("num_free_blocks counts the queue"),
                  N_("the order is right but num_free_blocks is not: every operation that links or unlinks blocks changes it by exactly that many"),
                  NB, N_("popleft_n: new blocks come from the head"), _count_out_of_sync),
)  # fmt: skip

LAB = register(Lab(
    name="free_queue",
    title=N_("vLLM's FreeKVCacheBlockQueue: the LRU free list"),
    notebook="lab01_free_queue",
    accept=_accept,
    scenarios=_scenarios,
    learner_side=_learner_side,
    reference_side=_reference_side,
    catalogue=CATALOGUE,
    after=("02_blocks_and_the_block_pool", "03_the_lru_free_queue"),
))  # fmt: skip
