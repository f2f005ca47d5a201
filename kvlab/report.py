"""Rich reports for the ``kvlab`` command: the demo report, one generation, a saved trace.

Drawn from traces with kvlab.viz's terminal renderers; nothing here changes any state. Text is
in the current language of kvlab.i18n (``kvlab --lang zh`` / ``use_language("zh")``); request
ids, vLLM's identifiers and every number are the same in every language.
"""

from __future__ import annotations

import json
import shlex
from collections import Counter
from pathlib import Path
from typing import Any

from rich.console import Console, Group
from rich.markup import escape
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from kvlab.i18n import N_, _, ngettext
from kvlab.trace.untrusted import shown

__all__ = ["ACT_NAMES", "FINISH_REASONS", "act_label", "backend_label", "finish_label", "print_demo_report", "print_generation", "print_trace_info", "print_trace_view",
           "write_demo_files"]


def _ellipsis(text: str, width: int) -> str:
    text = " ".join(text.split()).rstrip("\ufffd")  # NOTE: a reply cut inside a UTF-8 character
    return text if len(text) <= width else text[: width - 1] + "…"


def write_demo_files(result: Any, out_dir: Path) -> dict[str, Path]:
    """Write the demo's trace (``demo.kvtrace``), HTML player (``demo.html``) and summary JSON.

    Returns:
        ``{"trace": path, "html": path, "summary": path}``.
    """
    from kvlab.demo import trace_counts
    from kvlab.viz import export_html

    out_dir.mkdir(parents=True, exist_ok=True)
    trace = result.trace
    paths = {"trace": out_dir / "demo.kvtrace", "html": out_dir / "demo.html",
             "summary": out_dir / "summary.json"}
    trace.save(paths["trace"])
    export_html(trace, paths["html"], title=_("kvlab demo: SmolLM2-135M on a small block pool"),
                description=_("Every KV-cache decision of the kvlab demo. The player opens as act 1 "
                              "(shared system prompt) ends, before its last request frees its blocks; "
                              "step back to watch the prefix being hit."),
                index=_first_view(trace, result.act_end.get("shared prompt", -1)),
                views=["pool", "block_table", "hash_chain", "free_queue", "allocate_slots",
                       "fixed_point", "slot_mapping", "events"])
    summary = {
        "config": {k: getattr(result.config, k) for k in result.config.__dataclass_fields__},
        "seconds": round(result.seconds, 2),
        "counts": trace_counts(trace),
        "requests": [{**r.__dict__, "hit_rate": round(r.hit_rate, 3)} for r in result.requests],
    }
    paths["summary"].write_text(json.dumps(summary, indent=2))
    return paths


def _first_view(trace: Any, at: int) -> int:
    """Where the demo's player opens: just before the last ``free`` call up to event ``at``, so
    the request it frees still holds its blocks (a finished request's block table is empty)."""
    frees = [c.begin for c in trace.calls("free") if 0 < c.begin <= at]
    return frees[-1] - 1 if frees else at


ACT_NAMES = {
    "shared prompt": N_("shared prompt"),
    "multi-turn": N_("multi-turn"),
    "burst": N_("burst"),
}
"""The demo's act keys (DemoRequest.act, summary.json) -> their label, translated when shown."""


def act_label(act: str) -> str:
    """The label of a demo act key (``"shared prompt"`` ...) in the current language."""
    return _(ACT_NAMES[act]) if act in ACT_NAMES else act


FINISH_REASONS = {"length": N_("length"), "stop": N_("stop"), "abort": N_("abort")}
"""vLLM's finish reasons (``RequestOutput.finish_reason``) -> their label, translated when shown
(English: the reason itself; Chinese: 长度上限 / 停止符 / 中止)."""


def finish_label(reason: str | None) -> str:
    """A finish reason (``"length"``, ``"stop"``, ``"abort"``, None) in the current language."""
    if reason is None:
        return ""
    return _(FINISH_REASONS[reason]) if reason in FINISH_REASONS else reason


def backend_label(backend: str, device: str = "cpu") -> str:
    """The attention backend as the report names it: ``auto`` says what it chose on ``device``
    (Triton on CUDA, torch elsewhere); ``triton`` and ``torch`` are library names."""
    if backend != "auto":
        return backend
    used = "Triton" if device.startswith("cuda") else "torch"
    return _("auto ({used} on {device})").format(used=used, device=device.split(":")[0].upper())


def _requests_table(result: Any) -> Table:
    table = Table(title=_("Requests (prefix-cache hit measured at first admission)"),
                  title_justify="left", header_style="bold", expand=True)
    for col, kw in [(_("request"), {}), (_("act"), {}), (_("prompt"), {"justify": "right"}),
                    (_("hit"), {"justify": "right"}), (_("hit %"), {"justify": "right"}),
                    (_("out"), {"justify": "right"}), (_("preempted"), {"justify": "right"}),
                    (_("finish"), {})]:
        table.add_column(col, **kw)
    for r in result.requests:
        pct = f"{100 * r.hit_rate:.0f}%"
        style = "green" if r.hit_rate > 0.5 else ("yellow" if r.hit_rate > 0 else "")
        table.add_row(r.request_id, act_label(r.act), str(r.prompt_tokens), str(r.cached_tokens),
                      Text(pct, style=style), str(r.output_tokens),
                      Text(str(r.preemptions), style="bold red" if r.preemptions else ""),
                      finish_label(r.finish_reason))
    return table


def _texts(result: Any) -> Table:
    table = Table.grid(padding=(0, 1))
    table.add_column(style="bold", no_wrap=True)
    table.add_column(ratio=1)
    for r in result.requests:
        table.add_row(r.request_id, _ellipsis(r.text, 150))
    return table


def _counts_panel(result: Any) -> Panel:
    from kvlab.demo import trace_counts

    c = trace_counts(result.trace)
    prompt = sum(r.prompt_tokens for r in result.requests)
    hit = sum(r.cached_tokens for r in result.requests)
    preempted = sum(r.preemptions for r in result.requests)
    lines = [
        _("pool: {num_blocks} blocks × {block_size} tokens (block 0 is the null block) · "
          "backend: {backend}").format(num_blocks=result.config.num_gpu_blocks,
                                       block_size=result.config.block_size,
                                       backend=backend_label(result.llm.model.attention_backend,
                                                             _device(result.llm))),
        _("steps: {steps} · events recorded: {events} · wall time: {seconds} s "
          "(model load {load} s)").format(steps=c["steps"], events=f"{c['events']:,}",
                                          seconds=f"{result.seconds:.1f}",
                                          load=f"{result.load_seconds:.1f}"),
        _("prompt tokens served from the prefix cache: {hit}/{prompt} ({pct}%)").format(
            hit=hit, prompt=prompt, pct=f"{100 * hit / max(prompt, 1):.0f}"),
        _("blocks allocated (get_new_blocks): {allocated} · hit and touched: {touched} · "
          "cached (BlockStored): {stored} · evicted (BlockRemoved): {evicted}").format(
            allocated=c["blocks_allocated"], touched=c["blocks_touched"],
            stored=c["blocks_stored"], evicted=c["blocks_evicted"]),
        _("lookups: {lookups} ({hits} hits) · preemptions: {preemptions}").format(
            lookups=c["lookups"], hits=c["lookup_hits"], preemptions=preempted),
    ]
    return Panel("\n".join(lines), title=_("What the KV-cache manager did"), title_align="left")


def _device(llm: Any) -> str:
    """The device the model's weights are on (``"cpu"``, ``"cuda:0"``)."""
    try:
        return str(llm.model.device)
    except AttributeError:
        return "cpu"


def _tokens(n: int) -> str:
    """``1 token``, ``2 tokens``, ``1,781 tokens`` (in the current language)."""
    return ngettext("{n} token", "{n} tokens", n).format(n=f"{n:,}")


def print_demo_report(console: Console, result: Any, paths: dict[str, Path]) -> None:
    """Print the demo report: requests, cache counts, the final free queue and the shared chain."""
    from kvlab.viz import render_free_queue, render_hash_chain, render_pool_grid

    trace = result.trace
    last = len(trace) - 1
    console.rule(_("[bold]kvlab demo[/] · SmolLM2-135M-Instruct on kvlab's paged KV cache"))
    console.print(_requests_table(result))
    console.print(Panel(_texts(result), title=_("Generated text"), title_align="left",
                        subtitle=_("SmolLM2-135M is tiny: its answers are weak, in Chinese "
                                   "poor; the KV cache is the point"), subtitle_align="left"))
    console.print(_counts_panel(result))
    console.print(Panel(render_pool_grid(trace, last), title=_("BlockPool at the end"),
                        title_align="left"))
    console.print(Panel(render_free_queue(trace, last), title=_("LRU free queue at the end"),
                        title_align="left"))
    shared = [r.request_id for r in result.requests if r.act == "shared prompt"]
    at = result.act_end.get("shared prompt", last)
    console.print(Panel(render_hash_chain(trace, at, shared), title_align="left",
                        title=_("Hash chains of the shared-prompt requests, event {at} "
                                "(end of act 1)").format(at=f"{at:,}"),
                        subtitle=_("the common prefix is drawn once"), subtitle_align="left"))
    console.print(Text.assemble((_("trace: "), "bold"), str(paths["trace"]), "   ",
                                (_("player: "), "bold"), str(paths["html"]), "   ",
                                (_("summary: "), "bold"), str(paths["summary"])))
    from kvlab.cli_hints import activate_hint, kvlab_command

    show = (f"{kvlab_command()} trace show {shlex.quote(str(paths['trace']))} "
            f"--event {min(200, last)}")
    # NOTE: soft_wrap: the command stays on one line, so it can be copied and run as printed
    console.print(_("next: [bold]{command}[/]").format(command=escape(show)), soft_wrap=True)
    console.print("  " + _("or open {html} in a browser to step through every event").format(
        html=escape(str(paths["html"]))))
    tip = activate_hint()
    if tip is not None:
        console.print(_("[dim]tip: run [bold]{command}[/] once in this shell, and plain "
                        "[bold]kvlab[/] works too[/]").format(command=escape(tip)), soft_wrap=True)


def print_generation(console: Console, llm: Any, out: Any) -> None:
    """One generation: the text, its blocks per group, and its hash chain."""
    from kvlab.viz import render_hash_chain, render_pool_grid

    trace = llm.trace
    last = len(trace) - 1
    console.print(Panel(out.text.strip() or _("(empty)"), title=f"{out.request_id} · "
                        f"{_tokens(len(out.output_token_ids))} · {finish_label(out.finish_reason)}",
                        title_align="left"))
    alloc = trace.calls("allocate_slots", request=out.request_id)
    blocks: list[int] = []
    for call in alloc:
        blocks += [e for e in _added_blocks(trace, call)]
    bs = llm.block_size
    n = len(out.prompt_token_ids) + len(out.output_token_ids)
    console.print(_("block table of {request} ({tokens}, block_size {bs}): {blocks}  (logical "
                    "block i holds tokens [i·{bs}, (i+1)·{bs}))").format(
                        request=out.request_id, tokens=_tokens(n), bs=bs, blocks=blocks))
    console.print(render_pool_grid(trace, last))
    if n < bs:
        console.print(Text(_("no full block: {n} tokens < block_size {bs}, so nothing was hashed "
                             "(prefix caching shares full blocks only)").format(n=n, bs=bs),
                           style="dim"))
    else:
        console.print(render_hash_chain(trace, last, [out.request_id]))


def _added_blocks(trace: Any, call: Any) -> list[int]:
    from kvlab.trace import EventKind

    ids = trace.filter(EventKind.REQ_BLOCKS_ADDED, start=call.begin, stop=call.end + 1)
    return [b for i in ids for b in trace.payload(int(i))]


def print_trace_view(console: Console, trace: Any, index: int, view: str,
                     requests: list[str] | None) -> None:
    """One view (or all) of a trace at event ``index``."""
    from kvlab import viz

    views = {
        "pool": lambda: viz.render_pool_grid(trace, index),
        "queue": lambda: viz.render_free_queue(trace, index),
        "table": lambda: viz.render_block_table(trace, index),
        "hashes": lambda: viz.render_hash_chain(trace, index, requests),
        "events": lambda: viz.render_events(trace, index),
        "calls": lambda: viz.render_allocate_slots(trace, index),
        "all": lambda: viz.render_state(trace, index, requests),
    }
    console.print(views[view]())


def print_trace_info(console: Console, trace: Any, path: Path) -> None:
    """Config, events by kind, calls by name, requests."""
    from kvlab.trace import EventKind
    from kvlab.trace import KIND_SCHEMA

    kinds = Counter(EventKind(int(k)).name for k in trace.cols.kind)
    head = Text(_("{path} · {events} events · {bytes} bytes/event in memory").format(
        path=shown(path, 400), events=f"{len(trace):,}", bytes=f"{trace.bytes_per_event:.1f}"),
        style="bold")  # fmt: skip
    table = Table()
    table.add_column(_("event kind"))
    table.add_column(_("count"), justify="right")
    table.add_column(_("meaning"))
    for name, count in kinds.most_common():
        table.add_row(name, f"{count:,}", Text(_(KIND_SCHEMA[EventKind[name]].doc)))
    calls = Counter(shown(c.name) for c in trace.calls())
    config = ", ".join(f"{shown(k, 40)}={shown(v, 80)}" for k, v in trace.config.items()
                       if not isinstance(v, (list, dict)))  # fmt: skip
    console.print(Group(head, Text(config, style="dim"), table,
                        Text(_("calls: {calls}").format(
                            calls=_(", ").join(f"{k} ×{v}" for k, v in calls.most_common())))))
