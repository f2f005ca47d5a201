"""The classroom demo: SmolLM2 on real prompts through kvlab's KV-cache manager and kernels.

Three acts on one deliberately small block pool, so every mechanism of vLLM V1's prefix cache
shows up in one trace:

1. **Shared system prompt** — several chat requests start with the same system turn: the first
   one computes its blocks, the others hit them (``get_computed_blocks`` → ``touch``).
2. **Multi-turn chat** — each turn re-sends the whole conversation; the new turn hits the blocks
   of the previous turns (prompt *and* generated answer, once the blocks are full).
3. **Burst** — long unrelated prompts decoding side by side outgrow the pool: cached blocks of
   finished requests are evicted (lazy eviction in ``get_new_blocks``) and the newest running
   request is preempted and later recomputed.

``run_demo`` returns a ``DemoResult``; ``kvlab demo`` (kvlab/cli.py) draws it.

``DemoConfig(lang="zh")`` (``kvlab demo --lang zh``) runs the same three acts on Chinese prompts
(``PROMPTS["zh"]``): a Chinese system prompt of about 130 SmolLM2 tokens is the shared prefix,
so a Chinese classroom sees its own text hit the prefix cache (the model's Chinese answers are
weak; the cache is the point).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

__all__ = ["PROMPTS", "DemoConfig", "DemoPrompts", "DemoRequest", "DemoResult", "run_demo",
           "trace_counts"]

SYSTEM_PROMPT = (
    "You are KV, a patient teaching assistant for a course on large language model serving. "
    "Answer in one or two short sentences, plainly, without lists or code. When a question is "
    "about memory, mention blocks; when it is about speed, mention reuse."
)
SHARED_QUESTIONS = [
    "What is a KV cache?",
    "Why do servers split the KV cache into blocks?",
    "What does prefix caching save?",
    "What happens when the cache is full?",
]
CHAT_TURNS = [
    "Give me one tip for learning a new programming language.",
    "Why does that tip work?",
    "Summarise both answers in five words.",
]
BURST_PROMPTS = [
    "Write a short story about a lighthouse keeper who finds a mysterious bottle on the beach, "
    "with a surprising ending that involves the tides and an old friend from the village.",
    "Describe, step by step, how bread rises: the yeast, the sugars, the gas, the gluten network, "
    "the oven spring and why a cold kitchen slows everything down.",
    "Explain to a ten year old how the moon changes shape during the month and why we always see "
    "the same side of it, using a lamp and an orange as the example.",
    "List the things a traveller should check before a long hike in the mountains, from weather "
    "and water to maps, shoes, and telling someone where they are going.",
]

SYSTEM_PROMPT_ZH = (
    "你是 KV，一门大语言模型推理服务课程的助教，耐心而细致。请用一两句简短的中文回答，"
    "语言平实，不要列表，也不要代码。问题与显存有关时，请提到“块”；与速度有关时，请提到“复用”。"
)
SHARED_QUESTIONS_ZH = [
    "什么是 KV 缓存？",
    "推理服务为什么要把 KV 缓存切分成块？",
    "前缀缓存能省下什么？",
    "缓存满了会发生什么？",
]
CHAT_TURNS_ZH = [
    "给我一个学习新编程语言的建议。",
    "这个建议为什么有效？",
    "用五个字总结上面两个回答。",
]
BURST_PROMPTS_ZH = [
    ("写一个短篇故事：灯塔看守人在海滩上捡到一个神秘的漂流瓶，结局出人意料，和潮汐以及村里的一位"
     "老朋友有关。"),
    ("一步一步讲讲面包是怎么发起来的：酵母、糖、气体、面筋网络、进炉后的膨胀，以及为什么厨房冷了"
     "一切都会变慢。"),
    ("用一盏台灯和一个橙子做例子，向十岁的孩子解释月亮在一个月里为什么会变形，以及为什么我们总是"
     "看到它的同一面。"),
    "列出去山里长途徒步之前应该检查的事项，从天气和饮水，到地图、鞋子，再到告诉别人你要去哪里。",
]


@dataclass(frozen=True)
class DemoPrompts:
    """The text of the three acts in one language.

    Attributes:
        system: The system prompt every act-1 and act-2 request starts with (the shared prefix).
        shared_questions: Act 1's user questions, one request each.
        chat_turns: Act 2's user turns, one conversation.
        burst: Act 3's long unrelated prompts (no system prompt).
    """

    system: str
    shared_questions: tuple[str, ...]
    chat_turns: tuple[str, ...]
    burst: tuple[str, ...]


PROMPTS: dict[str, DemoPrompts] = {
    "en": DemoPrompts(SYSTEM_PROMPT, tuple(SHARED_QUESTIONS), tuple(CHAT_TURNS),
                      tuple(BURST_PROMPTS)),
    "zh": DemoPrompts(SYSTEM_PROMPT_ZH, tuple(SHARED_QUESTIONS_ZH), tuple(CHAT_TURNS_ZH),
                      tuple(BURST_PROMPTS_ZH)),
}
"""Language (kvlab.i18n.LANGUAGES) -> the demo's prompts in it."""


@dataclass(frozen=True)
class DemoConfig:
    """Sizes of the demo (defaults fit a 2-core laptop in well under 3 minutes) and the language
    of its prompts (``lang``: ``"en"`` or ``"zh"``, see PROMPTS).

    Raises:
        ValueError: If ``lang`` is not a language kvlab speaks (names en, zh).
    """

    num_gpu_blocks: int = 24
    block_size: int = 16
    max_num_seqs: int = 4
    max_num_batched_tokens: int = 128
    max_tokens: int = 32
    burst_max_tokens: int = 48
    attention_backend: str = "auto"
    quick: bool = False
    lang: str = "en"

    def __post_init__(self) -> None:
        from kvlab.i18n import check_language

        object.__setattr__(self, "lang", check_language(self.lang))


@dataclass
class DemoRequest:
    """One request of the demo with what the cache did for it."""

    request_id: str
    act: str
    prompt_tokens: int
    cached_tokens: int
    output_tokens: int
    preemptions: int
    finish_reason: str | None
    text: str

    @property
    def hit_rate(self) -> float:
        """Share of the prompt served from the prefix cache at first admission."""
        return self.cached_tokens / self.prompt_tokens if self.prompt_tokens else 0.0


@dataclass
class DemoResult:
    """Everything ``kvlab demo`` reports."""

    config: DemoConfig
    llm: Any
    requests: list[DemoRequest] = field(default_factory=list)
    shared_prompt_ids: list[int] = field(default_factory=list)
    seconds: float = 0.0
    load_seconds: float = 0.0
    act_end: dict[str, int] = field(default_factory=dict)
    """Index of the last event recorded in each act (to draw the cache as each act ended)."""

    @property
    def trace(self):
        """The recorded trace."""
        return self.llm.trace


def trace_counts(trace) -> dict[str, int]:
    """Blocks allocated / hit / evicted, preemption-free counts read off a trace's columns.

    Returns:
        ``{"events", "steps", "blocks_allocated", "blocks_touched", "blocks_evicted",
        "blocks_stored", "lookups", "lookup_hits"}``.
    """
    from kvlab.trace import EventKind as K

    kind, a, b = trace.cols.kind, trace.cols.a, trace.cols.b
    lengths = np.diff(trace.cols.offsets)

    def payload_len(k: K) -> int:
        return int(lengths[kind == k].sum())

    lookups = kind == K.LOOKED_UP
    stored = trace.filter(K.BLOCK_STORED)
    return {
        "events": len(trace),
        "steps": int((kind == K.STEP).sum()),
        "blocks_allocated": payload_len(K.GET_NEW_BLOCKS),
        "blocks_touched": payload_len(K.TOUCH),
        "blocks_evicted": int((kind == K.BLOCK_REMOVED).sum()),
        "blocks_stored": int(lengths[stored].sum() // 2),
        "lookups": int(lookups.sum()),
        "lookup_hits": int((lookups & (b >= 0)).sum()),
    }


def run_demo(config: DemoConfig = DemoConfig(), *, progress: Callable[[str, int, int], None] | None = None,
             llm: Any = None) -> DemoResult:
    """Run the three acts on one LLM and return the result.

    Args:
        config: Sizes.
        progress: Called as ``progress(act, num_finished, num_total)`` after every engine step.
        llm: An existing ``kvlab.model.engine.LLM`` to use (tests pass a small one).

    Returns:
        The DemoResult (its ``llm.trace`` holds every KV-cache decision).
    """
    from kvlab.model.engine import LLM, SamplingParams

    t0 = time.perf_counter()
    if llm is None:
        llm = LLM(num_gpu_blocks=config.num_gpu_blocks, block_size=config.block_size,
                  max_num_seqs=config.max_num_seqs,
                  max_num_batched_tokens=config.max_num_batched_tokens,
                  attention_backend=config.attention_backend, progress=False)
    result = DemoResult(config, llm, load_seconds=time.perf_counter() - t0)
    t1 = time.perf_counter()
    quick = config.quick
    params = SamplingParams(max_tokens=config.max_tokens if not quick else 8)

    def act(name: str, prompts: list[str]) -> list[Any]:
        total = len(prompts)
        done = 0

        def cb(_llm: Any, finished: list[Any]) -> None:
            nonlocal done
            done += len(finished)
            if progress is not None:
                progress(name, done, total)

        outputs = llm.generate(prompts, params_for(name), callback=cb)
        result.act_end[name] = len(llm.recorder) - 1 if llm.recorder is not None else -1
        return outputs

    def params_for(name: str) -> Any:
        if name == "burst":
            return SamplingParams(max_tokens=config.burst_max_tokens, ignore_eos=True)
        return params

    text = PROMPTS[config.lang]
    questions = text.shared_questions[:2] if quick else text.shared_questions
    prompts = [llm.chat_prompt([{"role": "user", "content": q}], text.system) for q in questions]
    result.shared_prompt_ids = llm.tokenizer.encode(_system_prefix(llm, text.system),
                                                    add_special_tokens=False)
    _collect(result, "shared prompt", act("shared prompt", prompts))

    history: list[dict[str, str]] = []
    for turn in text.chat_turns[:2] if quick else text.chat_turns:
        history.append({"role": "user", "content": turn})
        (out,) = act("multi-turn", [llm.chat_prompt(history, text.system)])
        _collect(result, "multi-turn", [out])
        history.append({"role": "assistant", "content": out.text})

    burst = [llm.chat_prompt([{"role": "user", "content": p}]) for p in text.burst]
    _collect(result, "burst", act("burst", burst))
    result.seconds = time.perf_counter() - t1
    return result


def _system_prefix(llm: Any, system: str = SYSTEM_PROMPT) -> str:
    """The rendered system turn alone: the prefix every act-1 and act-2 prompt shares."""
    marker = "\u2063kvlab-user-turn\u2063"
    full = llm.chat_prompt([{"role": "user", "content": marker}], system)
    head = full[: full.index(marker)]
    return head.rsplit("<|im_start|>", 1)[0] if "<|im_start|>" in head else head


def _collect(result: DemoResult, act: str, outputs: list[Any]) -> None:
    for o in outputs:
        result.requests.append(DemoRequest(
            request_id=o.request_id, act=act, prompt_tokens=len(o.prompt_token_ids),
            cached_tokens=o.num_cached_tokens, output_tokens=len(o.output_token_ids),
            preemptions=o.num_preemptions, finish_reason=o.finish_reason, text=o.text.strip()))
