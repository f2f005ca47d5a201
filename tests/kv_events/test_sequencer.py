"""KVEventSequencer against a model of vLLM's publisher: random drops, duplicates, late joins and
replay buffer sizes; what is handed on is always in order and exactly what could be had."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from kvlab.kv_events.sequencer import KVEventSequencer


def test_gap_duplicate_and_garbage_bookkeeping() -> None:
    buffered = {s: f"b{s}" for s in range(8)}
    s = KVEventSequencer(replay=lambda first: [(q, b) for q, b in buffered.items() if q >= first])
    assert s.push(3, "b3") == [(3, "b3")]  # the first message sets the start
    assert s.push(4, None) == []  # garbage: seq used, nothing handed on
    assert s.push(7, "b7") == [(5, "b5"), (6, "b6"), (7, "b7")]
    assert s.push(6, "b6") == [] and s.push(0, "b0") == []
    h = s.health
    assert (h.num_gaps, h.num_recovered, h.num_duplicates, h.num_missing) == (1, 2, 2, 0)
    buffered.pop(5)
    buffered[6] = None  # garbage in the replay buffer
    t = KVEventSequencer(start_seq=2, replay=lambda first: [(q, b) for q, b in buffered.items()
                                                            if q >= first])  # fmt: skip
    assert t.catch_up() == [(2, "b2"), (3, "b3"), (4, "b4"), (7, "b7")]
    assert t.health.missing == [(5, 5)] and t.next_seq == 8
    assert KVEventSequencer(start_seq=4).catch_up() == []
    stale = KVEventSequencer(start_seq=4, replay=lambda first: [(1, "b1"), (2, "b2")])
    assert stale.catch_up() == [] and stale.next_seq == 4  # seqs below the one asked for: ignored


@st.composite
def streams(draw):
    n = draw(st.integers(1, 30))
    join = draw(st.integers(0, n))  # seqs before it were published before the subscriber joined
    live = []  # (seq, newest published seq at that moment)
    for seq in range(join, n):
        action = draw(st.sampled_from(["send", "send", "send", "drop", "dup"]))
        if action != "drop":
            live.append((seq, seq))
        if action == "dup":
            live.append((draw(st.integers(0, seq)), seq))
    return n, join, live


@settings(max_examples=300, deadline=None)
@given(streams(), st.integers(1, 40), st.booleans(), st.booleans())
def test_handed_on_in_order_and_exactly_what_could_be_had(stream, buffer_steps, replay_on,
                                                          late_catch_up) -> None:  # fmt: skip
    n, join, live = stream
    newest = [join - 1]  # what the publisher has published so far

    def replay(first):  # ZmqEventPublisher._service_replay over a deque(maxlen=buffer_steps)
        lo = max(0, newest[0] + 1 - buffer_steps)
        return [(q, f"b{q}") for q in range(max(lo, first), newest[0] + 1)]

    s = KVEventSequencer(0 if late_catch_up else None, replay if replay_on else None)
    out = s.catch_up()
    for seq, published in live:
        newest[0] = published
        out += s.push(seq, f"b{seq}")
    newest[0] = n - 1
    if replay_on and s.next_seq is not None:  # the subscriber asks again when the stream is quiet
        out += s.fill(s.next_seq, None)
    seqs = [q for q, _ in out]
    assert all(item == f"b{q}" for q, item in out)
    assert seqs == sorted(set(seqs)), "handed on out of order or twice"
    lost = {q for a, b in s.health.missing for q in range(a, b + 1)}
    assert not lost & set(seqs) and len(lost) == s.health.num_missing
    if s.next_seq is None:
        assert out == [] and not live
        return
    first = 0 if late_catch_up else live[0][0]
    covered = set(range(first, s.next_seq))
    assert set(seqs) | lost == covered, "a seq neither handed on nor reported missing"
    if replay_on:
        assert s.next_seq == n  # the quiet-time replay reaches the end of the stream
        if buffer_steps >= n:
            assert not lost and seqs == list(range(first, n))
    else:
        sent = sorted({q for q, p in live if q == p})
        assert seqs == sent and s.health.num_recovered == 0


def test_a_restarted_publisher_starts_over_and_its_first_batches_are_replayed() -> None:
    new = {0: "n0", 1: "n1", 2: "n2", 3: "n3"}  # the restarted publisher's buffer
    s = KVEventSequencer(replay=lambda first: [(q, b) for q, b in new.items() if q >= first],
                         digest=hash)  # fmt: skip
    assert [q for q, _ in (s.push(0, "o0") + s.push(1, "o1") + s.push(2, "o2"))] == [0, 1, 2]
    assert s.push(1, "o1") == []  # the same payload again: a duplicate
    assert s.push(2, "n2") == [(0, "n0"), (1, "n1"), (2, "n2")]  # seq 2, another payload: restart
    assert s.push(3, "n3") == [(3, "n3")]
    h = s.health
    assert (h.num_restarts, h.restarts, h.num_duplicates, h.num_recovered, h.num_missing) == (
        1, [(3, 2)], 1, 2, 0)  # fmt: skip
    assert s.next_seq == 4


def test_without_a_digest_a_lower_seq_is_always_a_duplicate() -> None:
    s = KVEventSequencer()
    s.push(5, "a")
    assert s.push(0, "b") == [] and s.health.num_restarts == 0 and s.health.num_duplicates == 1


def test_a_seq_older_than_the_recent_window_is_a_restart() -> None:
    s = KVEventSequencer(digest=hash, recent=4)
    for q in range(10):
        s.push(q, f"b{q}")
    assert s.push(8, "b8") == [] and s.health.num_duplicates == 1  # still remembered
    assert s.push(2, "b2") == [(2, "b2")]  # forgotten: the publisher restarted (0, 1 lost)
    assert s.health.num_restarts == 1 and s.health.missing == [(0, 1)]


def test_a_replay_reply_that_skips_batches_is_asked_again_from_the_first_skipped() -> None:
    buffered = {q: f"b{q}" for q in range(100)}
    asked = []

    def lossy_replay(first):  # a ROUTER past its send high-water mark: every 7th reply dropped
        asked.append(first)
        sent = [(q, b) for q, b in buffered.items() if q >= first]
        return [x for n, x in enumerate(sent) if n % 7 != 6 or len(asked) > 5]

    s = KVEventSequencer(replay=lossy_replay)
    s.push(0, "b0")
    out = s.push(99, "b99")
    assert [q for q, _ in out] == list(range(1, 100)) and s.health.num_missing == 0
    assert asked[0] == 1 and len(asked) > 1 and asked == sorted(asked)


def test_batches_the_publisher_no_longer_buffers_are_missing_without_asking_again() -> None:
    asked = []

    def replay(first):
        asked.append(first)
        return [(q, f"b{q}") for q in range(50, 60) if q >= first]

    s = KVEventSequencer(replay=replay)
    s.push(0, "b0")
    assert [q for q, _ in s.push(60, "b60")] == list(range(50, 61))
    assert s.health.missing == [(1, 49)] and asked == [1]


def test_a_reply_cut_at_the_routers_high_water_mark_is_asked_for_round_after_round() -> None:
    rounds = []

    def router(first):  # vLLM 0.22.1's ROUTER: the first 5 frames of a reply fit its pipe
        rounds.append(first)
        return [(q, f"b{q}") for q in range(first, 40)][:5]

    s = KVEventSequencer(replay=router)
    s.push(0, "b0")
    assert [q for q, _ in s.push(39, "b39")] == list(range(1, 40))
    assert s.health.num_missing == 0 and rounds == [1, 6, 11, 16, 21, 26, 31, 36]


def test_holes_above_the_oldest_buffered_batch_are_asked_again() -> None:
    rounds = []

    def router(first):  # buffer holds 20.. ; every reply loses what follows its first 5
        rounds.append(first)
        return [(q, f"b{q}") for q in range(max(first, 20), 40)][:5]

    s = KVEventSequencer(replay=router)
    s.push(0, "b0")
    assert [q for q, _ in s.push(39, "b39")] == list(range(20, 40))
    assert s.health.missing == [(1, 19)] and rounds == [1, 25, 30, 35]
