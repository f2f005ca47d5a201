"""A playground scenario: the pool, the cache design and the requests, as plain JSON-able data.

The playground page edits a scenario, the share link carries it (``#s=`` + base64url JSON), and
``kvlab.playground.run_scenario`` runs it on kvlab.core, in the browser and in CPython alike.
Every key is optional (``DEFAULTS`` fills the rest)::

    {"num_gpu_blocks": 16, "block_size": 4, "max_model_len": 128,
     "layers": ["full"],            # one entry per KV cache group: "full", or a window (tokens)
     "enable_caching": true, "hash": "sha256",     # sha256 | sha256_cbor | xxhash | xxhash_cbor
     "text": "ids",                 # how prompts are written: "ids" or "words" (word_ids)
     "requests": [{"id": "a", "prompt": "0..13", "output": "", "arrival": 0, "max_tokens": 4}],
     "driver": "scheduler",         # "scheduler" (kvlab.core.sched) or "calls" (KVCacheManager)
     "calls": "admit a\\nfree a",    # the "calls" driver's script (kvlab.playground.run)
     "max_num_seqs": 16, "max_num_batched_tokens": 2048,     # preemption pressure
     "scheduler_reserve_full_isl": true, "enable_chunked_prefill": true,
     "predict": []}                 # the player's predict mode: kinds from PREDICT_KINDS

Token ids (``"text": "ids"``): integers separated by spaces or commas; ``a..b`` is the range
a, a+1, ..., b. Words (``"text": "words"``): see ``word_ids``. A prompt may also be a JSON list
of ints. Values that kvlab.core checks (block_size, the windows, max_model_len, the hash name,
the token ids, max_tokens) are handed to it unchanged, so a bad one gets kvlab.core's own
message; the rest is checked here (``ScenarioError``). ``LIMITS`` keeps a scenario small enough
to run and draw in a browser.

Examples:
    >>> word_ids("the cat")
    [28134, 17320]
    >>> token_ids("0..3, 7")
    [0, 1, 2, 3, 7]
"""

from __future__ import annotations

import re
import zlib
from dataclasses import dataclass
from typing import Any

from kvlab.viz.predict_common import PREDICT_KINDS

__all__ = [
    "CALL_NAMES",
    "DEFAULTS",
    "LIMITS",
    "VOCAB_SIZE",
    "Call",
    "RequestSpec",
    "Scenario",
    "ScenarioError",
    "parse_scenario",
    "token_ids",
    "word_ids",
]

VOCAB_SIZE = 49152
"""Word ids are taken modulo this (SmolLM2-135M's vocabulary size, the course's model)."""

DEFAULTS: dict[str, Any] = {
    "num_gpu_blocks": 16,
    "block_size": 4,
    "max_model_len": 128,
    "layers": ["full"],
    "enable_caching": True,
    "hash": "sha256",
    "text": "ids",
    "requests": [],
    "driver": "scheduler",
    "calls": "",
    "max_num_seqs": 16,
    "max_num_batched_tokens": 2048,
    "scheduler_reserve_full_isl": True,
    "enable_chunked_prefill": True,
    "predict": [],
}
"""The value of every scenario key that a scenario leaves out."""

LIMITS = {
    "num_gpu_blocks": 1024,
    "requests": 64,
    "prompt_tokens": 2048,
    "total_tokens": 8192,
    "calls": 256,
    "steps": 1000,
}
"""Largest scenario the playground runs (blocks, requests, tokens per prompt, prompt + output
tokens of all requests together, lines of calls, scheduler steps)."""

CALL_NAMES = ("admit", "prefill", "decode", "lookup", "free", "evict", "reset")
"""The ``calls`` driver's operations (``kvlab.playground.run`` says what each does)."""

_KEYS = frozenset(DEFAULTS) | {"version", "title"}
_DRIVERS = ("scheduler", "calls")
_TEXTS = ("ids", "words")
# CJK ideographs, kana and compatibility ideographs: each one is a word by itself.
_CJK = "\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff"
_WORD = re.compile(rf"[{_CJK}]|[^\s{_CJK}]+")
_ID_PIECE = re.compile(r"[^\s,]+")
_INT = re.compile(r"[+-]?\d+")
_RANGE = re.compile(r"([+-]?\d+)\.\.([+-]?\d+)")
_REQUEST_ID = re.compile(r"[^\s]{1,32}")


class ScenarioError(ValueError):
    """A scenario the playground cannot run; the message names the value and what is allowed."""


def word_ids(text: str) -> list[int]:
    """Token ids of ``text`` by the playground's word-level mapping.

    Words are runs of characters between whitespace; each CJK ideograph or kana is a word by
    itself (Chinese needs no spaces). A word's id is ``zlib.crc32(word.encode("utf-8")) %
    VOCAB_SIZE``: the same word always gets the same id, case and punctuation included
    ("Paris" and "Paris." differ). Two words may share an id (a hash collision, rare).

    Raises:
        ScenarioError: If ``text`` is not a string.
    """
    if not isinstance(text, str):
        raise ScenarioError(f"words must be text, got {type(text).__name__} {text!r}")
    return [zlib.crc32(w.encode("utf-8")) % VOCAB_SIZE for w in _WORD.findall(text)]


def token_ids(text: str) -> list[Any]:
    """Token ids written as integers separated by spaces or commas, ``a..b`` for a range.

    A piece that is not an integer (or a range) is kept as it is, so that kvlab.core's Request
    refuses it with its own message (``prompt_token_ids[2] is str 'hello'; ...``).

    Raises:
        ScenarioError: If ``text`` is not a string, or a range runs backwards or is longer
            than ``LIMITS["prompt_tokens"]``.
    """
    if not isinstance(text, str):
        raise ScenarioError(f"token ids must be text, got {type(text).__name__} {text!r}")
    out: list[Any] = []
    for piece in _ID_PIECE.findall(text):
        span = _RANGE.fullmatch(piece)
        if span:
            first, last = int(span.group(1)), int(span.group(2))
            if last < first or last - first >= LIMITS["prompt_tokens"]:
                raise ScenarioError(
                    f"range {piece!r} must go up (a..b with a <= b) and hold at most "
                    f"{LIMITS['prompt_tokens']} tokens"
                )
            out.extend(range(first, last + 1))
        else:
            out.append(int(piece) if _INT.fullmatch(piece) else piece)
    return out


@dataclass(frozen=True)
class RequestSpec:
    """One request of a scenario.

    Attributes:
        request_id: Its id (1-32 characters, no whitespace).
        prompt: Prompt token ids (as parsed: a non-int is left for kvlab.core to refuse).
        output: Token ids the model "generates", in order; past the end it generates token 7
            (as in notebook 8).
        arrival: Scheduler step at which it is added (the scheduler driver).
        max_tokens: Output tokens before it finishes (SamplingParams.max_tokens).
    """

    request_id: str
    prompt: tuple[Any, ...]
    output: tuple[Any, ...]
    arrival: int
    max_tokens: Any


@dataclass(frozen=True)
class Call:
    """One line of the ``calls`` driver's script: ``name`` and its arguments (request id, a
    count or block ids), with its 1-based line number for messages."""

    line: int
    name: str
    args: tuple[str, ...]


@dataclass(frozen=True)
class Scenario:
    """A checked scenario (see the module docstring for the keys).

    Attributes:
        data: The scenario as given, with ``DEFAULTS`` filled in (what a share link carries).
        layers: Per KV cache group, ``"full"`` or a sliding window (tokens, as given).
        requests: The requests, in the order given.
        calls: The ``calls`` driver's parsed lines (empty for the scheduler driver).
    """

    data: dict[str, Any]
    layers: tuple[Any, ...]
    requests: tuple[RequestSpec, ...]
    calls: tuple[Call, ...]

    def __getattr__(self, name: str) -> Any:
        data = self.__dict__.get("data", {})
        if name in data:
            return data[name]
        raise AttributeError(name)


def _plain_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _check_int(data: dict[str, Any], key: str, low: int, high: int | None = None) -> None:
    value = data[key]
    if not _plain_int(value) or value < low or (high is not None and value > high):
        allowed = f"an integer from {low} to {high}" if high is not None else f"an integer >= {low}"
        raise ScenarioError(f"{key} must be {allowed}, got {value!r}")


def _check_bool(data: dict[str, Any], key: str) -> None:
    if not isinstance(data[key], bool):
        raise ScenarioError(f"{key} must be true or false, got {data[key]!r}")


def _tokens(value: Any, text: str, what: str) -> list[Any]:
    if isinstance(value, list):
        return list(value)
    if not isinstance(value, str):
        raise ScenarioError(f"{what} must be text or a list of token ids, got {value!r}")
    return word_ids(value) if text == "words" else token_ids(value)


def _request(entry: Any, index: int, text: str) -> RequestSpec:
    if not isinstance(entry, dict):
        raise ScenarioError(
            f"requests[{index}] must be an object with an id and a prompt, got {entry!r}"
        )
    unknown = sorted(set(entry) - {"id", "prompt", "output", "arrival", "max_tokens"})
    if unknown:
        raise ScenarioError(
            f"requests[{index}] has unknown key(s) {unknown}; keys are id, "
            "prompt, output, arrival, max_tokens"
        )
    rid = entry.get("id", f"r{index}")
    if not isinstance(rid, str) or not _REQUEST_ID.fullmatch(rid):
        raise ScenarioError(
            f"requests[{index}]: a request id is 1 to 32 characters without spaces, got {rid!r}"
        )
    prompt = _tokens(entry.get("prompt", ""), text, f"request {rid!r}'s prompt")
    if not prompt:
        raise ScenarioError(f"request {rid!r} has an empty prompt; a prompt needs at least 1 token")
    if len(prompt) > LIMITS["prompt_tokens"]:
        raise ScenarioError(
            f"request {rid!r}'s prompt has {len(prompt)} tokens; the playground "
            f"takes at most {LIMITS['prompt_tokens']}"
        )
    output = _tokens(entry.get("output", ""), text, f"request {rid!r}'s output")
    arrival = entry.get("arrival", 0)
    if not _plain_int(arrival) or not 0 <= arrival < LIMITS["steps"]:
        raise ScenarioError(
            f"request {rid!r}: arrival must be a scheduler step from 0 to "
            f"{LIMITS['steps'] - 1}, got {arrival!r}"
        )
    return RequestSpec(rid, tuple(prompt), tuple(output), arrival, entry.get("max_tokens", 4))


def _parse_calls(script: Any, request_ids: set[str]) -> tuple[Call, ...]:
    if isinstance(script, list):
        script = "\n".join(map(str, script))
    if not isinstance(script, str):
        raise ScenarioError(f"calls must be text, one call per line, got {script!r}")
    calls = []
    for number, raw in enumerate(script.splitlines(), start=1):
        words = raw.split("#", 1)[0].split()
        if not words:
            continue
        name, args = words[0], tuple(words[1:])
        where = f"calls, line {number} ({raw.strip()!r})"
        if name not in CALL_NAMES:
            raise ScenarioError(
                f"{where}: unknown call {name!r}; calls are {', '.join(CALL_NAMES)}"
            )
        if name in ("admit", "prefill", "lookup", "free", "decode"):
            most = 2 if name == "decode" else 1
            if not 1 <= len(args) <= most:
                form = (
                    f"{name} REQUEST_ID [NUM_STEPS]" if name == "decode" else f"{name} REQUEST_ID"
                )
                raise ScenarioError(f"{where}: write {form}")
            if args[0] not in request_ids:
                known = ", ".join(sorted(request_ids)) or "none"
                raise ScenarioError(f"{where}: no request {args[0]!r}; requests are {known}")
            if len(args) == 2 and not (args[1].isdigit() and 1 <= int(args[1]) <= LIMITS["steps"]):
                raise ScenarioError(
                    f"{where}: the number of decode steps must be an integer "
                    f"from 1 to {LIMITS['steps']}, got {args[1]!r}"
                )
        elif name == "evict":
            if not args or not all(a.isdigit() for a in args):
                raise ScenarioError(
                    f"{where}: write evict BLOCK_ID [BLOCK_ID ...] (block ids are integers >= 0)"
                )
        elif args:
            raise ScenarioError(f"{where}: reset takes no arguments")
        calls.append(Call(number, name, args))
    if len(calls) > LIMITS["calls"]:
        raise ScenarioError(
            f"calls has {len(calls)} lines; the playground runs at most {LIMITS['calls']}"
        )
    return tuple(calls)


def _layers(value: Any) -> tuple[Any, ...]:
    if not isinstance(value, list) or not 1 <= len(value) <= 8:
        raise ScenarioError(
            'layers must list 1 to 8 KV cache groups, each "full" or a sliding '
            f"window in tokens, got {value!r}"
        )
    for entry in value:
        if entry != "full" and (isinstance(entry, bool) or not isinstance(entry, int)):
            raise ScenarioError(
                f'a layer is "full" or a sliding window in tokens (an integer), got {entry!r}'
            )
    return tuple(value)


def parse_scenario(data: Any) -> Scenario:
    """Check a scenario dict and fill in the defaults.

    Args:
        data: A dict with the keys of the module docstring (any subset).

    Returns:
        The Scenario.

    Raises:
        ScenarioError: On an unknown key or a bad value the playground checks itself (pool
            size, requests, calls, limits); kvlab.core checks the rest when the scenario runs.
    """
    if not isinstance(data, dict):
        raise ScenarioError(f"a scenario is a JSON object, got {type(data).__name__}")
    unknown = sorted(set(data) - _KEYS)
    if unknown:
        raise ScenarioError(f"unknown scenario key(s) {unknown}; keys are {sorted(DEFAULTS)}")
    full = {**DEFAULTS, **data}
    _check_int(full, "num_gpu_blocks", 2, LIMITS["num_gpu_blocks"])
    for key in ("enable_caching", "scheduler_reserve_full_isl", "enable_chunked_prefill"):
        _check_bool(full, key)
    if full["driver"] not in _DRIVERS:
        raise ScenarioError(f"driver must be one of {', '.join(_DRIVERS)}, got {full['driver']!r}")
    if full["text"] not in _TEXTS:
        raise ScenarioError(f"text must be one of {', '.join(_TEXTS)}, got {full['text']!r}")
    predict = full["predict"]
    if not isinstance(predict, list) or any(k not in PREDICT_KINDS for k in predict):
        raise ScenarioError(f"predict lists kinds from {', '.join(PREDICT_KINDS)}, got {predict!r}")
    layers = _layers(full["layers"])
    entries = full["requests"]
    if not isinstance(entries, list):
        raise ScenarioError(f"requests must be a list, got {type(entries).__name__}")
    if len(entries) > LIMITS["requests"]:
        raise ScenarioError(
            f"the scenario has {len(entries)} requests; the playground runs at "
            f"most {LIMITS['requests']}"
        )
    requests = tuple(_request(e, i, full["text"]) for i, e in enumerate(entries))
    ids = [r.request_id for r in requests]
    dup = sorted({r for r in ids if ids.count(r) > 1})
    if dup:
        raise ScenarioError(f"request ids must be unique; repeated: {', '.join(dup)}")
    total = sum(len(r.prompt) + (r.max_tokens if _plain_int(r.max_tokens) else 0) for r in requests)
    if total > LIMITS["total_tokens"]:
        raise ScenarioError(
            f"the requests hold {total} tokens (prompts + max_tokens); the "
            f"playground runs at most {LIMITS['total_tokens']}"
        )
    calls = _parse_calls(full["calls"], set(ids)) if full["driver"] == "calls" else ()
    return Scenario(full, layers, requests, calls)
