"""Fleet routing: exact replica choices, per-replica exactness, hits lost to routing."""

import json
import random

import pytest

from kvlab.traffic import prepare_blocks, read_mooncake_lines, replay_sequence
from kvlab.traffic.blocks import BlockedTraffic
from kvlab.traffic.fleet import ROUTINGS, replay_fleet
from kvlab.traffic.synthetic import random_mooncake_lines


def _b(*reqs, bs=512):
    lines = [json.dumps({"timestamp": 0, "input_length": n, "output_length": 1, "hash_ids": ids})
             for n, ids in reqs]
    return prepare_blocks(read_mooncake_lines(lines), bs)


# Every request shares block 0 (a system prompt); conversations X (ids 1, 2, ...) and Y (5, 6).
CONV = [(1100, [0, 1, 9]), (1024, [0, 5]), (1600, [0, 1, 2, 8]), (1100, [0, 5, 7]),
        (2100, [0, 1, 2, 3, 4])]


def test_replica_choices_counted_by_hand():
    b = _b(*CONV)
    cap = 100 * 512
    assert replay_fleet(b, 2, "round-robin", cap).per_request_replica == [0, 1, 0, 1, 0]
    assert replay_fleet(b, 2, "least-loaded", cap).per_request_replica == [0, 1, 1, 0, 0]
    # Session: the first block past the shared block 0: key 1 (X) -> replica 1, key 2 (Y) -> 0.
    sess = replay_fleet(b, 2, "session", cap)
    assert sess.per_request_replica == [1, 0, 1, 0, 1]
    assert sess.per_request_hit_tokens == [0, 0, 1024, 1024, 1536]
    # Prefix-aware: request 1 finds 1 of 2 blocks on replica 0 (not more than half: least
    # loaded, replica 1); request 2 finds 2 of 3 on replica 0, request 4 3 of 4.
    pa = replay_fleet(b, 2, "prefix-aware", cap)
    assert pa.per_request_replica == [0, 1, 0, 1, 0]
    assert pa.hit_tokens == sess.hit_tokens == 3584
    # One pool also gives request 1 the shared block 0.
    assert (pa.pooled_hit_tokens, pa.hits_lost_to_routing) == (4096, 512)


def test_round_robin_loses_hits_to_routing():
    b = _b(*CONV)
    rr = replay_fleet(b, 3, "round-robin", 100 * 512)
    assert rr.per_request_replica == [0, 1, 2, 0, 1]
    assert rr.per_request_hit_tokens == [0, 0, 0, 512, 512]
    assert (rr.pooled_hit_tokens, rr.hits_lost_to_routing) == (4096, 3072)
    assert rr.replica_requests == [2, 2, 1] and rr.replica_prompt_tokens == [2200, 3124, 1600]
    assert rr.load_imbalance == pytest.approx(3124 / (6924 / 3))


@pytest.mark.parametrize("routing", ROUTINGS)
def test_each_replica_is_exactly_vllm_on_its_requests(routing):
    rng = random.Random(3)
    b = prepare_blocks(read_mooncake_lines(random_mooncake_lines(rng, 60)), 64)
    res = replay_fleet(b, 3, routing, 30 * 64, seed=5)
    for r in range(3):
        idx = [i for i, x in enumerate(res.per_request_replica) if x == r]
        sub = BlockedTraffic([b.requests[i] for i in idx], 64, None, [b.keys[i] for i in idx],
                             b.num_keys)
        sub._block_hashes = [b.block_hashes[i] for i in idx]
        want = replay_sequence(sub, "vllm", 30 * 64).per_request_hit_tokens
        assert [res.per_request_hit_tokens[i] for i in idx] == want


def test_random_routing_is_reproducible_and_bad_arguments_are_refused():
    b = _b(*CONV)
    assert (replay_fleet(b, 3, "random", 10**5, seed=1).per_request_replica
            == replay_fleet(b, 3, "random", 10**5, seed=1).per_request_replica)
    with pytest.raises(ValueError, match="unknown routing 'sticky'; allowed: round-robin, random"):
        replay_fleet(b, 2, "sticky", 10**5)
    with pytest.raises(ValueError, match="replicas must be an int >= 1, got 0"):
        replay_fleet(b, 0, "random", 10**5)
