"""Scenarios: defaults, the token-id and word mappings, and a clear message for each mistake."""

from __future__ import annotations

import zlib

import pytest

from kvlab.playground import DEFAULTS, LIMITS, ScenarioError, parse_scenario, run_scenario
from kvlab.playground.scenario import VOCAB_SIZE, token_ids, word_ids


def test_defaults_fill_an_empty_scenario() -> None:
    s = parse_scenario({})
    assert s.data == DEFAULTS and s.layers == ("full",) and s.requests == () and s.calls == ()


def test_token_ids_ranges_commas_and_text() -> None:
    assert token_ids("0..3, 7 9,10") == [0, 1, 2, 3, 7, 9, 10]
    assert token_ids("1 2 hello") == [1, 2, "hello"]  # left for kvlab.core to refuse
    with pytest.raises(ScenarioError, match=r"range '5\.\.2' must go up"):
        token_ids("5..2")


def test_word_ids_are_crc32_mod_vocab_and_cjk_characters_are_words() -> None:
    assert word_ids("The cat") == [zlib.crc32(b"The") % VOCAB_SIZE, zlib.crc32(b"cat") % VOCAB_SIZE]
    assert word_ids("今天 cat.") == [
        zlib.crc32(w.encode()) % VOCAB_SIZE for w in ("今", "天", "cat.")
    ]
    assert word_ids("a  b\n a") == [word_ids("a")[0], word_ids("b")[0], word_ids("a")[0]]


def test_words_mode_turns_prompts_into_word_ids() -> None:
    s = parse_scenario(
        {"text": "words", "requests": [{"id": "q", "prompt": "hello world", "output": "bye"}]}
    )
    assert s.requests[0].prompt == tuple(word_ids("hello world"))
    assert s.requests[0].output == tuple(word_ids("bye"))


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"num_gpu_blocks": 1}, "num_gpu_blocks must be an integer from 2 to 1024, got 1"),
        ({"num_gpu_blocks": "8"}, "num_gpu_blocks must be an integer from 2 to 1024, got '8'"),
        ({"colour": 1}, "unknown scenario key(s) ['colour']"),
        ({"driver": "vllm"}, "driver must be one of scheduler, calls, got 'vllm'"),
        ({"layers": []}, "layers must list 1 to 8 KV cache groups"),
        (
            {"layers": ["full", "wide"]},
            "a layer is \"full\" or a sliding window in tokens (an integer), got 'wide'",
        ),
        ({"enable_caching": "yes"}, "enable_caching must be true or false, got 'yes'"),
        (
            {"predict": ["all"]},
            "predict lists kinds from evict, fixed_point, hit, popleft, preempt, window, "
            "got ['all']",
        ),
        (
            {"requests": [{"id": "a b", "prompt": "1"}]},
            "a request id is 1 to 32 characters without spaces",
        ),
        ({"requests": [{"id": "a", "prompt": ""}]}, "request 'a' has an empty prompt"),
        ({"requests": [{"id": "a", "prompt": "1"}, {"id": "a", "prompt": "2"}]}, "repeated: a"),
        (
            {"requests": [{"id": "a", "prompt": "1", "colour": 2}]},
            "requests[0] has unknown key(s) ['colour']",
        ),
        (
            {"requests": [{"id": f"r{i}", "prompt": "1"} for i in range(65)]},
            "the scenario has 65 requests; the playground runs at most 64",
        ),
        (
            {"requests": [{"id": "a", "prompt": "0..2047", "max_tokens": 7000}]},
            "the requests hold 9048 tokens (prompts + max_tokens); the playground runs at most "
            "8192",
        ),
        (
            {"requests": [{"id": "a", "prompt": "1"}], "driver": "calls", "calls": "admit b"},
            "calls, line 1 ('admit b'): no request 'b'; requests are a",
        ),
        (
            {"driver": "calls", "calls": "# comment\nwarm up"},
            "calls, line 2 ('warm up'): unknown call 'warm'; calls are admit, prefill, decode, "
            "lookup, free, evict, reset",
        ),
        (
            {"requests": [{"id": "a", "prompt": "1"}], "driver": "calls", "calls": "decode a x"},
            "the number of decode steps must be an integer from 1 to 1000, got 'x'",
        ),
        ({"driver": "calls", "calls": "evict one"}, "write evict BLOCK_ID [BLOCK_ID ...]"),
    ],
)
def test_bad_values_get_a_message_naming_them(data, message) -> None:
    with pytest.raises(ScenarioError) as info:
        parse_scenario(data)
    assert message in str(info.value)


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"block_size": 0}, "block_size must be a positive int, got 0"),
        ({"layers": [0]}, "sliding_window must be a positive int, got 0"),
        ({"max_model_len": 0}, "max_model_len must be an int >= 1, got 0"),
        (
            {"hash": "md5"},
            "Unsupported hash function: 'md5'; allowed: sha256, sha256_cbor, xxhash, xxhash_cbor",
        ),
        (
            {"layers": [500]},
            "a sliding window of 500 tokens is longer than max_model_len (128 tokens); a window "
            "must be at most max_model_len",
        ),
        (
            {"requests": [{"id": "a", "prompt": "1 2 hello"}]},
            "request 'a': prompt_token_ids[2] is str 'hello'; allowed: token ids as plain "
            "Python ints",
        ),
        (
            {"requests": [{"id": "a", "prompt": "1", "max_tokens": 0}]},
            "request 'a': max_tokens must be an int >= 1, got 0",
        ),
    ],
)
def test_values_kvlab_core_checks_get_its_own_message(data, message) -> None:
    with pytest.raises((ValueError, TypeError)) as info:
        run_scenario(parse_scenario(data))
    assert str(info.value) == message


def test_limits_are_what_the_docs_say() -> None:
    assert LIMITS == {
        "num_gpu_blocks": 1024,
        "requests": 64,
        "prompt_tokens": 2048,
        "total_tokens": 8192,
        "calls": 256,
        "steps": 1000,
    }


def test_a_request_that_never_fits_stops_the_scheduler_with_a_note() -> None:
    result = run_scenario(
        parse_scenario(
            {
                "num_gpu_blocks": 4,
                "requests": [
                    {"id": "small", "prompt": "0..3", "max_tokens": 1},
                    {"id": "big", "prompt": "0..39", "max_tokens": 1},
                ],
            }
        )
    )
    assert result.notes == [
        "stopped at step 1: nothing could be scheduled; the waiting "
        "request(s) 'big' do not fit in the pool (3 free blocks)"
    ]


def test_a_refused_allocation_is_a_note_and_later_calls_run() -> None:
    result = run_scenario(
        parse_scenario(
            {
                "num_gpu_blocks": 3,
                "driver": "calls",
                "requests": [{"id": "a", "prompt": "0..7"}, {"id": "b", "prompt": "20..23"}],
                "calls": "admit a\nadmit b\nfree a\nadmit b",
            }
        )
    )
    assert result.notes == [
        "calls, line 2: allocate_slots for 'b' was refused (None): the free blocks do not cover it"
    ]
    assert result.manager.get_block_ids("b") == ([2],)


def test_none_hash_is_seeded_with_zero_whatever_the_environment(monkeypatch) -> None:
    data = {"requests": [{"id": "a", "prompt": "0..7"}], "driver": "calls", "calls": "admit a"}
    monkeypatch.setenv("PYTHONHASHSEED", "42")
    first = run_scenario(parse_scenario(data)).manager.block_pool.blocks[1].block_hash
    monkeypatch.delenv("PYTHONHASHSEED")
    assert run_scenario(parse_scenario(data)).manager.block_pool.blocks[1].block_hash == first
    import os

    assert "PYTHONHASHSEED" not in os.environ  # restored


def test_xxhash_where_the_package_is_missing_says_what_to_choose(monkeypatch) -> None:
    import builtins

    real_import = builtins.__import__

    def no_xxhash(name, *args, **kwargs):
        if name == "xxhash":
            raise ImportError("no xxhash")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_xxhash)
    with pytest.raises(ScenarioError, match="choose sha256 or sha256_cbor"):
        run_scenario(parse_scenario({"hash": "xxhash"}))
