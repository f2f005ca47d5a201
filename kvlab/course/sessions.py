"""The three 90-minute sessions of the course: objectives, timing, pre-test, exit quiz, labs.

One source for the lesson plan (docs/how-to/teach-a-class.md, whose tables the tests compare
with this module), the session slide decks (``kvlab slides --session N``) and the tests that
hold the assessment to the objectives: every objective is tested by at least one exit item, each
exit quiz has an "explain why" item (judged by a rubric, ``kvlab.course.rubric``) and an item
whose answer is a state the learner builds (a free-queue order, a block list, a slot mapping),
and every pre-test has five items. All keys are computed by running kvlab
(``kvlab.course.answer_key``).

Examples:
    >>> from kvlab.course.sessions import SESSIONS
    >>> [s.title for s in SESSIONS][0]
    'Blocks, the free queue, prefix caching'
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Block", "Objective", "SESSIONS", "Session", "session"]


@dataclass(frozen=True)
class Objective:
    """What a learner can do at the end of a session.

    Attributes:
        id: ``"S.k"`` (session, number).
        text: "Students can ..." completed, in one line.
        items: Exit-quiz items that test it (``kvlab.course`` exercise ids).
    """

    id: str
    text: str
    items: tuple[str, ...]


@dataclass(frozen=True)
class Block:
    """One slot of a session's timetable.

    Attributes:
        start, end: Minutes from the start of the session.
        activity: What happens (a notebook and its sections, a quiz, a demo).
        project: What the instructor projects.
        ask: Where to pause and ask (the question to put to the room).
        objectives: Objective ids this slot serves.
    """

    start: int
    end: int
    activity: str
    project: str
    ask: str
    objectives: tuple[str, ...] = ()


@dataclass(frozen=True)
class Session:
    """One 90-minute session.

    Attributes:
        number: 1, 2 or 3.
        title: Its subject.
        notebooks: Course notebooks it uses, in order (numbers).
        objectives: What it teaches (each tested by its exit quiz).
        timetable: Its slots, contiguous from 0 to 90 minutes.
        pretest: Five items asked before the session (parallel forms of exit items).
        exit_quiz: Items asked at the end.
        explain_items: Exit items judged by a rubric.
        state_items: Exit items whose answer is a state the learner builds.
        labs: The build-it labs that follow it (issue 18's ``kvlab.labs.LABS`` names).
        homework: What to assign before the next session.
    """

    number: int
    title: str
    notebooks: tuple[int, ...]
    objectives: tuple[Objective, ...]
    timetable: tuple[Block, ...]
    pretest: tuple[str, ...]
    exit_quiz: tuple[str, ...]
    explain_items: tuple[str, ...]
    state_items: tuple[str, ...]
    labs: tuple[str, ...]
    homework: str


SESSIONS = (
    Session(
        1, "Blocks, the free queue, prefix caching", (1, 2, 3, 4, 12),
        objectives=(
            Objective("1.1", "size a pool: page_size_bytes and num_blocks from a memory budget", ("quiz.8",)),
            Objective("1.2", "predict the free queue after free() and the blocks popleft takes",
                      ("quiz.3", "quiz.10", "exit1.1")),
            Objective("1.3", "compute a prefix-cache hit: chained hashes, full blocks, the num_tokens - 1 cap",
                      ("quiz.2",)),
            Objective("1.4", "tell the lookup (read-only) from allocate_slots (touch)", ("quiz.6",)),
            Objective("1.5", "explain why free() appends in reverse and why eviction is lazy", ("exit1.2",)),
        ),
        timetable=(
            Block(0, 5, "pre-test (pre1.1-pre1.5), answers kept for the exit quiz",
                  "the five questions", "no discussion yet: answers are compared at the end"),
            Block(5, 15, "notebook 1: why paged KV, sizing the pool", "the sizing cell; the pool grid",
                  "how many 16-token blocks fit in 56 GiB for 80 layers? (11,468)", ("1.1",)),
            Block(15, 30, "notebook 2: blocks and the block pool", "the player, one call at a time",
                  "before each call: what will ref_cnt be?", ("1.4",)),
            Block(30, 50, "notebook 3: the LRU free queue, with its predict player",
                  "the free-queue view, then the quiz player (popleft, evict)",
                  "the room answers each quiz question by show of hands before the click", ("1.2", "1.5")),
            Block(50, 70, "notebook 4: block hashes and prefix caching, with its hit quiz player",
                  "the hash-chain view; the hit quiz player",
                  "the same prompt again: how many tokens hit?", ("1.3",)),
            Block(70, 80, "notebook 12, sections 3, 4 and 6: radix tree, timestamps, the lookup",
                  "each cell's output and its assert", "vote on each claim before running its cell", ("1.4",)),
            Block(80, 90, "exit quiz, then the checks run live", "the exit questions",
                  "collect answers, run check() on the projector, compare with the pre-test"),
        ),
        pretest=("pre1.1", "pre1.2", "pre1.3", "pre1.4", "pre1.5"),
        exit_quiz=("quiz.8", "quiz.3", "quiz.10", "exit1.1", "quiz.2", "quiz.6", "exit1.2"),
        explain_items=("exit1.2",),
        state_items=("quiz.3", "quiz.10", "exit1.1"),
        labs=("free_queue", "block_pool", "block_hash", "full_attention_hit"),
        homework="the exercises of notebooks 3 and 4; the labs free_queue and block_hash",
    ),
    Session(
        2, "allocate_slots, windows, hybrid models, the worker", (5, 6, 7, 9),
        objectives=(
            Objective("2.1", "lay out allocate_slots' tokens (comp, new_comp, ext_comp, new, lookahead) "
                      "and count the blocks a call takes", ("exit2.1",)),
            Objective("2.2", "say which blocks become null blocks under a sliding window, and why its "
                      "hit is searched right to left", ("exit2.2", "exit2.5")),
            Objective("2.3", "follow the hybrid fixed point and the LCM alignment", ("exit2.3",)),
            Objective("2.4", "turn a block-table row into a slot mapping", ("exit2.4",)),
            Objective("2.5", "place drafts, rejected drafts and external (P/D) tokens in allocate_slots",
                      ("exit2.6", "exit2.7")),
        ),
        timetable=(
            Block(0, 5, "pre-test (pre2.1-pre2.5)", "the five questions", "no discussion yet"),
            Block(5, 30, "notebook 5: the layout, a chunked prefill, speculative decoding and async "
                  "scheduling, the P/D asynchronous load", "the allocate_slots view of each call",
                  "before each call: how many new blocks, and which become cached?", ("2.1", "2.5")),
            Block(30, 50, "notebook 6: sliding window and chunked local attention, the window quiz "
                  "player, the admission cap", "the block-table view; the window quiz player",
                  "which logical blocks become null blocks in this call?", ("2.2",)),
            Block(50, 65, "notebook 7: the fixed point (the Gemma-3-like lookup, the three-group "
                  "quiz player, LCM alignment); skip the sizing cells", "the fixed-point view",
                  "before each turn: does the hit shrink?", ("2.3",)),
            Block(65, 80, "notebook 9: block table and slot mapping, then the engine step map",
                  "the slot-mapping table; the engine-step figure",
                  "which slot does position 9 of this row go to?", ("2.4",)),
            Block(80, 90, "exit quiz", "the exit questions", "collect, check live, compare with the pre-test"),
        ),
        pretest=("pre2.1", "pre2.2", "pre2.3", "pre2.4", "pre2.5"),
        exit_quiz=("exit2.1", "exit2.2", "exit2.5", "exit2.3", "exit2.4", "exit2.6", "exit2.7"),
        explain_items=("exit2.5",),
        state_items=("exit2.1", "exit2.2", "exit2.4"),
        labs=("allocate_slots_layout", "sliding_window_hit", "hybrid_fixed_point"),
        homework="the exercises of notebooks 5 and 6; notebook 13 (the layers) to read; the lab "
        "allocate_slots_layout",
    ),
    Session(
        3, "The scheduler, preemption and resume, beyond one engine", (8, 12, 10, 11),
        objectives=(
            Objective("3.1", "predict which request is preempted and what its resume hits", ("quiz.4", "exit3.1")),
            Objective("3.2", "say when a resume recomputes and when KV offloading loads it back", ("exit3.2",)),
            Objective("3.3", "explain why the admission gate does not prevent preemption", ("exit3.3",)),
            Objective("3.4", "explain parallel sampling without copy-on-write", ("quiz.5",)),
            Objective("3.5", "contrast vLLM's hash map and free queue with a radix tree", ("exit3.4", "exit3.6")),
            Objective("3.6", "follow a P/D request through WAITING_FOR_REMOTE_KVS", ("exit3.5",)),
        ),
        timetable=(
            Block(0, 5, "pre-test (pre3.1-pre3.5)", "the five questions", "no discussion yet"),
            Block(5, 30, "notebook 8: continuous batching, chunked prefill, the admission gate, "
                  "preemption, with the preempt/hit quiz player", "the step log; the quiz player",
                  "who is preempted, and what will its resume hit?", ("3.1", "3.3")),
            Block(30, 45, "notebook 12, sections 1-2: preemption recomputes (and offloading loads), "
                  "n > 1 shares", "the resumed request's explain(); the offloading run",
                  "is the preempted request's cache copied to the CPU?", ("3.2", "3.4", "3.6")),
            Block(45, 60, "vLLM beside a radix tree: the side-by-side player", "the side-by-side player",
                  "a 30-token system prompt, blocks of 4: how many tokens does each hit?", ("3.5",)),
            Block(60, 75, "notebook 10 (demo): the real model on the paged cache; notebook 11's "
                  "hit-rate curve", "the generated text and its prefix hit; the curve",
                  "how big must the cache be for the chat trace?", ()),
            Block(75, 90, "exit quiz", "the exit questions", "collect, check live, compare with the pre-test"),
        ),
        pretest=("pre3.1", "pre3.2", "pre3.3", "pre3.4", "pre3.5"),
        exit_quiz=("exit3.1", "quiz.4", "exit3.2", "exit3.3", "quiz.5", "exit3.4", "exit3.6", "exit3.5"),
        explain_items=("exit3.3", "exit3.4"),
        state_items=("exit3.1", "exit3.5"),
        labs=("nano_block_manager",),
        homework="notebook 11's exercises (capacity planning); the lab nano_block_manager",
    ),
)
"""The three sessions, in order."""


def session(number: int) -> Session:
    """Session ``number`` (1-3).

    Raises:
        ValueError: No such session; the message names the ones there are.
    """
    for s in SESSIONS:
        if s.number == number:
            return s
    raise ValueError(f"no session {number!r}; the sessions are {[s.number for s in SESSIONS]}")
