"""Session 3's pre-test and exit quiz (the scheduler, preemption and resume, KV transfer, radix).

Keys computed by running kvlab; see ``kvlab.course.sessions`` for the objectives they test.
"""

from __future__ import annotations

from kvlab.core.sched import Scheduler, SchedulerConfig
from kvlab.course.lab_setup import full_attention_manager, request_factory
from kvlab.course.check import Exercise, register
from kvlab.course.nb08 import preempted, run
from kvlab.course.nb12 import children_blocks
from kvlab.course.rubric import Rubric, explain_item


def _run(scheduler) -> None:
    while scheduler.has_unfinished_requests():
        out = scheduler.schedule()
        scheduler.update_from_output(out, {r: [7] for r in out.num_scheduled_tokens})


def three_requests() -> Scheduler:
    """x, y, z (10-token prompts, 8 output tokens) in a 10-block pool, 4 tokens per block."""
    manager, make = full_attention_manager(10, 4, 128, layer="layers"), request_factory(4, max_tokens=8)
    scheduler = Scheduler(manager, SchedulerConfig(max_num_seqs=4, max_num_batched_tokens=32, max_model_len=128))
    for rid, start in (("x", 0), ("y", 100), ("z", 200)):
        scheduler.add_request(make(rid, list(range(start, start + 10))))
    _run(scheduler)
    return scheduler


def preempted_of_three() -> list[str]:
    return [rid for record in three_requests().step_log for rid in record.preempted_req_ids]


def resume_hit_of(request_id: str = "z") -> int:
    log = three_requests().step_log
    return next(s.num_cached_tokens for r in log for s in r.scheduled
                if s.request_id == request_id and s.kind == "resumed")  # fmt: skip


def gate_admits() -> tuple[bool, bool]:
    """A 40-token request's first 8-token chunk with 9 blocks free: admitted with the gate, without."""
    answers = []
    for gate in (True, False):
        manager, make = full_attention_manager(10, 4, 128), request_factory(4)
        answers.append(manager.allocate_slots(make("r", list(range(40))), 8, full_sequence_must_fit=gate) is not None)
    return answers[0], answers[1]


def vllm_and_radix_hits(num_requests: int = 3, system_len: int = 10, user_len: int = 6) -> tuple[int, int]:
    """(vLLM's, the radix tree's) prefix-cache hit tokens on a shared system prompt (blocks of 4)."""
    from kvlab.compare import compare, shared_system_prompt

    c = compare(shared_system_prompt(num_requests, system_len, user_len, 2), pool_tokens=256,
                block_size=4, policies=("vllm", "radix"))  # fmt: skip
    hits = {s.policy: s.hit_tokens for s in c.summaries()}
    return hits["vllm"], hits["radix"]


def resume_with_and_without_offloading(num_blocks: int = 13) -> tuple[int, int]:
    """B's resume hit (tokens) in notebook 12's A/B run: plain recompute, then CPU offloading."""
    from kvlab.kv_transfer import ConnectorScheduler, CPUOffloadingConnector

    hits = []
    for offload in (False, True):
        manager, make = full_attention_manager(num_blocks, 4, 128, layer="layers"), request_factory(4, max_tokens=10)
        config = SchedulerConfig(max_num_seqs=4, max_num_batched_tokens=64, max_model_len=128)
        scheduler = (ConnectorScheduler(manager, config, CPUOffloadingConnector(block_size=4, num_cpu_blocks=64))
                     if offload else Scheduler(manager, config))  # fmt: skip
        for name, start in (("A", 100), ("B", 200)):
            scheduler.add_request(make(name, list(range(start, start + 20))))
        _run(scheduler)
        hits.append(next(s.num_cached_tokens for r in scheduler.step_log for s in r.scheduled
                         if s.request_id == "B" and s.kind == "resumed"))  # fmt: skip
    return hits[0], hits[1]


def remote_statuses() -> list[str]:
    """c's status after each of the first four schedule() calls (P/D decode side, 2-step load)."""
    from kvlab.kv_transfer import ConnectorScheduler, RemotePrefillConnector

    manager, make = full_attention_manager(16, 4, 128, layer="layers"), request_factory(4, max_tokens=3)
    scheduler = ConnectorScheduler(manager, SchedulerConfig(max_num_seqs=4, max_num_batched_tokens=16, max_model_len=128),
                                   RemotePrefillConnector(remote_prefilled={"c"}, load_steps=2))  # fmt: skip
    scheduler.add_request(make("a", list(range(20))))
    c = make("c", list(range(100, 112)))
    scheduler.add_request(c)
    statuses = []
    for _ in range(4):
        out = scheduler.schedule()
        statuses.append(c.status.name)
        scheduler.update_from_output(out, {r: [7] for r in out.num_scheduled_tokens})
    return statuses


def why_the_gate_does_not_reserve() -> str:
    log = run()
    free_at_admission = log[3].num_free_blocks
    return (f"The gate (full_sequence_must_fit) checks at admission that the blocks for the request's "
            f"whole current sequence are free now; it reserves nothing. In notebook 8's run chat-3 is "
            f"admitted at step 3 with {free_at_admission} blocks free, enough for its prompt, but the "
            f"running requests are scheduled first each step and their decode tokens take the free blocks; "
            f"at step 4 none is left for chat-3's second chunk, so it is preempted ({preempted()}). "
            "The gate keeps requests that cannot even hold their prompt out; it does not prevent preemption.")


WHY_GATE = Rubric((
    ("it checks, at admission, that the whole current sequence fits in the free blocks",
     (r"whole", r"full sequence", r"entire", r"整个", r"完整")),
    ("it reserves nothing: running requests take the free blocks first",
     (r"reserv", r"running request", r"decode", r"预留", r"运行中")),
    ("so a request admitted through the gate can still be preempted", (r"preempt", r"抢占")),
))  # fmt: skip


def vllm_vs_radix() -> str:
    vllm, radix = vllm_and_radix_hits(4, 30, 8)
    return (f"vLLM caches only full blocks, keyed by chained block hashes in a flat hash map; SGLang's "
            f"radix tree matches token by token. With a 30-token system prompt and 4-token blocks vLLM "
            f"hits {vllm} tokens and the radix tree {radix}: 28 of the 30 tokens per follower versus all "
            "30. vLLM evicts in free-queue order (the least recently freed block, a request's tail "
            "first); the radix tree evicts the least recently used unlocked leaves.")


WHY_RADIX = Rubric((
    ("granularity: vLLM caches full blocks, the radix tree any number of tokens",
     (r"full blocks?", r"block granular", r"token by token", r"token[- ]granular", r"满块", r"逐 ?token")),
    ("eviction: vLLM follows the free queue's order, the radix tree evicts LRU leaves",
     (r"free[- ]queue", r"leaves|leaf", r"空闲队列", r"叶")),
    ("structure: a flat hash map of chained block hashes against a tree", (r"hash", r"哈希")),
))  # fmt: skip

ITEMS = (
    Exercise("pre3.1", "x, y, z (10-token prompts, 8 output tokens each) run in a 10-block pool "
             "(blocks of 4). Which requests are preempted, in order?", preempted_of_three,
             "the scheduler preempts running[-1], the newest admission, when allocate_slots fails.",
             mistakes=((["x"], "the oldest request is never the first victim."),)),
    Exercise("pre3.2", "In the same run, how many tokens does z hit when it resumes?", resume_hit_of,
             "a resume looks up the prefix cache; z's freed blocks were taken by x and y.",
             mistakes=((16, "z's freed blocks did not survive: look at what x and y allocated."),)),
    Exercise("pre3.3", "9 blocks are free. A 40-token request's first 8-token chunk with "
             "full_sequence_must_fit=True, then False: admitted? Answer (with, without).", gate_admits,
             "the gate counts the blocks of the whole sequence.",
             mistakes=(((True, True), "the whole 40-token sequence needs 10 blocks."),)),
    Exercise("pre3.4", "n = 3 parallel-sampling children of one 9-token prompt (blocks of 4) are "
             "prefilled. How many blocks are in use?", lambda: children_blocks(9, 3),
             "full blocks are shared through the prefix cache; each child has its own tail block.",
             mistakes=((9, "the full blocks are shared, not copied."), (3, "each child's partial tail is its own."))),
    Exercise("pre3.5", "3 requests share a 10-token system prompt (blocks of 4). Prefix-cache hit "
             "tokens summed over them, vLLM and a radix tree? Answer (vllm, radix).", vllm_and_radix_hits,
             "vLLM hits whole blocks only; the radix tree matches tokens.",
             mistakes=(((20, 20), "vLLM cannot hit the 2 tokens of a partial block."),)),
    Exercise("exit3.1", "Notebook 8's workload with a 17-block pool: which requests are preempted, "
             "in order?", lambda: preempted(num_blocks=17),
             "re-run the workload with num_blocks=17 and read record.preempted_req_ids.",
             mistakes=((["chat-3"], "that is the 20-block pool."),
                       (["long", "chat-2"], "the newest running request goes first."))),
    Exercise("exit3.2", "Notebook 12's A and B in a 13-block pool: how many tokens does B hit when it "
             "resumes, without a KV connector and with CPU offloading? Answer (without, with).",
             resume_with_and_without_offloading,
             "without a connector only the blocks still cached hit; with offloading the rest loads from CPU.",
             mistakes=(((16, 16), "offloading loads the blocks A reused back from CPU."),
                       ((0, 24), "B's blocks that A did not take are still cached."))),
    explain_item("exit3.3", "Explain why scheduler_reserve_full_isl does not prevent preemption.",
                 why_the_gate_does_not_reserve, WHY_GATE,
                 mistakes=(("the gate is off by default", "it is on by default: say what it checks and "
                            "what it does not hold back."),)),
    explain_item("exit3.4", "Explain how vLLM's prefix cache (hash map + free queue) and SGLang's "
                 "radix tree differ on the same workload.", vllm_vs_radix, WHY_RADIX,
                 mistakes=(("vLLM also uses a radix tree", "vLLM's cache is no tree: name granularity, "
                            "eviction order and structure."),)),
    Exercise("exit3.5", "A P/D decode server: c (12 tokens) is loaded from a prefill server in 2 steps "
             "while a runs. c's status after each of the first 4 schedule() calls?", remote_statuses,
             "admitted with an asynchronous load, c waits in WAITING_FOR_REMOTE_KVS until the load ends.",
             mistakes=((["WAITING", "RUNNING", "RUNNING", "RUNNING"],
                        "with an asynchronous load nothing runs for c until its KV has arrived."),)),
    Exercise("exit3.6", "4 requests share a 30-token system prompt (8 own tokens each, blocks of 4). "
             "Hit tokens summed, vLLM and the radix tree? Answer (vllm, radix).",
             lambda: vllm_and_radix_hits(4, 30, 8), "28 of the 30 tokens fill whole blocks.",
             mistakes=(((90, 90), "vLLM hits whole blocks only."),)),
)  # fmt: skip

for _item in ITEMS:
    register(_item)
