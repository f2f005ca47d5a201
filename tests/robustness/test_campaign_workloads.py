"""Bad-input campaign, JSONL workloads: one ValueError naming the line and what is allowed.

Each row is a JSONL file with one bad request (after a good one, so the line number matters).
The reader holds no state; "nothing changed" means the file is left as it was and a good file
read afterwards gives the same workload as before.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from kvlab.compare import from_jsonl, from_jsonl_lines
from kvlab.compare import workload_io

GOOD = '{"request_id": "a", "prompt_token_ids": [1, 2, 3], "max_tokens": 2}'

ROWS: list[tuple[str, list[str], str]] = [
    ("empty file", [], r"no requests \(allowed: at least one JSON object line\)"),
    ("only blank lines", ["", "  "], r"no requests \(allowed: at least one"),
    ("prompt ids a bare str", ['{"prompt_token_ids": "123", "max_tokens": 1}'],
     r"line 2: prompt_token_ids must be a JSON list of token ids \(ints >= 0\), got str"),
    ("prompt ids strings", ['{"prompt_token_ids": ["1", "2"], "max_tokens": 1}'],
     r"line 2: prompt_token_ids must hold token ids \(ints >= 0\), got \['1', '2'\]"),
    ("prompt ids floats", ['{"prompt_token_ids": [1.5, 2.0], "max_tokens": 1}'],
     r"must hold token ids \(ints >= 0\), got \[1.5, 2.0\]"),
    ("prompt ids None", ['{"prompt_token_ids": [null], "max_tokens": 1}'],
     r"must hold token ids \(ints >= 0\), got \[None\]"),
    ("prompt ids bools", ['{"prompt_token_ids": [true], "max_tokens": 1}'],
     r"must hold token ids \(ints >= 0\)"),
    ("prompt ids negative", ['{"prompt_token_ids": [-1], "max_tokens": 1}'],
     r"must hold token ids \(ints >= 0\), got \[-1\]"),
    ("prompt null", ['{"prompt_token_ids": null, "max_tokens": 1}'],
     r"must be a JSON list of token ids.*got NoneType"),
    ("prompt an object", ['{"prompt_token_ids": {"0": 1}, "max_tokens": 1}'],
     r"must be a JSON list of token ids"),
    ("prompt empty", ['{"prompt_token_ids": [], "max_tokens": 1}'],
     r"line 2: the prompt is empty \(allowed: at least one token id\)"),
    ("max_tokens 10**9", ['{"prompt_token_ids": [1], "max_tokens": 1000000000}'],
     r"max_tokens must be an int in \[1, 1048576\], got 1000000000"),
    ("max_tokens 0", ['{"prompt_token_ids": [1], "max_tokens": 0}'],
     r"max_tokens must be an int in \[1, 1048576\], got 0"),
    ("max_tokens '8'", ['{"prompt_token_ids": [1], "max_tokens": "8"}'],
     r"max_tokens must be an int in \[1, 1048576\], got '8'"),
    ("max_tokens 1.5", ['{"prompt_token_ids": [1], "max_tokens": 1.5}'],
     r"max_tokens must be an int in \[1, "),
    ("max_tokens true", ['{"prompt_token_ids": [1], "max_tokens": true}'],
     r"max_tokens must be an int in \[1, "),
    ("max_tokens missing", ['{"prompt_token_ids": [1]}'], r"line 2: needs 'max_tokens'"),
    ("prompt + max_tokens over the limit",
     ['{"prompt_token_ids": [1, 2], "max_tokens": 1048575}'],
     r"= 1048577 tokens, over the limit of MAX_REQUEST_TOKENS=1048576"),
    ("arrival_step -1", ['{"prompt_token_ids": [1], "max_tokens": 1, "arrival_step": -1}'],
     r"arrival_step must be an int in \[0, 1048576\], got -1"),
    ("arrival_step 10**12", ['{"prompt_token_ids": [1], "max_tokens": 1, "arrival_step": 1e12}'],
     r"arrival_step must be an int in \[0, 1048576\]"),
    ("arrival_step 'now'", ['{"prompt_token_ids": [1], "max_tokens": 1, "arrival_step": "now"}'],
     r"arrival_step must be an int in \[0, 1048576\], got 'now'"),
    ("output ids a bare str",
     ['{"prompt_token_ids": [1], "max_tokens": 2, "output_token_ids": "ab"}'],
     r"output_token_ids must be a JSON list of token ids"),
    ("output ids floats",
     ['{"prompt_token_ids": [1], "max_tokens": 2, "output_token_ids": [1.0, 2.0]}'],
     r"output_token_ids must hold token ids \(ints >= 0\)"),
    ("output ids wrong count",
     ['{"prompt_token_ids": [1], "max_tokens": 3, "output_token_ids": [1, 2]}'],
     r"2 output_token_ids for max_tokens=3"),
    ("request_id an object", ['{"request_id": {"x": 1}, "prompt_token_ids": [1], "max_tokens": 1}'],
     r"request_id must be a string \(or int\)"),
    ("request_id null", ['{"request_id": null, "prompt_token_ids": [1], "max_tokens": 1}'],
     r"request_id must be a string \(or int\)"),
    ("depends_on an int", ['{"prompt_token_ids": [1], "max_tokens": 1, "depends_on": 5}'],
     r"depends_on must be a request_id string or null"),
    ("depends_on unknown", ['{"prompt_token_ids": [1], "max_tokens": 1, "depends_on": "zz"}'],
     r"depends on unknown 'zz'"),
    ("duplicate request ids", [GOOD], r"duplicate request ids \['a'\]"),
    ("100,000-deep nesting", ["[" * 100_000 + "]" * 100_000],
     r"line 2: JSON nested too deeply \(allowed: one flat object per line\)"),
    ("line is a list", ["[1, 2]"], r"line 2: expected an object, got list"),
    ("not JSON", ["{oops"], r"line 2: not JSON"),
    ("text prompt without tokenize", ['{"prompt": "hi", "max_tokens": 1}'],
     r"line 2: has a text 'prompt' but no tokenize function"),
    ("no prompt at all", ['{"max_tokens": 1}'], r"needs 'prompt_token_ids' \(or 'prompt'"),
]  # fmt: skip


@pytest.mark.parametrize(("lines", "allowed"), [r[1:] for r in ROWS], ids=[r[0] for r in ROWS])
def test_bad_jsonl_gives_one_clear_error(tmp_path: Path, lines: list[str], allowed: str) -> None:
    good = tmp_path / "good.jsonl"
    good.write_text(GOOD + "\n")
    before = from_jsonl(good).requests
    path = tmp_path / "bad.jsonl"
    text = "\n".join(([GOOD] if lines and lines[0].strip() else []) + lines) + "\n"
    if not lines:
        text = ""
    path.write_text(text)
    with pytest.raises(ValueError, match=allowed):
        from_jsonl(path)
    assert path.read_text() == text
    assert from_jsonl(good).requests == before


def test_tokenize_must_give_token_ids() -> None:
    with pytest.raises(ValueError, match=r"line 1: tokenized prompt must hold token ids"):
        from_jsonl_lines(['{"prompt": "ab", "max_tokens": 1}'], tokenize=lambda s: list(s))
    with pytest.raises(ValueError, match=r"line 1: prompt must be a string"):
        from_jsonl_lines(['{"prompt": 5, "max_tokens": 1}'], tokenize=lambda s: [1])


def test_a_long_line_is_refused_with_the_limit(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(workload_io, "MAX_LINE_CHARS", 100)
    path = tmp_path / "long.jsonl"
    path.write_text('{"prompt_token_ids": [' + "1, " * 100 + '1], "max_tokens": 1}\n')
    with pytest.raises(ValueError, match=r"line 1: \d+ characters, over the limit of "
                                         r"MAX_LINE_CHARS=100"):  # fmt: skip
        from_jsonl(path)


def test_the_workload_limit_is_named() -> None:
    lines = ['{"prompt_token_ids": [1], "max_tokens": 10}'] * 3
    with pytest.raises(ValueError, match=r"line 2: the workload exceeds max_total_tokens"):
        from_jsonl_lines(lines, max_total_tokens=15)
    assert len(from_jsonl_lines(lines, max_total_tokens=33).requests) == 3
