"""``kvlab whatif``: the hit rate a real trace would get at each cache capacity.

    kvlab whatif TRACE --format mooncake --capacity-tokens 1e4,1e5,1e6 [--block-size 16,512]
                 [--caches vllm,nano-vllm,radix] --json OUT.json [--svg CURVE.svg] [--png CURVE.png]
                 [--stream]

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
nano-vllm (``nano`` is accepted too) and radix. A Mooncake trace too big to hold (over
``kvlab.traffic.mooncake.MAX_READ_MEMORY`` to read whole) is refused before reading, saying how
much it would need; ``--stream`` replays it one request at a time in bounded memory
(kvlab.traffic.stream: vllm and radix, sequence clock).
"""

from __future__ import annotations

import json
import shlex
from pathlib import Path
from typing import Any

import click

from kvlab.cli_checks import CACHES_HELP, parse_cache_names
from kvlab.i18n import N_, _

__all__ = ["whatif"]

_FORMATS = ("mooncake", "jsonl", "kvtrace", "kvevents")  # NOTE: kvlab.traffic.FORMATS
_LIBRARY_NAME = {"nano-vllm": "nano"}  # NOTE: kvlab.traffic's name for nano-vllm's cache


def _capacities(text: str, block_size: int) -> list[int]:
    from kvlab.traffic.replay import check_capacity

    out = []
    for part in text.split(","):
        try:
            value = float(part)
        except ValueError:
            raise click.BadParameter(f"{part!r} is not a number of tokens",
                                     param_hint="--capacity-tokens") from None  # fmt: skip
        try:
            out.append(check_capacity(int(value) if value.is_integer() else value, block_size))
        except ValueError as exc:
            raise click.BadParameter(str(exc), param_hint="--capacity-tokens") from None
    return out


def _check_block_size(fmt: str, block_size: int) -> None:
    """Mooncake hash ids cover 512 tokens: the block size must divide 512 (others: >= 1)."""
    if block_size < 1 or (fmt == "mooncake" and 512 % block_size):
        allowed = "the divisors of 512" if fmt == "mooncake" else "an int >= 1"
        raise click.BadParameter(f"{block_size} is not allowed for --format {fmt}; allowed: "
                                 f"{allowed}", param_hint="--block-size")  # fmt: skip


def _load_requests(trace: Path, fmt: str, limit: int | None) -> list:
    """TRACE read as ``--format`` says; a bad file exits 1 naming the line and what is allowed.
    A Mooncake trace too big to hold is refused before reading, pointing at --stream."""
    from kvlab.traffic import load_traffic
    from kvlab.traffic import mooncake

    need = trace.stat().st_size * mooncake.READ_BYTES_PER_FILE_BYTE
    if fmt == "mooncake" and limit is None and need > mooncake.MAX_READ_MEMORY:
        raise click.ClickException(
            f"{trace}: reading this trace whole would take about {need / 2**30:.1f} GiB of "
            f"memory, over the {mooncake.MAX_READ_MEMORY / 2**30:.1f} GiB kvlab allows; add "
            "--stream to replay it one request at a time in bounded memory (caches vllm and "
            "radix), or --limit N for its first N requests")  # fmt: skip
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
            raise click.BadParameter(f"{part!r} is not a whole number of tokens",
                                     param_hint="--block-size") from None  # fmt: skip
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

            raise click.UsageError("--svg / --png need matplotlib (the viz extra), which is not "
                                   f"installed: {install_hint('viz')}") from None  # fmt: skip


def _print_table(title: str, rows: list[dict]) -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table(title=title)
    timed = any(r["clock"] == "timed" for r in rows)
    cols = (N_("cache"), N_("block size"), N_("capacity (tokens)"), N_("hit rate"),
            N_("hit tokens"), N_("evicted blocks"), N_("rejected"))  # fmt: skip
    for col in cols + ((N_("preemptions"), N_("p99 wait (ms)")) if timed else ()):
        if col == "cache":  # NOTE: whole cache names (nano-vllm) even at 80 columns
            table.add_column(_(col), justify="left", no_wrap=True,
                             min_width=max((len(r["cache"]) for r in rows), default=5))
        else:
            table.add_column(_(col), justify="right")
    for r in rows:
        cap = "∞" if r["capacity_tokens"] is None else f"{r['capacity_tokens']:,}"
        extra = ()
        if timed:
            wait = r.get("p99_queueing_delay_ms")
            extra = (f"{r['preemptions']:,}", "" if wait is None else f"{wait:,.0f}")
        table.add_row(r["cache"], str(r["block_size"]), cap, f"{r['hit_rate']:.3f}",
                      f"{r['hit_tokens']:,}", f"{r['evicted_blocks']:,}",
                      f"{r['rejected']:,}", *extra)  # fmt: skip
    Console(highlight=False).print(table)


def _write_outputs(rows: list[dict], title: str, json_out: Path | None, svg: Path | None,
                   png: Path | None) -> None:  # fmt: skip
    """The figure is drawn before any file is written; each file is written atomically."""
    fig = None
    if svg is not None or png is not None:
        from kvlab.traffic.plot import hit_rate_figure

        fig = hit_rate_figure(rows, title=title)
    if json_out is not None:
        write_json_atomic(json_out, {"results": rows})
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
            raise click.UsageError("--explain and --save need --trace-at CAPACITY (tokens): the "
                                   "capacity of the vLLM run they record")  # fmt: skip
        return None
    if not wants:
        raise click.UsageError("--trace-at needs --explain REQ_INDEX and/or --save FILE")
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


@click.command(short_help="Hit rate of a real trace at each cache capacity.")
@click.argument("trace", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--format", "fmt", default="mooncake", show_default=True,
              help=f"Trace format: {', '.join(_FORMATS)}.")
@click.option("--capacity-tokens", required=True, help="Comma-separated pool sizes (tokens).")
@click.option("--block-size", default="512", show_default=True,
              help="kvlab block size(s), comma-separated (tokens).")
@click.option("--caches", default="vllm", show_default=True,
              help=f"Comma-separated, of {CACHES_HELP}.")
@click.option("--clock", default="sequence", show_default=True,
              help="Replay clock: sequence, or timed (vllm only; kvlab.traffic.timed).")
@click.option("--limit", type=click.IntRange(min=1), default=None,
              help="Only the first N requests.")
@click.option("--json", "json_out", type=click.Path(dir_okay=False, path_type=Path),
              default=None, help="Write the results here.")
@click.option("--svg", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Write the hit-rate-vs-capacity curve here (SVG).")
@click.option("--png", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Write the hit-rate-vs-capacity curve here (PNG).")
@click.option("--top-prefixes", type=click.IntRange(min=1), default=None, metavar="K",
              help="Also list the K most reused prefixes (first block size).")
@click.option("--trace-at", type=float, default=None, metavar="CAPACITY",
              help="Capacity (tokens) of the vLLM run (sequence clock, first block size) "
              "that --explain and --save record.")
@click.option("--explain", "explain_index", type=click.IntRange(min=0), default=None,
              metavar="REQ_INDEX", help="Why request REQ_INDEX (0-based) hit what it hit, "
              "in vLLM at --trace-at.")
@click.option("--save", "save_trace_to", type=click.Path(dir_okay=False, path_type=Path),
              default=None, help="Save the vLLM run at --trace-at as a kvlab trace (.kvtrace) "
              "for kvlab trace show and the TracePlayer.")
@click.option("--stream", is_flag=True,
              help="Read a Mooncake TRACE one request at a time: bounded memory for a trace "
              "too big to hold (caches vllm and radix, sequence clock).")
@click.option("--no-progress", is_flag=True,
              help="No progress bars (they show only when stderr is a terminal anyway).")
def whatif(trace: Path, fmt: str, capacity_tokens: str, block_size: str, caches: str,
           clock: str, limit: int | None, json_out: Path | None, svg: Path | None,
           png: Path | None, top_prefixes: int | None, trace_at: float | None,
           explain_index: int | None, save_trace_to: Path | None, stream: bool,
           no_progress: bool) -> None:  # fmt: skip
    """Hit rate of TRACE at each capacity, per cache (and the infinite-cache maximum)."""
    from kvlab.traffic import sweep, sweep_rows

    if fmt not in _FORMATS:
        raise click.BadParameter(f"unknown format {fmt!r}; allowed: {', '.join(_FORMATS)}",
                                 param_hint="--format")  # fmt: skip
    if clock not in ("sequence", "timed"):
        raise click.BadParameter(f"unknown clock {clock!r}; allowed: sequence, timed",
                                 param_hint="--clock")  # fmt: skip
    names = parse_cache_names([c for c in caches.split(",") if c.strip()], "--caches")
    if clock == "timed" and names != ["vllm"]:
        raise click.BadParameter(f"only vllm supports the timed clock, got {caches!r}",
                                 param_hint="--caches")  # fmt: skip
    sizes = _block_sizes(block_size, fmt)
    caps = _capacities(capacity_tokens, max(sizes))  # NOTE: >= one block of every size
    if json_out is not None and not (json_out.parent or Path(".")).resolve().is_dir():
        raise click.BadParameter(f"folder {json_out.parent} does not exist",
                                 param_hint="--json")  # fmt: skip
    _check_images(svg, png)
    trace_cap = _check_trace_at(trace_at, explain_index, save_trace_to, sizes[0])
    if stream:
        _check_stream(fmt, clock, names, top_prefixes, trace_cap)
        num, results = _stream(trace, names, caps, sizes, limit, no_progress)
        _report(trace, num, sizes, sweep_rows(results), json_out, svg, png)
        return
    reqs = _load_requests(trace, fmt, limit)
    if explain_index is not None and explain_index >= len(reqs):
        raise click.BadParameter(f"request {explain_index} is outside the trace; allowed: "
                                 f"0..{len(reqs) - 1}", param_hint="--explain")  # fmt: skip
    try:
        results = sweep(reqs, [_LIBRARY_NAME.get(n, n) for n in names], caps, sizes,
                        progress=False if no_progress else None, clock=clock)
    except ValueError as exc:  # NOTE: a block size not dividing a kvevents recording's
        raise click.ClickException(str(exc)) from None
    rows = _report(trace, len(reqs), sizes, sweep_rows(results), None, None, None)
    progress = False if no_progress else None
    _insights(reqs, sizes[0], top_prefixes, trace_cap, explain_index, save_trace_to, progress)
    _write_outputs(rows, _title(trace, len(reqs), sizes), json_out, svg, png)


def _title(trace: Path, num: int, sizes: list[int]) -> str:
    return f"{trace.name}: {num:,} requests, block size {', '.join(str(bs) for bs in sizes)}"


def _report(trace: Path, num: int, sizes: list[int], rows: list[dict], json_out: Path | None,
            svg: Path | None, png: Path | None) -> list[dict]:  # fmt: skip
    """The table (and the files asked for) of the result rows, one name per cache."""
    canonical = {v: k for k, v in _LIBRARY_NAME.items()}
    for row in rows:  # NOTE: one name for each cache in every output (table, JSON, plot)
        row["cache"] = canonical.get(row["cache"], row["cache"])
    _print_table(_("{trace}: {requests} requests, block size {block_sizes}").format(
        trace=trace.name, requests=f"{num:,}",
        block_sizes=", ".join(str(bs) for bs in sizes)), rows)  # fmt: skip
    _write_outputs(rows, _title(trace, num, sizes), json_out, svg, png)
    return rows


def _check_stream(fmt: str, clock: str, names: list[str], top: int | None,
                  trace_cap: int | None) -> None:  # fmt: skip
    """--stream replays a Mooncake file on the sequence clock through vllm and radix only."""
    if fmt != "mooncake":
        raise click.BadParameter(f"--stream reads Mooncake traces only, got --format {fmt}; "
                                 "allowed: mooncake", param_hint="--format")  # fmt: skip
    if clock != "sequence":
        raise click.BadParameter(f"--stream replays on the sequence clock only, got {clock!r}; "
                                 "allowed: sequence", param_hint="--clock")  # fmt: skip
    bad = [n for n in names if n not in ("vllm", "radix")]
    if bad:
        raise click.BadParameter(f"{bad[0]} cannot be streamed (it hashes every synthesized "
                                 "token); allowed with --stream: vllm, radix",
                                 param_hint="--caches")  # fmt: skip
    if top is not None or trace_cap is not None:
        raise click.UsageError("--top-prefixes, --trace-at, --explain and --save look back over "
                               "the whole request list, which --stream does not keep; run them "
                               "with --limit N instead of --stream")  # fmt: skip


def _stream(trace: Path, names: list[str], caps: list[int], sizes: list[int],
            limit: int | None, no_progress: bool) -> tuple[int, list]:  # fmt: skip
    from kvlab.traffic.stream import sweep_mooncake_stream

    try:
        return sweep_mooncake_stream(trace, names, caps, sizes, limit,
                                     progress=False if no_progress else None)  # fmt: skip
    except ValueError as exc:
        raise click.ClickException(str(exc)) from None
