"""The fuzz targets: every kvlab reader of outside bytes, and the outcomes each may have.

A target reads one input file (the fuzzer's bytes, written under ``workdir`` with the
target's suffix) the way kvlab's public API does, then uses what it read the way a viewer or
``kvlab whatif`` would. The only outcomes allowed (``execute``):

* a result; or
* one of the target's documented error types, whose message names the file (its path), is at
  most ``MAX_MESSAGE_CHARS`` beyond the path (a 1 MB id is never echoed whole) and holds no
  terminal control or bidi character (messages are printed to terminals as they are).

Anything else (another exception, a documented error with a bad message) raises ``Disallowed``
with a signature (exception type and the innermost kvlab frame) for de-duplication. Time and
memory bounds are enforced by the runner (``benchmarks/fuzz.py``: per-input timeout, address
space limit), not here. The player's JavaScript decoder is ``benchmarks/fuzz_js.py``.

Used by ``benchmarks/fuzz.py`` (campaigns) and ``tests/robustness/test_fuzz_corpus.py`` (CI
replays the committed corpus in ``tests/fuzz_corpus/<target>/``).
"""

from __future__ import annotations

import re
import traceback
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = ["MAX_MESSAGE_CHARS", "TARGETS", "Disallowed", "Target", "check_message", "execute"]

MAX_MESSAGE_CHARS = 2000
"""Longest error message allowed, not counting the path it names (characters)."""

# NOTE: C0 controls but \t and \n, DEL, C1 controls, and the Unicode bidi / format controls
# that reorder or hide text (LRM, RLM, ALM, LRE..RLO, LRI..PDI, zero-width joiners, BOM).
_CONTROL = re.compile(
    "[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200b-\u200f\u202a-\u202e\u2060-\u2069\ufeff]"
)


class Disallowed(Exception):
    """An outcome the target does not allow; ``signature`` groups equal findings."""

    def __init__(self, signature: str, detail: str) -> None:
        super().__init__(f"{signature}\n{detail}")
        self.signature = signature
        self.detail = detail


@dataclass(frozen=True)
class Target:
    """One reader under fuzzing.

    Attributes:
        name: The campaign name (``benchmarks/fuzz.py NAME``).
        suffix: File suffix of the input (readers pick the format by it).
        run: Reads the input file and uses the result.
        allowed: The documented error types.
        max_len: Longest input the fuzzer makes (bytes).
        instrument: Modules whose code atheris instruments for coverage.
        tokens: A libFuzzer dictionary: words the format uses (keys, tags, magic).
        measure: The reader's source files (line coverage is reported for them).
        names_file: Whether error messages must name the input file (readers of files do;
            the player's decoder gets an object, not a file).
    """

    name: str
    suffix: str
    run: Callable[[Path], Any]
    allowed: tuple[type[BaseException], ...]
    max_len: int
    instrument: tuple[str, ...]
    tokens: tuple[str, ...] = ()
    measure: tuple[str, ...] = ()
    names_file: bool = True


_KV_TOKENS = ("BlockStored", "BlockRemoved", "AllBlocksCleared", "type", "block_hashes",
              "parent_block_hash", "token_ids", "block_size", "lora_id", "medium", "lora_name",
              "extra_keys", "group_idx", "kv_cache_spec_kind", "kv_cache_spec_sliding_window",
              "locality", "ownership", "session_id", "lookahead_token_ids", "GPU", "CPU",
              "STORAGE", "ts", "events", "data_parallel_rank", "seq", "topic", "hex",
              "KVEV1\n")  # fmt: skip
_TRACE_TOKENS = ("header.json", "magic", "kvlab-trace", "format_version", "num_events", "arrays",
                 "dtype", "shape", "config", "call_names", "requests", "checkpoint_interval",
                 "initial_state", "num_blocks", "num_groups", "null_block_id", "<i8", "<i4",
                 "<u1", "<i2", "|u1", ".npy", "\x93NUMPY", "descr", "fortran_order", "kind",
                 "payload", "offsets", "step_seq", "init_free_queue", "init_req", "init_cached",
                 "hash_blob", "hash_offsets")  # fmt: skip
_WORKLOAD_TOKENS = ("timestamp", "input_length", "output_length", "hash_ids", "prompt_token_ids",
                    "prompt", "max_tokens", "arrival_step", "output_token_ids", "request_id",
                    "depends_on", "null", "true", "1e309", "-0")  # fmt: skip
_GGUF_TOKENS = ("GGUF", "general.architecture", "llama", "qwen2", "llama.block_count",
                "llama.embedding_length", "llama.attention.head_count", "llama.context_length",
                "llama.attention.sliding_window", "llama.attention.sliding_window_pattern",
                "llama.rope.scaling.type", "linear", "tokenizer.ggml.tokens",
                "tokenizer.ggml.merges", "tokenizer.ggml.token_type", "tokenizer.ggml.model",
                "tokenizer.ggml.pre", "gpt2", "tokenizer.chat_template",
                "tokenizer.ggml.bos_token_id", "tokenizer.ggml.add_bos_token", "{{", "{%")  # fmt: skip


def check_message(exc: BaseException, path: Path, names_file: bool = True) -> None:
    """Raise Disallowed unless ``exc``'s message names ``path``, is bounded and shows no
    control characters."""
    message, name = str(exc), type(exc).__name__
    if names_file and str(path) not in message:
        raise Disallowed(f"{name} message does not name the file", message[:300])
    if len(message) > MAX_MESSAGE_CHARS + len(str(path)):
        raise Disallowed(f"{name} message over {MAX_MESSAGE_CHARS} characters",
                         f"{len(message)} characters: {message[:300]}")
    bad = _CONTROL.search(message)
    if bad:
        raise Disallowed(f"{name} message holds control character {bad.group()!r}", repr(message[:300]))


def _signature(exc: BaseException) -> str:
    frames = traceback.extract_tb(exc.__traceback__)
    inner = [f for f in frames if "/kvlab/" in f.filename] or frames
    where = f"{Path(inner[-1].filename).name}:{inner[-1].lineno}" if inner else "?"
    return f"{type(exc).__name__} at {where}"


def execute(target: Target, data: bytes, workdir: Path) -> str | None:
    """Run one input: None for a result, the message of an allowed error, else Disallowed."""
    path = workdir / f"input{target.suffix}"
    path.write_bytes(data)
    try:
        target.run(path)
    except target.allowed as exc:
        check_message(exc, path, target.names_file)
        return str(exc)
    except (KeyboardInterrupt, SystemExit):
        raise
    except BaseException as exc:  # noqa: BLE001 - the finding is the point (pyo3 panics too)
        signature = getattr(exc, "signature", None) or _signature(exc)
        raise Disallowed(signature, "".join(traceback.format_exception(exc))[-3000:]) from exc
    return None


# ---------------------------------------------------------------------------- kvtrace
def _use_trace(trace: Any) -> None:
    """What a viewer does with a loaded trace: print it, walk the calls, replay it."""
    from kvlab.trace import ReplayError

    str(trace)
    for i in range(min(len(trace), 256)):
        str(trace[i])
    for call in trace.calls()[:64]:
        str(call)
    trace.call_tree()
    try:
        trace.check_replay()
        if len(trace):
            trace.state_at(len(trace) // 2)
    except ReplayError:
        pass  # NOTE: documented: a loaded trace whose events contradict each other


def _run_kvtrace(path: Path) -> None:
    from kvlab.trace import load_trace

    _use_trace(load_trace(path))


def _run_kvtrace_entries(path: Path) -> None:
    """The input is entries (``name\\0size\\0bytes`` ...) zipped here into a valid archive, so
    mutations reach header.json and the .npy entries instead of failing the zip CRC."""
    import zipfile

    from kvlab.trace import TraceFormatError, load_trace

    data, entries, at = path.read_bytes(), [], 0
    while at < len(data) and len(entries) < 64:
        name_end = data.find(b"\0", at)
        size_end = data.find(b"\0", name_end + 1)
        if name_end < 0 or size_end < 0:
            break
        try:
            size = int(data[name_end + 1 : size_end] or b"0")
        except ValueError:
            break
        name = data[at:name_end].decode("utf-8", "replace") or "x"
        entries.append((name, data[size_end + 1 : size_end + 1 + size]))
        at = size_end + 1 + size
    zipped = path.with_suffix(".zip.kvtrace")
    with zipfile.ZipFile(zipped, "w", compression=zipfile.ZIP_STORED) as zf, \
            warnings.catch_warnings():  # fmt: skip
        warnings.simplefilter("ignore")  # NOTE: duplicate names are part of the fuzzing
        for name, raw in entries:
            zf.writestr(name, raw)
    try:
        _use_trace(load_trace(zipped))
    except TraceFormatError as exc:  # NOTE: name the input (the fuzzer's file)
        raise TraceFormatError(str(exc).replace(str(zipped), str(path))) from None


# ---------------------------------------------------------------------------- KV events
def _run_kv_event_payload(path: Path) -> None:
    """decode_kv_event_payload (the path names the payload), then an oracle: re-encoded in its
    own form (vLLM 0.22.1's arrays or 0.33.0's maps) it decodes back to the same batch."""
    from kvlab.kv_events import decode_kv_event_payload, encode_kv_event_payload

    decoded = decode_kv_event_payload(path.read_bytes(), str(path))
    extras = [e for e in decoded.newer_fields if e]
    version = "0.33.0" if decoded.form == "map" else None if extras else "0.22.1"
    if version is not None:
        again = decode_kv_event_payload(
            encode_kv_event_payload(decoded.batch, version, list(decoded.newer_fields)), "again"
        )
        if (again.batch, again.newer_fields) != (decoded.batch, decoded.newer_fields):
            raise AssertionError(f"round trip changed the batch: {decoded} -> {again}")


def _run_kv_event_file(path: Path) -> None:
    from kvlab.kv_events import read_kv_event_file

    trace = read_kv_event_file(path).trace()
    if len(trace):
        trace.state_at(len(trace) - 1)


# ---------------------------------------------------------------------------- workloads
def _use_traffic(reqs: list[Any]) -> None:
    from kvlab.traffic import synthesize_tokens

    for r in reqs[:32]:
        if r.num_prompt_tokens <= 1 << 16:
            synthesize_tokens(r)


def _run_mooncake(path: Path) -> None:
    from kvlab.traffic import load_traffic

    _use_traffic(load_traffic(path, "mooncake"))


def _run_workload_jsonl(path: Path) -> None:
    from kvlab.traffic import load_traffic

    _use_traffic(load_traffic(path, "jsonl"))


# ---------------------------------------------------------------------------- GGUF
def _run_gguf(path: Path) -> None:
    """The metadata kvlab interprets: the model config and the tokenizer (vocab, merges, special
    ids, chat template), as ``load_model_and_tokenizer`` reads them before any weight."""
    from kvlab.model.loader import read_gguf_header

    config, tokenizer = read_gguf_header(path)
    ids = tokenizer.encode("Hello, world")
    tokenizer.decode(ids)


_TRACE_FILES = ("kvlab/trace/fileformat.py", "kvlab/trace/fileformat_checks.py",
                "kvlab/trace/replay.py", "kvlab/trace/trace.py", "kvlab/trace/tables.py")
_KV_FILES = ("kvlab/kv_events/wire.py", "kvlab/kv_events/format.py", "kvlab/kv_events/stream.py")
_GGUF_FILES = ("kvlab/model/gguf_loader.py", "kvlab/model/tokenizer.py", "kvlab/model/loader.py",
               "kvlab/model/config.py")
_GGUF_MODULES = ("kvlab.model.gguf_loader", "kvlab.model.tokenizer", "kvlab.model.loader",
                 "kvlab.model.config", "gguf.gguf_reader")
_JSONL_FILES = ("kvlab/compare/workload_io.py", "kvlab/compare/workloads.py",
                "kvlab/traffic/formats.py")
_JSONL_MODULES = ("kvlab.traffic", "kvlab.compare.workload_io", "kvlab.compare.workloads")


def _targets() -> dict[str, Target]:
    from kvlab.kv_events import KVEventFormatError
    from kvlab.trace import TraceFormatError

    kv = _KV_MODULES
    trace_err, kv_err = (TraceFormatError,), (KVEventFormatError,)
    return {
        t.name: t
        for t in (
            Target("kvtrace", ".kvtrace", _run_kvtrace, trace_err, 1 << 16,
                   ("kvlab.trace", "zipfile"), _TRACE_TOKENS, _TRACE_FILES),
            Target("kvtrace-entries", ".kvtrace", _run_kvtrace_entries, trace_err, 1 << 16,
                   ("kvlab.trace",), _TRACE_TOKENS, _TRACE_FILES),
            Target("kv-event-payload", ".msgpack", _run_kv_event_payload, kv_err, 1 << 14, kv,
                   _KV_TOKENS, _KV_FILES[1:2] + ("kvlab/kv_events/versions.py",)),
            Target("kvev", ".kvev", _run_kv_event_file, kv_err, 1 << 15, kv, _KV_TOKENS,
                   _KV_FILES),
            Target("kvev-jsonl", ".jsonl", _run_kv_event_file, kv_err, 1 << 15, kv, _KV_TOKENS,
                   _KV_FILES),
            Target("mooncake", ".jsonl", _run_mooncake, (ValueError,), 1 << 15,
                   ("kvlab.traffic",), _WORKLOAD_TOKENS,
                   ("kvlab/traffic/mooncake.py", "kvlab/traffic/formats.py")),
            Target("workload-jsonl", ".jsonl", _run_workload_jsonl, (ValueError,), 1 << 15,
                   _JSONL_MODULES, _WORKLOAD_TOKENS, _JSONL_FILES),
            Target("gguf", ".gguf", _run_gguf, (ValueError,), 1 << 16, _GGUF_MODULES,
                   _GGUF_TOKENS, _GGUF_FILES),
        )
    }  # fmt: skip


class _Lazy(dict):
    """TARGETS, built on first use (importing kvlab must wait for atheris' instrumentation)."""

    def _fill(self) -> None:
        if not super().__len__():
            self.update(_targets())

    def __getitem__(self, key: str) -> Target:
        self._fill()
        return super().__getitem__(key)

    def __iter__(self):  # type: ignore[no-untyped-def]
        self._fill()
        return super().__iter__()

    def __len__(self) -> int:
        self._fill()
        return super().__len__()

    def __contains__(self, key: object) -> bool:
        self._fill()
        return super().__contains__(key)


TARGETS: dict[str, Target] = _Lazy()
"""Every Python target by name (the JS decoder is ``benchmarks/fuzz_js.py``)."""

_KV_MODULES = ("kvlab.kv_events", "kvlab.core.kv_events", "kvlab.trace")
INSTRUMENT: dict[str, tuple[str, ...]] = {
    "kvtrace": ("kvlab.trace", "zipfile"),
    "kvtrace-entries": ("kvlab.trace",),
    "kv-event-payload": _KV_MODULES,
    "kvev": _KV_MODULES,
    "kvev-jsonl": _KV_MODULES,
    "mooncake": ("kvlab.traffic",),
    "workload-jsonl": _JSONL_MODULES,
    "gguf": _GGUF_MODULES,
}
"""Target name -> the modules atheris instruments (known before kvlab is imported)."""
NAMES = tuple(INSTRUMENT)
"""The Python targets' names (the JavaScript one is ``player-js``)."""
