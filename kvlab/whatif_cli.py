"""``kvlab whatif``: the hit rate a real trace would get at each cache capacity.

    kvlab whatif TRACE --format mooncake --capacity-tokens 1e4,1e5,1e6 [--block-size 16,512]
                 [--caches vllm,nano-vllm,radix] --json OUT.json [--svg CURVE.svg] [--png CURVE.png]

Prints a table and writes ``{"results": [{"cache", "capacity_tokens", "block_size",
"hit_rate", "hit_tokens", "prompt_tokens", "evicted_blocks", "preemptions", ...}, ...]}``
(hit_rate = prompt tokens served from the prefix cache / prompt tokens), plus one "infinite"
row per block size (the theoretical maximum); ``--svg`` / ``--png`` draw the hit-rate-vs-capacity
curve (kvlab.traffic.plot). Progress bars (tqdm, on stderr) show only on a terminal;
``--no-progress`` turns them off there too. ``--clock timed`` replays vllm through kvlab's
Scheduler at the trace's timestamps (kvlab.traffic.timed; rows add timing and preemptions).
``--format``: mooncake, jsonl (prompt token ids), kvtrace (a saved kvlab trace) or kvevents
(a recorded vLLM KV-event stream); see kvlab.traffic.formats. Bad flags exit
with status 2 before any work. Each output file (``--json``, ``--svg``, ``--png``) is written
atomically (temporary file, then rename) with the user's normal file mode (0666 minus the
umask), and the command says where it wrote it. Caches are named as everywhere in kvlab: vllm,
nano-vllm (``nano`` is accepted too) and radix; ``belady`` adds Belady's eviction at each
capacity (and the capacity / LRU split of the hits), ``infinite`` is accepted (always shown).

On the sequence clock vLLM and nano-vllm answer every capacity in one pass
(kvlab.traffic.stack). ``--warmup 0.5`` counts only the second half of the requests (as the
peers do). ``--model-config`` sizes a model's pool in bytes instead of ``--capacity-tokens``
(kvlab.traffic.sizing); ``--replicas N --routing ...`` routes the trace across N replicas
(kvlab.traffic.fleet); ``--jobs`` / ``--dask-scheduler`` run the independent replays in
parallel (kvlab.traffic.parallel); ``--html`` writes a self-contained report (English and
Chinese) with the curve, the capacity / LRU split, the routing and a few misses explained.
``--stream``: a Mooncake trace too big to hold, one request at a time (kvlab.whatif_stream).
"""

from __future__ import annotations

import json
import shlex
from pathlib import Path
from typing import Any

import click

from kvlab.cli_checks import parse_cache_names
from kvlab.cli_i18n import KvlabCommand
from kvlab.i18n import N_, _, language, use_language
from kvlab.whatif_runs import (
    executor,
    fleet_rows,
    model_rows,
    parse_sizes,
    print_fleet,
    print_models,
    print_table,
)
from kvlab.whatif_stream import refuse_if_too_big, run_stream

__all__ = ["whatif"]

_FORMATS = ("mooncake", "jsonl", "kvtrace", "kvevents")  # NOTE: kvlab.traffic.FORMATS
_LIBRARY_NAME = {"nano-vllm": "nano"}  # NOTE: kvlab.traffic's name for nano-vllm's cache
_BOUNDS = ("belady", "infinite")  # NOTE: not caches of a system: what any cache could hit
_ROUTINGS = ("round-robin", "random", "session", "prefix-aware", "least-loaded")


def _cache_names(text: str) -> list[str]:
    """--caches: the canonical cache names plus belady / infinite (infinite: always shown)."""
    parts = [c.strip() for c in text.split(",") if c.strip()]
    bounds = [c for c in parts if c in _BOUNDS]
    others = [c for c in parts if c not in _BOUNDS]
    names = parse_cache_names(others, "--caches") if others or not bounds else []
    return names + [b for b in dict.fromkeys(bounds)]


def _routings(text: str) -> list[str]:
    out = [r.strip() for r in text.split(",") if r.strip()]
    bad = [r for r in out if r not in _ROUTINGS]
    if bad or not out:
        raise click.BadParameter(_("unknown routing {name}; allowed: {allowed}").format(
            name=repr((bad or [""])[0]), allowed=", ".join(_ROUTINGS)), param_hint="--routing")
    return list(dict.fromkeys(out))


def _capacities(text: str, block_size: int) -> list[int]:
    from kvlab.traffic.replay import check_capacity

    out = []
    for part in text.split(","):
        try:
            value = float(part)
        except ValueError:
            raise click.BadParameter(_("{value} is not a number of tokens").format(
                value=repr(part)), param_hint="--capacity-tokens") from None
        try:
            out.append(check_capacity(int(value) if value.is_integer() else value, block_size))
        except ValueError as exc:
            raise click.BadParameter(str(exc), param_hint="--capacity-tokens") from None
    return out


def _check_block_size(fmt: str, block_size: int) -> None:
    """Mooncake hash ids cover 512 tokens: the block size must divide 512 (others: >= 1)."""
    if block_size < 1 or (fmt == "mooncake" and 512 % block_size):
        allowed = _("the divisors of 512") if fmt == "mooncake" else _("an int >= 1")
        raise click.BadParameter(_("{block_size} is not allowed for --format {format}; allowed: "
                                   "{allowed}").format(block_size=block_size, format=fmt,
                                                       allowed=allowed), param_hint="--block-size")


def _load_requests(trace: Path, fmt: str, limit: int | None) -> list:
    """TRACE read as ``--format`` says; a bad file exits 1 naming the line and what is allowed."""
    from kvlab.traffic import load_traffic

    refuse_if_too_big(trace, fmt, limit)
    try:
        return load_traffic(trace, fmt, limit)
    except (ValueError, ImportError) as exc:
        raise click.ClickException(str(exc)) from None


def write_json_atomic(path: Path, obj: object) -> None:
    """Write ``obj`` as JSON to ``path`` atomically, with the user's normal file mode."""
    from kvlab.trace.atomic_file import atomic_write

    with atomic_write(path, "w") as f:
        json.dump(obj, f, indent=1)


def _block_sizes(text: str, fmt: str) -> list[int]:
    """``--block-size 16,512`` -> [16, 512], each checked for ``fmt``."""
    out = []
    for part in text.split(","):
        try:
            out.append(int(part))
        except ValueError:
            raise click.BadParameter(_("{value} is not a whole number of tokens").format(
                value=repr(part)), param_hint="--block-size") from None
        _check_block_size(fmt, out[-1])
    return out


def _check_images(svg: Path | None, png: Path | None) -> None:
    """Before any work: image paths writable and matplotlib importable."""
    from kvlab.cli_checks import check_output_file

    check_output_file(svg, "--svg")
    check_output_file(png, "--png")
    if svg is not None or png is not None:
        try:
            import matplotlib  # noqa: F401
        except ImportError:
            from kvlab.cli_hints import install_hint

            raise click.UsageError(_("--svg / --png need matplotlib (the viz extra), which is "
                                     "not installed: {hint}").format(hint=install_hint("viz"))
                                   ) from None


def _print_table(title: str, rows: list[dict]) -> None:
    from rich.table import Table

    table = Table(title=title)
    timed = any(r["clock"] == "timed" for r in rows)
    split = any("hits_lost_to_lru" in r for r in rows)
    cols = (N_("cache"), N_("block size"), N_("capacity (tokens)"), N_("hit rate"),
            N_("hit tokens"), N_("evicted blocks"), N_("rejected"))  # fmt: skip
    if timed:
        cols += (N_("preemptions"), N_("p99 wait (ms)"))
    if split:
        cols += (N_("lost to capacity"), N_("lost to LRU"))
    for col in cols:
        if col == "cache":  # NOTE: whole cache names (nano-vllm) even at 80 columns
            table.add_column(_(col), justify="left", no_wrap=True,
                             min_width=max((len(r["cache"]) for r in rows), default=5))
        else:
            table.add_column(_(col), justify="right", overflow="fold")
    for r in rows:
        cap = "∞" if r["capacity_tokens"] is None else f"{r['capacity_tokens']:,}"
        extra: tuple = ()
        if timed:
            wait = r.get("p99_queueing_delay_ms")
            extra = (f"{r['preemptions']:,}", "" if wait is None else f"{wait:,.0f}")
        if split:
            extra += tuple(f"{r[k]:,}" if k in r else "" for k in ("hits_lost_to_capacity",
                                                                     "hits_lost_to_lru"))
        evicted = r["evicted_blocks"]  # NOTE: None: not counted (libCacheSim's policies)
        table.add_row(r["cache"], str(r["block_size"]), cap, f"{r['hit_rate']:.3f}",
                      f"{r['hit_tokens']:,}", "" if evicted is None else f"{evicted:,}",
                      f"{r['rejected']:,}", *extra)  # fmt: skip
    print_table(table)


def _write_outputs(rows: list[dict], title: str, json_out: Path | None, svg: Path | None,
                   png: Path | None, fleet: list[dict] | None = None) -> None:  # fmt: skip
    """The figure is drawn before any file is written; each file is written atomically."""
    fig = None
    if svg is not None or png is not None:
        from kvlab.traffic.plot import hit_rate_figure

        fig = hit_rate_figure(rows, title=title, lang=language())  # NOTE: the command's --lang
    if json_out is not None:
        write_json_atomic(json_out, {"results": rows} | ({"fleet": fleet} if fleet else {}))
        click.echo(_("wrote the results (JSON) to {path}").format(path=json_out))
    if fig is not None:
        from kvlab.traffic.plot import save_figure

        for path, kind in ((svg, "svg"), (png, "png")):
            if path is not None:
                save_figure(fig, path, kind)
                click.echo(_("wrote the hit-rate curve ({format}) to {path}").format(
                    format=kind.upper(), path=path))


def _check_trace_at(trace_at: float | None, explain_index: int | None, save: Path | None,
                    block_size: int) -> int | None:  # fmt: skip
    """--trace-at goes with --explain and/or --save, and holds at least one block."""
    from kvlab.cli_checks import check_output_file
    from kvlab.traffic.replay import check_capacity

    wants = explain_index is not None or save is not None
    if trace_at is None:
        if wants:
            raise click.UsageError(_("--explain and --save need --trace-at CAPACITY (tokens): "
                                     "the capacity of the vLLM run they record"))
        return None
    if not wants:
        raise click.UsageError(_("--trace-at needs --explain REQ_INDEX and/or --save FILE"))
    check_output_file(save, "--save")
    try:
        return check_capacity(int(trace_at) if trace_at.is_integer() else trace_at, block_size)
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="--trace-at") from None


def _insights(reqs: list, block_size: int, top: int | None, trace_cap: int | None,
              explain_index: int | None, save: Path | None, progress: bool | None) -> None:
    """--top-prefixes, --explain and --save, at the first block size."""
    if top is None and trace_cap is None:
        return
    from rich.console import Console

    from kvlab.cli_hints import kvlab_command
    from kvlab.traffic import explain_request, prepare_blocks, record_vllm, top_prefixes

    console = Console(highlight=False)
    blocked = prepare_blocks(reqs, block_size, progress=progress)
    if top is not None:
        _print_prefixes(console, blocked, top_prefixes(blocked, top))
    if explain_index is not None:
        assert trace_cap is not None
        click.echo("\n" + _("vLLM at {capacity} tokens, block size {block_size}:").format(
            capacity=f"{trace_cap:,}", block_size=block_size))
        click.echo(str(explain_request(blocked, trace_cap, explain_index)))
    if save is not None:
        from kvlab.trace import save_trace

        assert trace_cap is not None
        res = record_vllm(blocked, trace_cap, progress=progress)
        save_trace(res.trace, save)
        saved = _("saved the vLLM run at {capacity} tokens ({events} events, one step per "
                  "request) to {path}").format(capacity=f"{trace_cap:,}",
                                               events=f"{len(res.trace):,}", path=save)
        show = _("show it: {command}, or {code} in a notebook").format(
            command=f"{kvlab_command()} trace show {shlex.quote(str(save))}",
            code="kvlab.viz.TracePlayer(kvlab.trace.load_trace(path))")
        click.echo(f"\n{saved}\n{show}")


def _print_prefixes(console: Any, blocked: Any, found: list) -> None:
    from rich.table import Table

    table = Table(title=_("most reused prefixes (block size {block_size})").format(
        block_size=blocked.block_size))
    for col in ("#", _("blocks"), _("tokens"), _("requests"), _("reuse count"),
                _("first request")):  # fmt: skip
        table.add_column(col, justify="right")
    for rank, p in enumerate(found, start=1):
        rid = blocked.requests[p.first_request].request_id
        table.add_row(str(rank), f"{p.num_blocks:,}", f"{p.num_tokens:,}",
                      f"{p.num_requests:,}", f"{p.reuse_count:,}",
                      f"{p.first_request} ({rid})")  # fmt: skip
    console.print(table)


@click.command(cls=KvlabCommand, short_help=N_("Hit rate of a real trace at each cache capacity."),
               help=N_("Hit rate of TRACE at each capacity, per cache (and the infinite-cache "
                       "maximum)."))
@click.argument("trace", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--format", "fmt", default="mooncake", show_default=True,
              help=N_("Trace format: mooncake, jsonl, kvtrace, kvevents."))
@click.option("--capacity-tokens", default=None,
              help=N_("Comma-separated pool sizes (tokens); or size a model with --model-config."))
@click.option("--block-size", default="512", show_default=True,
              help=N_("kvlab block size(s), comma-separated (tokens)."))
@click.option("--caches", default="vllm", show_default=True,
              help=N_("Comma-separated, of vllm, nano-vllm (alias: nano), radix, belady, "
                      "infinite."))
@click.option("--policies", default="", metavar="NAMES",
              help=N_("Also replay libCacheSim's policies (fifo, lru, s3fifo, sieve, arc, clock, "
                      "lirs, twoq, lfu; the policies extra) at each capacity."))
@click.option("--clock", default="sequence", show_default=True,
              help=N_("Replay clock: sequence, or timed (vllm only; kvlab.traffic.timed)."))
@click.option("--limit", type=click.IntRange(min=1), default=None,
              help=N_("Only the first N requests."))
@click.option("--warmup", type=click.FloatRange(0, 1, max_open=True), default=0.0,
              show_default=True, metavar="FRACTION",
              help=N_("Replay the first FRACTION of the requests without counting them (the "
                      "peers count the second half: 0.5)."))
@click.option("--model-config", default=None, metavar="NAME|CONFIG.json",
              help=N_("Size the pool as vLLM does for this model (a Hugging Face config.json, or "
                      "llama-2-7b, llama-3.1-8b, deepseek-v2-lite, gemma-3-12b, jamba-v0.1)."))
@click.option("--kv-cache-memory", default=None, metavar="SIZES",
              help=N_("KV cache budgets for --model-config, comma-separated (16GiB,40GiB)."))
@click.option("--gpu-memory", default=None, metavar="SIZES",
              help=N_("GPU memory for --model-config (80GiB): budget = memory x utilization - "
                      "weights."))
@click.option("--gpu-memory-utilization", type=click.FloatRange(0, 1, min_open=True),
              default=0.9, show_default=True, help=N_("vLLM's --gpu-memory-utilization."))
@click.option("--weights", default=None, metavar="SIZE",
              help=N_("Memory vLLM uses outside the KV cache (default: parameters x dtype size)."))
@click.option("--max-model-len", type=click.IntRange(min=1), default=None,
              help=N_("Longest prompt served (tokens); with --model-config the default is the "
                      "model's max_position_embeddings."))
@click.option("--replicas", type=click.IntRange(min=1), default=1, show_default=True,
              help=N_("Route the trace across this many vLLM replicas (capacity per replica)."))
@click.option("--routing", default="round-robin", show_default=True,
              help=N_("Comma-separated, of round-robin, random, session, prefix-aware, "
                      "least-loaded (with --replicas)."))
@click.option("--seed", type=int, default=0, show_default=True,
              help=N_("Seed of random routing."))
@click.option("--jobs", type=click.IntRange(min=1), default=1, show_default=True,
              help=N_("Run the independent replays on this many local processes."))
@click.option("--dask-scheduler", default=None, metavar="ADDRESS|local",
              help=N_("Run the replays on a Dask cluster (local: a LocalCluster of --jobs "
                      "processes)."))
@click.option("--json", "json_out", type=click.Path(dir_okay=False, path_type=Path),
              default=None, help=N_("Write the results here."))
@click.option("--svg", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help=N_("Write the hit-rate-vs-capacity curve here (SVG)."))
@click.option("--png", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help=N_("Write the hit-rate-vs-capacity curve here (PNG)."))
@click.option("--html", "html_out", type=click.Path(dir_okay=False, path_type=Path),
              default=None, help=N_("Write a self-contained report here (English and Chinese)."))
@click.option("--top-prefixes", type=click.IntRange(min=1), default=None, metavar="K",
              help=N_("Also list the K most reused prefixes (first block size)."))
@click.option("--trace-at", type=float, default=None, metavar="CAPACITY",
              help=N_("Capacity (tokens) of the vLLM run (sequence clock, first block size) "
                      "that --explain and --save record."))
@click.option("--explain", "explain_index", type=click.IntRange(min=0), default=None,
              metavar="REQ_INDEX", help=N_("Why request REQ_INDEX (0-based) hit what it hit, "
                                           "in vLLM at --trace-at."))
@click.option("--save", "save_trace_to", type=click.Path(dir_okay=False, path_type=Path),
              default=None, help=N_("Save the vLLM run at --trace-at as a kvlab trace (.kvtrace) "
                                    "for kvlab trace show and the TracePlayer."))
@click.option("--stream", is_flag=True, help=N_("Stream a Mooncake TRACE (bounded memory)."))
@click.option("--no-progress", is_flag=True,
              help=N_("No progress bars (they show only when stderr is a terminal anyway)."))
def whatif(trace: Path, fmt: str, capacity_tokens: str | None, block_size: str, caches: str,
           policies: str, clock: str, limit: int | None, warmup: float, model_config: str | None,
           kv_cache_memory: str | None, gpu_memory: str | None,
           gpu_memory_utilization: float, weights: str | None, max_model_len: int | None,
           replicas: int, routing: str, seed: int, jobs: int, dask_scheduler: str | None,
           json_out: Path | None, svg: Path | None, png: Path | None, html_out: Path | None,
           top_prefixes: int | None, trace_at: float | None, explain_index: int | None,
           save_trace_to: Path | None, stream: bool, no_progress: bool) -> None:  # fmt: skip
    """``kvlab whatif`` (its help is the decorator's)."""
    from kvlab.cli_checks import check_output_file

    if fmt not in _FORMATS:
        raise click.BadParameter(_("unknown format {name}; allowed: {allowed}").format(
            name=repr(fmt), allowed=", ".join(_FORMATS)), param_hint="--format")
    if clock not in ("sequence", "timed"):
        raise click.BadParameter(_("unknown clock {name}; allowed: sequence, timed").format(
            name=repr(clock)), param_hint="--clock")
    names = _cache_names(caches)
    if clock == "timed" and [n for n in names if n != "infinite"] != ["vllm"]:
        raise click.BadParameter(_("only vllm supports the timed clock, got {caches}").format(
            caches=repr(caches)), param_hint="--caches")
    routings = _routings(routing)
    pols = _policies(policies)
    sizes = _block_sizes(block_size, fmt)
    if (capacity_tokens is None) == (model_config is None):
        raise click.UsageError(_("give the pool either in tokens (--capacity-tokens 1e5,1e6) "
                                 "or in bytes for a model (--model-config NAME "
                                 "--kv-cache-memory 16GiB), one of the two"))
    caps = _capacities(capacity_tokens, max(sizes)) if capacity_tokens else []
    cfg, budgets = _model_budgets(model_config, kv_cache_memory, gpu_memory,
                                  gpu_memory_utilization, weights)
    if json_out is not None and not (json_out.parent or Path(".")).resolve().is_dir():
        raise click.BadParameter(_("folder {folder} does not exist").format(
            folder=json_out.parent), param_hint="--json")
    check_output_file(html_out, "--html")
    _check_images(svg, png)
    trace_cap = _check_trace_at(trace_at, explain_index, save_trace_to, sizes[0])
    if stream:  # NOTE: one request at a time (kvlab.whatif_stream)
        return run_stream(click.get_current_context().params, names, caps, sizes, _print_table,
                          _write_outputs)  # fmt: skip
    reqs = _load_requests(trace, fmt, limit)
    if explain_index is not None and explain_index >= len(reqs):
        raise click.BadParameter(_("request {index} is outside the trace; allowed: 0..{last}"
                                   ).format(index=explain_index, last=len(reqs) - 1),
                                 param_hint="--explain")
    progress = False if no_progress else None
    bs_text = ", ".join(str(bs) for bs in sizes)
    from kvlab.traffic.plot import CHART_TEXTS  # NOTE: the title is drawn on the curve

    title_msg, titles = CHART_TEXTS["whatif_title"], {}
    for lang in ("en", "zh"):  # NOTE: the report has both; table and images: the command's
        with use_language(lang):
            titles[lang] = _(title_msg).format(
                trace=trace.name, requests=f"{len(reqs):,}", block_sizes=bs_text)
    heading = titles[language()]
    with executor(jobs, dask_scheduler) as client:
        if cfg is not None:
            given = click.get_current_context().get_parameter_source("block_size")
            model_bs = sizes[0] if given is click.core.ParameterSource.COMMANDLINE else None
            rows = model_rows(reqs, cfg, budgets, warmup, jobs, client, max_model_len,
                              model_bs, progress)  # fmt: skip
            print_models(_("{trace}: {requests} requests, model {model}").format(
                trace=trace.name, requests=f"{len(reqs):,}", model=cfg["_name"]), rows)
            caps = [r["capacity_tokens"] for r in rows if r["cache"] == "vllm"
                    and r["kv_cache_groups"] == 1]  # fmt: skip
        else:
            rows = _cache_rows(reqs, names, caps, sizes, clock, warmup, jobs, client,
                               max_model_len, progress, pols)  # fmt: skip
            _print_table(heading, rows)
        fleet: list[dict] = []
        if replicas > 1:
            if not caps:
                raise click.UsageError(_("--replicas replays full-attention pools only; this "
                                         "model's pool is hybrid"))
            fleet = fleet_rows(reqs, replicas, routings, caps, sizes[0], warmup, jobs, client,
                               max_model_len, seed, progress)  # fmt: skip
            print_fleet(_("{replicas} replicas").format(replicas=replicas), fleet)
    _insights(reqs, sizes[0], top_prefixes, trace_cap, explain_index, save_trace_to, progress)
    _write_outputs(rows, heading, json_out, svg, png, fleet)
    if html_out is not None:
        from kvlab.traffic.report import write_report

        write_report(html_out, reqs, rows, fleet, title=titles, block_size=sizes[0])
        click.echo(_("wrote the report (HTML) to {path}").format(path=html_out))


def _model_budgets(model_config: str | None, kv_cache_memory: str | None,
                   gpu_memory: str | None, utilization: float,
                   weights: str | None) -> tuple[dict | None, list[int]]:  # fmt: skip
    """The model's config and its budgets (bytes), checked before any work."""
    if model_config is None:
        if kv_cache_memory or gpu_memory or weights:
            raise click.UsageError(_("--kv-cache-memory, --gpu-memory and --weights size a "
                                     "model: add --model-config NAME"))
        return None, []
    from kvlab.traffic.sizing import kv_cache_budgets, load_model_config

    try:
        cfg = load_model_config(model_config)
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="--model-config") from None
    mem = parse_sizes(kv_cache_memory, "--kv-cache-memory")
    gpu = parse_sizes(gpu_memory, "--gpu-memory")
    w = parse_sizes(weights, "--weights")
    try:
        return cfg, kv_cache_budgets(cfg, mem, gpu, utilization, w[0] if w else None)
    except ValueError as exc:
        raise click.UsageError(str(exc)) from None


def _policies(text: str) -> list[str]:
    """--policies: libCacheSim's, checked (and importable) before any work."""
    from kvlab.traffic.peer_policies import POLICIES

    out = list(dict.fromkeys(p.strip() for p in text.split(",") if p.strip()))
    bad = [p for p in out if p not in POLICIES]
    if bad:
        raise click.BadParameter(_("unknown policy {name}; allowed: {allowed}").format(
            name=repr(bad[0]), allowed=", ".join(POLICIES)), param_hint="--policies")
    if out:
        try:
            import libcachesim  # noqa: F401
        except ImportError:
            from kvlab.cli_hints import install_hint

            raise click.UsageError(_("--policies needs libcachesim (the policies extra), which "
                                     "is not installed: {hint}").format(
                                         hint=install_hint("policies"))) from None
    return out


def _cache_rows(reqs: list, names: list[str], caps: list[int], sizes: list[int], clock: str,
                warmup: float, jobs: int, client: Any, max_model_len: int | None,
                progress: bool | None, policies: list[str]) -> list[dict]:  # fmt: skip
    from kvlab.traffic import sweep, sweep_rows

    try:
        results = sweep(reqs, [_LIBRARY_NAME.get(n, n) for n in names], caps, sizes,
                        progress=progress, clock=clock, warmup=warmup, jobs=jobs,
                        client=client, max_model_len=max_model_len,
                        policies=policies)  # fmt: skip
    except ValueError as exc:  # NOTE: a block size not dividing a kvevents recording's
        raise click.ClickException(str(exc)) from None
    rows = sweep_rows(results)
    canonical = {v: k for k, v in _LIBRARY_NAME.items()}
    for row in rows:  # NOTE: one name for each cache in every output (table, JSON, plot)
        row["cache"] = canonical.get(row["cache"], row["cache"])
    return rows
