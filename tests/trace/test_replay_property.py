"""Property test: replaying a trace rebuilds the live KVCacheManager state at every event.

A hypothesis state machine plays a scheduler against a real KVCacheManager (unitary full
attention, and hybrid full + sliding window): requests with shared prefixes are admitted
(possibly in chunks), decoded, preempted (free + num_computed_tokens = 0), finished; blocks
are evicted with evict_blocks and the prefix cache is reset. A recorder subclass snapshots the
live manager after every hook. After every rule, for every new event i:

* ``trace.state_at(i)`` equals the live snapshot taken right after event i;
* the invariants hold for the replayed state (blocks mid-way through one BlockPool operation
  excused via ``trace.in_transit(i)``), with exact ref counts at call boundaries.

There is no exception: kvlab's BlockPool evicts (or removes from the queue) every block of a
``get_new_blocks`` / ``touch`` before counting any, so even inside those loops the live state
equals the replayed one.
"""

from __future__ import annotations

from typing import Any

from _trace_helpers import admit, decode, init_hashing, make_manager, make_request, preempt
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from kvlab.trace import EventKind, KVState, Recorder, check_invariants
from kvlab.trace.events import HOOK_KINDS

K = EventKind
PREFIXES = [list(range(1000, 1010)), list(range(2000, 2007)), [7, 7, 7, 7, 7, 7, 7, 7]]


class SnapshotRecorder(Recorder):
    """A Recorder that also snapshots the live manager after every hook."""

    def __init__(self) -> None:
        super().__init__()
        self.snapshots: dict[int, dict[str, Any]] = {}


def _snapshotting(name: str):
    base = getattr(Recorder, name)

    def hook(self: SnapshotRecorder, *args: Any) -> None:
        base(self, *args)
        self.snapshots[len(self) - 1] = KVState.from_manager(self.manager).canonical()

    return hook


for _name in HOOK_KINDS:
    setattr(SnapshotRecorder, _name, _snapshotting(_name))


class ReplayMachine(RuleBasedStateMachine):
    hybrid = False

    def __init__(self) -> None:
        super().__init__()
        init_hashing()
        self.manager = make_manager(20, hybrid=self.hybrid, sliding_window=8)
        self.rec = SnapshotRecorder().attach(self.manager)
        self.waiting: list = []
        self.running: list = []
        self.checked = 0
        self.count = 0
        self.step = 0

    @rule(
        prefix=st.integers(0, len(PREFIXES)),
        suffix=st.lists(st.integers(1, 5), max_size=14),
        chunk=st.sampled_from([None, None, 3, 5]),
    )
    def arrive(self, prefix: int, suffix: list[int], chunk: int | None) -> None:
        tokens = (PREFIXES[prefix] if prefix < len(PREFIXES) else []) + suffix
        if tokens:
            self.count += 1
            self.waiting.append(make_request(f"r{self.count}", tokens))
            self._admit(self.waiting[-1], chunk)

    def _admit(self, req, chunk: int | None) -> None:
        if admit(self.manager, req, None if chunk is None else min(chunk, req.num_tokens)):
            self.waiting.remove(req)
            self.running.append(req)

    @precondition(lambda self: self.waiting)
    @rule(data=st.data(), chunk=st.sampled_from([None, 3]))
    def admit_waiting(self, data: st.DataObject, chunk: int | None) -> None:
        self._admit(data.draw(st.sampled_from(self.waiting)), chunk)

    @precondition(lambda self: self.running)
    @rule(data=st.data(), tokens=st.lists(st.integers(1, 3), min_size=1, max_size=6))
    def decode(self, data: st.DataObject, tokens: list[int]) -> None:
        req = data.draw(st.sampled_from(self.running))
        for token in tokens:
            if not decode(self.manager, req, token):
                break

    @precondition(lambda self: self.running)
    @rule(data=st.data())
    def preempt(self, data: st.DataObject) -> None:
        req = data.draw(st.sampled_from(self.running))
        preempt(self.manager, req)
        self.running.remove(req)
        self.waiting.append(req)

    @precondition(lambda self: self.running)
    @rule(data=st.data())
    def finish(self, data: st.DataObject) -> None:
        req = data.draw(st.sampled_from(self.running))
        self.manager.free(req)
        self.running.remove(req)

    @rule(
        action=st.sampled_from(["evict_blocks", "reset_prefix_cache", "next_step"]),
        ids=st.sets(st.integers(0, 19), max_size=4),
    )
    def housekeeping(self, action: str, ids: set[int]) -> None:
        if action == "evict_blocks":
            self.manager.evict_blocks(ids)
        elif action == "reset_prefix_cache":
            self.manager.reset_prefix_cache()
        else:
            self.step += 1
            self.rec.mark_step(self.step)
            self.manager.new_step_starts()

    @invariant()
    def replay_matches_live(self) -> None:
        trace = self.rec.trace()
        for i in range(self.checked, len(trace)):
            replayed = trace.state_at(i)
            live = self.rec.snapshots.get(i)
            if live is not None:
                got, want = replayed.canonical(), live
                assert got == want, f"event {trace[i]}: replayed != live in " + ", ".join(
                    f"{k}: {got[k]} != {want[k]}" for k in got if got[k] != want[k]
                )
            at_boundary = trace.cols.kind[i] == K.CALL_END and trace.cols.depth[i] == 0
            check_invariants(
                replayed, in_transit=trace.in_transit(i), exact_ref_cnt=bool(at_boundary)
            )
        self.checked = len(trace)
        if len(trace):
            assert trace.final_state() == KVState.from_manager(self.manager)
        check_invariants(self.manager, exact_ref_cnt=True)


class HybridReplayMachine(ReplayMachine):
    hybrid = True


_SETTINGS = settings(
    max_examples=40,
    stateful_step_count=40,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
TestReplayUnitary = ReplayMachine.TestCase
TestReplayUnitary.settings = _SETTINGS
TestReplayHybrid = HybridReplayMachine.TestCase
TestReplayHybrid.settings = _SETTINGS
