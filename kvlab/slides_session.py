"""``kvlab slides --session N``: one curated reveal.js deck per 90-minute session, offline.

A deck follows its session's timetable (``kvlab.course.sessions``): a title slide with the
objectives, the pre-test, one slide per activity with what to project (a figure from ``kvlab
figures``, a player opened at the decision the slot teaches, in predict mode, or a short code
excerpt that runs), the question to pause on, the exit quiz, and the labs and homework. Every
slide carries speaker notes (reveal.js ``<aside class="notes">``, **S** opens the speaker view).
Everything is local: reveal.js 4.0.2 (``kvlab/static/revealjs``) and the players' pages are
written next to the deck, figures are inlined, nothing is loaded from the network.

The decks' prose is English and Chinese (``lang``); vLLM's identifiers stay as they are.

Examples:
    ```console
    $ kvlab slides --session 1                 # -> slides/session1.slides.html
    $ kvlab slides --session 2 --lang zh       # -> slides/session2.zh.slides.html
    ```
"""

from __future__ import annotations

import html
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kvlab.course.sessions import Session, session
from kvlab.i18n import check_language

__all__ = ["EXCERPTS", "SessionSlide", "export_session_slides", "session_slides"]

_ASSETS = "reveal.js"


def _t(lang: str, en: str, zh: str) -> str:
    return zh if lang == "zh" else en


@dataclass(frozen=True)
class SessionSlide:
    """One slide: title, HTML body, speaker notes (plain text)."""

    title: str
    body: str
    notes: str


EXCERPTS: dict[str, str] = {
    "lookup": """manager.allocate_slots(a, 12)
manager.free(a)
hit_blocks, num_hit = manager.get_computed_blocks(b)    # b = a's 12 tokens + 1
assert [blk.ref_cnt for blk in hit_blocks.blocks[0]] == [0, 0, 0]   # read-only
manager.allocate_slots(b, 1, num_hit, hit_blocks)       # touch: ref_cnt 1""",
    "pd_load": """new = manager.allocate_slots(c, 0, num_hit, hit_blocks,
                             num_external_computed_tokens=12, delay_cache_blocks=True)
assert new.get_block_ids()[0] == []         # WAITING_FOR_REMOTE_KVS: nothing to compute
manager.cache_blocks(c, 12)                 # the load finished: cache, then compute 1 token""",
    "offloading": """sched = ConnectorScheduler(manager, config,
                           CPUOffloadingConnector(block_size=4, num_cpu_blocks=64))
# B is preempted; A reuses some of its blocks; on resume B loads them back from CPU:
# "B: WAITING_FOR_REMOTE_KVS (local hit 20, loading 4 tokens)" -> hit 24 instead of 20""",
}
"""Code shown on slides (each runs in tests/course/test_session_slides.py)."""


ZH: dict[str, str] = {
    "title1": "块、空闲队列、前缀缓存", "title2": "allocate_slots、窗口、混合模型、worker",
    "title3": "调度器、抢占与恢复、一个引擎之外",
    "1.1": "估算块池：由显存预算算出 page_size_bytes 和 num_blocks",
    "1.2": "预测 free() 之后的空闲队列，以及 popleft 取走哪些块",
    "1.3": "算出前缀缓存命中长度：链式哈希、只算满块、num_tokens - 1 上限",
    "1.4": "分清查找（只读）与 allocate_slots（touch）",
    "1.5": "解释 free() 为什么倒序追加，以及驱逐为什么是惰性的",
    "2.1": "摆出 allocate_slots 的 token 布局，并算出一次调用要拿多少个块",
    "2.2": "说出滑动窗口下哪些块变成空块，以及它的命中为什么从右往左找",
    "2.3": "跟得上混合模型的不动点迭代和 LCM 对齐", "2.4": "把块表的一行变成槽位映射",
    "2.5": "在 allocate_slots 中安放草稿、被拒绝的草稿和外部（P/D）token",
    "3.1": "预测哪个请求会被抢占，以及它恢复时命中多少",
    "3.2": "说出恢复什么时候重新计算、什么时候由 KV 卸载加载回来",
    "3.3": "解释准入闸门为什么不能防止抢占", "3.4": "解释没有写时复制的并行采样",
    "3.5": "对比 vLLM 的哈希映射加空闲队列与基数树", "3.6": "跟着一个 P/D 请求走过 WAITING_FOR_REMOTE_KVS",
    "1/5": "笔记本 1：为什么要分页 KV，估算块池", "1/15": "笔记本 2：块与块池",
    "1/30": "笔记本 3：LRU 空闲队列及其预测播放器", "1/50": "笔记本 4：块哈希与前缀缓存及其命中小测播放器",
    "1/70": "笔记本 12 第 3、4、6 节：基数树、时间戳、查找",
    "2/5": "笔记本 5：布局、分块预填充、投机解码与异步调度、P/D 异步加载",
    "2/30": "笔记本 6：滑动窗口、窗口小测播放器、准入上限", "2/50": "笔记本 7：不动点与 LCM 对齐",
    "2/65": "笔记本 9：块表与槽位映射，然后是引擎单步图",
    "3/5": "笔记本 8：连续批处理、分块预填充、准入闸门、抢占",
    "3/30": "笔记本 12 第 1-2 节：抢占会重新计算（卸载则加载回来），n > 1 共享",
    "3/45": "笔记本 12 第 3 节：并排对比 vLLM 与基数树", "3/60": "笔记本 10（演示）与笔记本 11 的命中率曲线",
    "ask1/5": "80 层、56 GiB 能放下多少个 16 token 的块？（11,468）", "ask1/15": "每次调用之前：ref_cnt 会变成多少？",
    "ask1/30": "每道小测题先让全班举手作答，再点击", "ask1/50": "同一个提示词再来一次：命中多少个 token？",
    "ask1/70": "运行每个单元之前，先就对应的说法投票",
    "ask2/5": "每次调用之前：要几个新块？哪些会被缓存？", "ask2/30": "这次调用中哪些逻辑块会变成空块？",
    "ask2/50": "每一轮之前：命中会缩短吗？", "ask2/65": "这一行的位置 9 落到哪个槽位？",
    "ask3/5": "谁会被抢占？它恢复时会命中多少？", "ask3/30": "被抢占请求的缓存会复制到 CPU 吗？",
    "ask3/45": "30 个 token 的系统提示词、块大小 4：两边各命中多少个 token？",
    "ask3/60": "聊天轨迹需要多大的缓存？",
    "homework1": "笔记本 3 和 4 的练习；实验 free_queue 和 block_hash",
    "homework2": "笔记本 5 和 6 的练习；阅读笔记本 13；实验 allocate_slots_layout",
    "homework3": "笔记本 11 的练习（容量规划）；实验 nano_block_manager",
    "q:pre1.1": "由显存预算估算块池：16 token 的块、2 个维度 64 的 KV 头、fp16、24 层、1 GiB，get_num_blocks 给出多少个块？",
    "q:pre1.2": "6 个块的块池，释放一个持有 [1, 2, 3] 的请求：空闲队列从队头起是什么？（状态）",
    "q:pre1.3": "同一个块池，再分配一个需要 4 个块的请求：它按顺序拿到哪些块？",
    "q:pre1.4": "13 个 token 的提示词（块大小 4）已算过，同样 13 个 token 再来：命中多少个 token？",
    "q:pre1.5": "查找之后、allocate_slots 之后，第一个块的 ref_cnt 各是多少？",
    "q:quiz.8": "笔记的 Qwen3-VL 例子：get_num_blocks 给出多少个块？",
    "q:quiz.3": "释放持有 [1, 2, 3]（整个块池）的请求：空闲队列从队头起是什么？",
    "q:quiz.10": "10 个块的块池：释放 a 后分配需要 8 个块的请求，按顺序拿到哪些块？",
    "q:exit1.1": "8 个块的块池：a、b 先后释放，c 命中 a 的第一个块再要一个新块：构造之后的空闲队列（状态）",
    "q:quiz.2": "20 个 token 的提示词已全部缓存，同一个提示词再来：命中多少个 token？",
    "q:quiz.6": "查找刚结束、allocate_slots 之前，命中块的 ref_cnt 是多少？",
    "q:exit1.2": "解释 free() 为什么倒序追加，以及被释放块的哈希为什么不立刻删除（按评分要点）",
    "q:pre2.1": "已计算 8 个 token，allocate_slots(r, 5, num_lookahead_tokens=3) 要几个新块？",
    "q:pre2.2": "窗口 4、块大小 4：8 个 token 的提示词再解码 3 步，块列表是什么？（状态）",
    "q:pre2.3": "全注意力 8 token 的块加窗口 8 的 4 token 块：19 个 token 的探测命中多少？",
    "q:pre2.4": "块表行 [3, 7]、块大小 4：位置 [0, 5, 6] 的槽位？（状态）",
    "q:pre2.5": "验证 1 个采样 token 加 2 个草稿，一个都没接受：num_computed_tokens 是多少？",
    "q:exit2.1": "8 个 token 的命中、10 个新 token、2 个 lookahead 槽位：allocate_slots 返回哪些块 id？",
    "q:exit2.2": "窗口 6、块大小 4：10 个 token 的提示词再解码 5 步：构造块列表（状态）",
    "q:exit2.5": "解释滑动窗口组为什么从右往左找命中（按评分要点）",
    "q:exit2.3": "三组模型中窗口 8 那份的块 4 被驱逐：b 命中多少个 token？",
    "q:exit2.4": "r 与 o 先后预填充，r 再解码 3 个 token：r 的位置 6、7、8 的槽位？（状态）",
    "q:exit2.6": "异步加载 8 个外部 token：返回的块、cache_blocks 之前与之后已缓存的块数？",
    "q:exit2.7": "两个草稿接受一个：num_computed_tokens 是多少？",
    "q:pre3.1": "x、y、z 在 10 个块的块池中运行：按顺序被抢占的是哪些请求？（状态）",
    "q:pre3.2": "同一次运行中，z 恢复时命中多少个 token？",
    "q:pre3.3": "9 个空闲块，40 个 token 的请求：开闸门与关闸门时各能否被接纳？",
    "q:pre3.4": "一个 9 token 提示词的 n = 3 个子请求预填充后，用了几个块？",
    "q:pre3.5": "3 个请求共享 10 个 token 的系统提示词：vLLM 与基数树各命中多少？",
    "q:exit3.1": "笔记本 8 的工作负载、17 个块：按顺序被抢占的是哪些请求？（状态）",
    "q:quiz.4": "笔记本 12 第 1 节（16 个块）：被抢占的 B 恢复时命中多少个 token？",
    "q:exit3.2": "13 个块的块池：B 恢复时，不卸载与 CPU 卸载各命中多少？",
    "q:exit3.3": "解释 scheduler_reserve_full_isl 为什么不能防止抢占（按评分要点）",
    "q:quiz.5": "10 token 提示词的 n = 4 个子请求：第一个块的 ref_cnt？",
    "q:exit3.4": "解释 vLLM 的前缀缓存与基数树在同一负载上有何不同（按评分要点）",
    "q:exit3.6": "4 个请求共享 30 个 token 的系统提示词：vLLM 与基数树各命中多少？",
    "q:exit3.5": "P/D 解码端：c 在前 4 次 schedule() 之后的状态各是什么？（状态）",
}  # fmt: skip
"""The Chinese text of the deck's session data (kvlab.course.sessions is English)."""


# ---------------------------------------------------------------------------- assets
def _figure(out: Path, name: str) -> str:
    path = out / "figures" / f"{name}.svg"
    if not path.is_file():
        return f'<p class="missing">figures/{html.escape(name)}.svg</p>'
    return f'<img class="figure" src="figures/{name}.svg" alt="{html.escape(name)}">'


def _player(out: Path, name: str, trace: Any, lang: str, **state: Any) -> str:
    from kvlab.viz import export_html

    page = out / f"{name}.{lang}.html"
    export_html(trace, page, lang=lang, **state)
    return f'<iframe class="player" src="{page.name}" title="{html.escape(name)}"></iframe>'


def _row(*parts: str) -> str:
    return f'<div class="row">{"".join(parts)}</div>'


def _code(name: str) -> str:
    return f'<pre><code class="python">{html.escape(EXCERPTS[name])}</code></pre>'


def _window_trace() -> Any:
    from kvlab.core import SlidingWindowSpec
    from kvlab.course.lab_setup import request_factory, seed_hashing
    from kvlab.core import KVCacheConfig, KVCacheGroupSpec, KVCacheManager
    from kvlab.trace import Recorder

    seed_hashing()
    spec = SlidingWindowSpec(block_size=4, num_kv_heads=1, head_size=1, dtype="float32", sliding_window=8)
    manager = KVCacheManager(KVCacheConfig(24, [], [KVCacheGroupSpec(["l"], spec)]), max_model_len=256, hash_block_size=4)
    recorder = Recorder().attach(manager)
    a = request_factory(4, max_tokens=64)("a", list(range(12)))
    manager.allocate_slots(a, 12)
    a.num_computed_tokens = 12
    for step in range(10):
        a.append_output_token_ids(100 + step)
        manager.allocate_slots(a, 1)
        a.num_computed_tokens += 1
    return recorder.trace()


def _scheduler_trace() -> Any:
    from kvlab.core import Request, SamplingParams, get_request_block_hasher, sha256
    from kvlab.core.sched import Scheduler, SchedulerConfig
    from kvlab.course.lab_setup import full_attention_manager
    from kvlab.course.nb08 import arrivals
    from kvlab.trace import Recorder

    manager = full_attention_manager(20, 4, 128, layer="layers")
    recorder = Recorder().attach(manager)
    sched = Scheduler(manager, SchedulerConfig(max_num_seqs=4, max_num_batched_tokens=16, max_model_len=128),
                      recorder=recorder)  # fmt: skip
    hasher, work, step = get_request_block_hasher(4, sha256), arrivals(), 0
    while sched.has_unfinished_requests() or step in work:
        for rid, prompt, max_tokens in work.get(step, []):
            sched.add_request(Request(rid, prompt, SamplingParams(max_tokens=max_tokens), None, block_hasher=hasher))
        out = sched.schedule()
        sched.update_from_output(out, {r: [7] for r in out.num_scheduled_tokens})
        step += 1
    return recorder.trace()


def _compare_page(out: Path, lang: str) -> str:
    from kvlab.compare import compare, shared_system_prompt
    from kvlab.viz.compare_player import export_compare_html

    runs = compare(shared_system_prompt(4, 30, 8, 4), pool_tokens=64, block_size=4,
                   policies=("vllm", "radix"), record=True)  # fmt: skip
    page = export_compare_html(runs, out / f"vllm_vs_radix.{lang}.html", lang=lang)
    return f'<iframe class="player" src="{page.name}" title="vllm vs radix"></iframe>'


# ---------------------------------------------------------------------------- content
def _shows(s: Session, out: Path, lang: str) -> list[tuple[str, str]]:
    """Per timetable slot (after the pre-test, before the exit quiz): (body HTML, extra notes)."""
    from kvlab.figures import allocate_slots_trace, hybrid_trace, shared_prefix_trace

    if s.number == 1:
        shared, marks = shared_prefix_trace()
        return [
            (_figure(out, "qwen3_vl_sizing"), _t(lang, "The notes' premise beside the real Qwen3-VL configs.",
                                                  "笔记的前提与真实 Qwen3-VL 配置并列。")),
            (_player(out, "s1_block_pool", shared, lang, views=["pool", "free_queue", "events"]),
             _t(lang, "Step over one call at a time (Shift+→).", "每次跨过一个调用（Shift+→）。")),
            (_row(_figure(out, "free_queue_touch_free"), _player(out, "s1_free_queue_quiz", shared, lang,
                  views=["free_queue", "events"], predict=["popleft", "evict"])),
             _t(lang, "Let the room answer each question by show of hands before clicking.",
                "每道题先让全班举手作答，再点击。")),
            (_row(_figure(out, "hash_chain_graph"), _player(out, "s1_hit_quiz", shared, lang,
                  views=["hash_chain", "events"], predict=["hit"])),
             _t(lang, "The cap: at most num_tokens - 1 tokens, whole blocks only.", "上限：最多 num_tokens - 1 个 token，只算满块。")),
            (_code("lookup"), _t(lang, "get_computed_blocks finds; allocate_slots touches.",
                                 "get_computed_blocks 只查找；allocate_slots 才 touch。")),
        ]  # fmt: skip
    if s.number == 2:
        trace, index = allocate_slots_trace()
        htrace, _end = hybrid_trace()
        return [
            (_row(_figure(out, "allocate_slots_flow"), _code("pd_load")),
             _t(lang, "Layout first: comp | new_comp | ext_comp | new | lookahead. Then the P/D load.",
                "先讲布局：comp | new_comp | ext_comp | new | lookahead，再讲 P/D 加载。")),
            (_player(out, "s2_window_quiz", _window_trace(), lang, views=["block_table", "free_queue", "events"],
                     predict=["window"]),
             _t(lang, "A block leaves only when the window has passed all of its tokens.",
                "只有当窗口越过一个块的全部 token 时，这个块才离开。")),
            (_row(_figure(out, "hybrid_fixed_point"), _player(out, "s2_fixed_point_quiz", htrace, lang,
                  views=["block_table", "events"], predict=["fixed_point"])),
             _t(lang, "Full attention first; any shortening starts another iteration.",
                "全注意力先走；任何一次缩短都会引出新一轮迭代。")),
            (_row(_figure(out, "slot_mapping_table"), _figure(out, "engine_step")),
             _t(lang, "slot = block_id x block_size + offset; the kernel reads only the row's blocks.",
                "slot = block_id x block_size + offset；内核只读这一行里的块。")),
        ]  # fmt: skip
    return [
        (_player(out, "s3_scheduler_quiz", _scheduler_trace(), lang, views=["block_table", "events"],
                 predict=["preempt", "hit"], jump_kind="STEP"),
         _t(lang, "The newest running request is the victim; the gate checks, it does not reserve.",
            "最新的运行中请求被抢占；闸门只检查，不预留。")),
        (_code("offloading"), _t(lang, "No connector: recompute. CPU offloading: load back what was stored.",
                                 "没有连接器就重新计算；有 CPU 卸载就把存下的内容加载回来。")),
        (_compare_page(out, lang), _t(lang, "Granularity (28 vs 30) and eviction order.",
                                      "粒度（28 对 30）与驱逐顺序。")),
        (_figure(out, "demo-report") if (out / "figures" / "demo-report.svg").is_file() else
         "<p>kvlab demo · kvlab whatif</p>",
         _t(lang, "Demo only: SmolLM2 on the paged cache; the hit-rate curve's knees.",
            "只做演示：SmolLM2 跑在分页缓存上；命中率曲线的拐点。")),
    ]  # fmt: skip


def _questions(ids: tuple[str, ...], lang: str) -> str:
    from kvlab.course import exercise

    text = (lambda i: ZH[f"q:{i}"]) if lang == "zh" else (lambda i: exercise(i).question)
    items = "".join(f"<li><code>{i}</code> {html.escape(text(i))}</li>" for i in ids)
    return f'<ol class="quiz">{items}</ol><pre><code>check("{ids[0]}", answer)</code></pre>'


def session_slides(number: int, out_dir: str | Path, lang: str = "en") -> list[SessionSlide]:
    """The slides of session ``number``; writes their figures and player pages into ``out_dir``.

    Raises:
        ValueError: No such session, or an unknown language.
    """
    lang, s, out = check_language(lang), session(number), Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    from kvlab.figures import write_canonical_figures

    write_canonical_figures(out / "figures")
    objectives = "".join(f"<li><b>{o.id}</b> {html.escape(_t(lang, o.text, ZH[o.id]))}</li>" for o in s.objectives)
    slides = [SessionSlide(
        _t(lang, f"Session {s.number}: {s.title}", f"第 {s.number} 次课：{ZH[f'title{s.number}']}"),
        f"<p>{_t(lang, '90 minutes · notebooks', '90 分钟 · 笔记本')} {', '.join(map(str, s.notebooks))}</p>"
        f"<ul>{objectives}</ul>",
        _t(lang, "Read the objectives aloud: the exit quiz tests each of them. Ask everyone to open "
           "JupyterLab (kvlab lab) and run the notebooks once.",
           "把学习目标读一遍：课后小测会逐条检验。请大家打开 JupyterLab（kvlab lab），把笔记本先运行一遍。"),
    )]  # fmt: skip
    blocks = s.timetable
    slides.append(SessionSlide(
        _t(lang, "Pre-test (5 minutes)", "课前测（5 分钟）"), _questions(s.pretest, lang),
        _t(lang, "No discussion yet; learners keep their answers and compare them with the exit quiz.",
           "先不讨论；学习者保留答案，最后与课后小测对比。")))  # fmt: skip
    for block, (body, extra) in zip(blocks[1:-1], _shows(s, out, lang)):
        key = f"{s.number}/{block.start}"
        ask = _t(lang, block.ask, ZH[f"ask{key}"])
        ask = f'<p class="ask">{_t(lang, "Pause and ask:", "停下来提问：")} {html.escape(ask)}</p>'
        notes = (f"{block.start}-{block.end} min. {_t(lang, 'Project: ' + block.project + '.', '')} "
                 f"{_t(lang, 'Objectives', '目标')} {', '.join(block.objectives) or '-'}. {extra}")
        slides.append(SessionSlide(html.escape(_t(lang, block.activity, ZH[key])), body + ask, notes))
    slides.append(SessionSlide(
        _t(lang, "Exit quiz", "课后小测"), _questions(s.exit_quiz, lang),
        _t(lang, "Collect the answers, run check() live, compare with the pre-test. Grade the explain items "
           "with their rubric (teach-a-class).", "收齐答案，现场运行 check()，与课前测对比。解释题按评分要点批改（见教案）。")))  # fmt: skip
    labs = "".join(f"<li><code>{lab}</code></li>" for lab in s.labs)
    slides.append(SessionSlide(
        _t(lang, "Labs and homework", "实验与作业"),
        f"<ul>{labs}</ul><p>{html.escape(_t(lang, s.homework, ZH[f'homework{s.number}']))}</p>",
        _t(lang, "The build-it labs (kvlab.labs) grade the learners' own classes against vLLM's decisions.",
           "动手实验（kvlab.labs）会拿 vLLM 的真实决策给学习者自己写的类打分。")))  # fmt: skip
    return slides


_STYLE = """
.reveal .slides section { text-align: left; font-size: 0.55em; }
.reveal h2 { font-size: 1.3em; text-transform: none; }
.reveal .row { display: flex; gap: 12px; align-items: flex-start; }
.reveal .row > * { flex: 1 1 0; min-width: 0; }
.reveal .figure { max-height: 440px; max-width: 100%; background: #fff; margin: 0; }
.reveal iframe.player { width: 100%; height: 460px; border: 1px solid #ccc; }
.reveal pre { width: 100%; font-size: 0.75em; margin: 0; }
.reveal .ask { color: #b45309; font-weight: bold; }
"""


def export_session_slides(number: int, out_dir: str | Path, lang: str = "en") -> Path:
    """Write the deck of session ``number`` and everything it loads into ``out_dir``.

    Returns:
        The page (``session{N}.slides.html``, or ``session{N}.zh.slides.html``).

    Raises:
        ValueError: No such session, or an unknown language.
    """
    reveal_dir = Path(__file__).resolve().parent / "static" / "revealjs"  # kvlab.slides.REVEAL_DIR
    lang, out = check_language(lang), Path(out_dir)
    slides = session_slides(number, out, lang)
    shutil.copytree(reveal_dir, out / _ASSETS, dirs_exist_ok=True)
    sections = "\n".join(
        f"<section><h2>{s.title}</h2>{s.body}<aside class=\"notes\">{html.escape(s.notes)}</aside></section>"
        for s in slides
    )
    page = out / (f"session{number}.slides.html" if lang == "en" else f"session{number}.{lang}.slides.html")
    page.write_text(f"""<!doctype html>
<html lang="{lang}"><head><meta charset="utf-8">
<title>kvlab · {html.escape(slides[0].title)}</title>
<link rel="stylesheet" href="{_ASSETS}/dist/reveal.css">
<link rel="stylesheet" href="{_ASSETS}/dist/theme/white.css">
<style>{_STYLE}</style></head>
<body><div class="reveal"><div class="slides">
{sections}
</div></div>
<script src="{_ASSETS}/dist/reveal.js"></script>
<script src="{_ASSETS}/plugin/notes/notes.js"></script>
<script>Reveal.initialize({{hash: true, plugins: [RevealNotes]}}); window.Reveal = Reveal;</script>
</body></html>
""", encoding="utf-8")
    return page
