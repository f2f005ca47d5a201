"""benchmarks/side_by_side*.py on small synthetic vLLM/kvlab pairs and trees (no vLLM needed)."""
from __future__ import annotations

import ast
import json
import sys
import textwrap
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
import side_by_side  # noqa: E402
from side_by_side_ast import FunctionSource, compare, function_steps, guard_prefixes  # noqa: E402


def _norm(source: str, hooks: bool):
    source = textwrap.dedent(source)
    tree = ast.parse(source)
    func = next(n for n in tree.body if isinstance(n, ast.FunctionDef))
    src = FunctionSource(source)
    norm = function_steps(func, src.lines, hooks=hooks, guards=guard_prefixes(tree))
    return func, src, norm


def side_by_side_pair(vllm: str, kvlab: str, **kw):
    """(loose comparison, strict comparison, vLLM body lines, kvlab body lines) of two sources."""
    vfunc, vsrc, vnorm = _norm(vllm, hooks=False)
    kfunc, ksrc, knorm = _norm(kvlab, hooks=True)
    return (compare(vnorm.steps, knorm.steps, **kw),
            compare(vnorm.steps, knorm.steps, strict=True, **kw),
            vsrc.body_lines(vfunc, vnorm), ksrc.body_lines(kfunc, knorm))


VLLM_TOUCH = '''
def touch(self, blocks):
    """Touch the blocks."""
    for block in blocks:
        # ref_cnt=0 means the block is free.
        if block.ref_cnt == 0 and not block.is_null:
            self.free_block_queue.remove(block)

        block.ref_cnt += 1
'''


def test_recorder_lines_are_stripped_from_sequence_and_line_count():
    kvlab = '''
    def touch(self, blocks):
        """Mirrors: vllm/v1/core/block_pool.py::BlockPool.touch."""
        rec = self.recorder
        for block in blocks:
            if block.ref_cnt == 0 and not block.is_null:
                self.free_block_queue.remove(block)
                if rec is not None:
                    rec.remove(block.block_id)
            block.ref_cnt += 1
            if self.recorder is not None and block.ref_cnt == 1:
                self.recorder.events.touch(
                    block.block_id,
                )
    '''
    loose, strict, vlines, klines = side_by_side_pair(VLLM_TOUCH, kvlab)
    assert (loose.equal, strict.equal) == (True, True)
    assert (vlines, klines) == (4, 4)
    _, _, norm = _norm(kvlab, hooks=True)
    assert norm.stripped == [(4, 4), (8, 9), (11, 14)]


def test_recorder_attributes_and_walrus_tests_are_recorder_lines():
    vllm = "def __init__(self, n):\n    self.n = n\n"
    kvlab = '''
    def __init__(self, n, recorder=None):
        self.n = n
        self.recorder = recorder
        if (rec := self.recorder) is not None:
            rec.created(n)
    '''
    loose, strict, vlines, klines = side_by_side_pair(vllm, kvlab)
    assert (loose.equal, strict.equal, vlines, klines) == (True, True, 1, 1)


@pytest.mark.parametrize("body", [
    "if rec is not None:\n        rec.touch(1)\n        self.x = 1",   # assigns state
    "if rec is not None:\n        rec.touch(1)\n    else:\n        self.x = 2",  # has an else
    "if block is not None:\n        block.touch(1)",  # not a recorder
    "if rec is None:\n        rec.touch(1)",  # not the "is not None" test
])
def test_statements_that_only_look_like_recorder_lines_stay(body):
    kvlab = f"def f(self, block, rec):\n    {body}\n"
    _, _, norm = _norm(kvlab, hooks=True)
    assert norm.stripped == []
    assert norm.steps[0].loose == "If"


@pytest.mark.parametrize("guard", [
    "guard_touch(self, blocks)",
    "self._guard_touch(blocks)",
    "self.guard.touch(blocks)",
    "guards.check_touch(self, blocks)",
    "check_touch(self, blocks)",
])
def test_the_guard_on_the_first_line_is_stripped(guard):
    kvlab = f'''
    from kvlab.core import guards
    from kvlab.core.kv_cache_guards import check_touch

    def touch(self, blocks):
        """Doc."""
        {guard}
        for block in blocks:
            if block.ref_cnt == 0 and not block.is_null:
                self.free_block_queue.remove(block)
            block.ref_cnt += 1
    '''
    loose, strict, vlines, klines = side_by_side_pair(VLLM_TOUCH, kvlab)
    assert (loose.equal, strict.equal, klines) == (True, True, 4)
    assert _norm(kvlab, hooks=True)[2].guard == guard.split("(")[0]


def test_a_guard_may_hand_back_the_parameters_it_checked_but_nothing_else():
    vllm = '''
    def free_blocks(self, ordered_blocks):
        blocks_list = list(ordered_blocks)
        for block in blocks_list:
            block.ref_cnt -= 1
    '''
    kvlab = '''
    def free_blocks(self, ordered_blocks):
        ordered_blocks = guard_free_blocks(self, ordered_blocks)
        blocks_list = list(ordered_blocks)
        for block in blocks_list:
            block.ref_cnt -= 1
    '''
    loose, strict, _, klines = side_by_side_pair(vllm, kvlab)
    assert (loose.equal, strict.equal, klines) == (True, True, 3)
    local = kvlab.replace("ordered_blocks = guard_free_blocks", "checked = guard_free_blocks")
    loose = side_by_side_pair(vllm, local)[0]
    assert loose.first_diff == ("kvlab adds kvlab L3 "
                                "`checked = guard_free_blocks(self, ordered_blocks)`")


def test_a_recorder_block_may_pass_the_recorder_on():
    vllm = "def __init__(self, n):\n    self.n = n\n"
    kvlab = '''
    def __init__(self, n, recorder=None):
        self.n = n
        if recorder is not None:
            self.set_recorder(recorder)
    '''
    assert side_by_side_pair(vllm, kvlab)[1].equal
    other = kvlab.replace("self.set_recorder(recorder)", "self.set_size(n)")
    assert side_by_side_pair(vllm, other)[0].first_diff == (
        "kvlab adds kvlab L4 `if recorder is not None:`")


def test_a_check_call_or_a_guard_after_the_first_line_is_not_a_guard():
    kvlab = '''
    def touch(self, blocks):
        check_blocks(blocks)
        for block in blocks:
            guard_block(block)
            if block.ref_cnt == 0 and not block.is_null:
                self.free_block_queue.remove(block)
            block.ref_cnt += 1
    '''
    loose, _, _, klines = side_by_side_pair(VLLM_TOUCH, kvlab)
    assert loose.first_diff == "kvlab adds kvlab L3 `check_blocks(blocks)`"
    assert klines == 6
    kvlab = kvlab.replace("        check_blocks(blocks)\n", "")
    loose = side_by_side_pair(VLLM_TOUCH, kvlab)[0]
    assert loose.first_diff == "kvlab adds kvlab L4 `guard_block(block)`"
    guarded = "def touch(self, blocks):\n    self.guarded_blocks.extend(blocks)\n"
    assert _norm(guarded, hooks=True)[2].steps[0].loose == "Call extend"


def test_reordering_is_detected_at_the_first_moved_statement():
    vllm = '''
    def free(self, request_id):
        req_blocks = self.req_to_blocks.pop(request_id, [])
        ordered_blocks = reversed(req_blocks)
        self.block_pool.free_blocks(ordered_blocks)
        self.num_cached_block.pop(request_id, None)
    '''
    kvlab = '''
    def free(self, request_id):
        req_blocks = self.req_to_blocks.pop(request_id, [])
        self.num_cached_block.pop(request_id, None)
        ordered_blocks = reversed(req_blocks)
        self.block_pool.free_blocks(ordered_blocks)
    '''
    loose, strict, _, _ = side_by_side_pair(vllm, kvlab)
    assert not loose.equal and not strict.equal
    assert loose.first_diff == "kvlab adds kvlab L4 `self.num_cached_block.pop(request_id, None)`"


def test_a_statement_moved_out_of_its_loop_is_detected():
    kvlab = '''
    def touch(self, blocks):
        for block in blocks:
            if block.ref_cnt == 0 and not block.is_null:
                self.free_block_queue.remove(block)
        block.ref_cnt += 1
    '''
    loose = side_by_side_pair(VLLM_TOUCH, kvlab)[0]
    assert loose.first_diff == "kvlab lacks vLLM L9 `block.ref_cnt += 1`"  # kvlab's loop ends there


def test_a_renamed_assigned_local_differs_in_both_forms():
    vllm = "def f(self):\n    num_blocks = self.n\n    return num_blocks\n"
    kvlab = "def f(self):\n    n_blocks = self.n\n    return n_blocks\n"
    loose, strict, _, _ = side_by_side_pair(vllm, kvlab)
    assert loose.first_diff == "vLLM L2 `num_blocks = self.n` vs kvlab L2 `n_blocks = self.n`"
    assert not strict.equal


def test_a_renamed_loop_variable_or_call_differs_only_in_the_strict_form():
    vllm = "def f(self):\n    for mgr in self.managers:\n        mgr.new_step_starts()\n"
    for kvlab in (
        "def f(self):\n    for manager in self.managers:\n        manager.new_step_starts()\n",
        "def f(self):\n    for mgr in list(self.managers):\n        mgr.new_step_starts()\n",
    ):
        loose, strict, _, _ = side_by_side_pair(vllm, kvlab)
        assert loose.equal and not strict.equal
        assert strict.first_diff.startswith("vLLM L2 `for mgr in self.managers:` vs kvlab L2 `for ")


def test_annotations_pass_and_ellipsis_do_not_count_as_steps():
    vllm = "def f(self):\n    blocks: list[int] = []\n    pass\n    return blocks\n"
    kvlab = "def f(self):\n    blocks = []\n    return blocks\n"
    assert side_by_side_pair(vllm, kvlab)[1].equal
    assert side_by_side_pair("def f(self):\n    ...\n", 'def f(self):\n    """Doc."""\n')[0].equal


VLLM_POPLEFT_N = '''
def popleft_n(self, n):
    assert self.num_free_blocks >= n
    self.num_free_blocks -= n
    return self.take(n)
'''


def test_a_vllm_assert_moved_into_the_guard_matches_only_with_a_note_naming_the_guard():
    kvlab = '''
    def popleft_n(self, n):
        guard_popleft_n(self, n)
        # NOTE: vLLM asserts n <= num_free_blocks here; kvlab's guard raises
        # ValueError instead (nothing changed).
        self.num_free_blocks -= n
        return self.take(n)
    '''
    loose, strict, vlines, klines = side_by_side_pair(VLLM_POPLEFT_N, kvlab, drop_asserts=True)
    got = (loose.equal, strict.equal, loose.asserts_dropped, vlines, klines)
    assert got == (True, True, 1, 3, 2)
    plain = side_by_side_pair(VLLM_POPLEFT_N, kvlab)[0]
    assert plain.first_diff == "kvlab lacks vLLM L3 `assert self.num_free_blocks >= n`"
    decrement = "        self.num_free_blocks -= n\n"
    kept = kvlab.replace(decrement, "        assert self.num_free_blocks >= n\n" + decrement)
    loose = side_by_side_pair(VLLM_POPLEFT_N, kept, drop_asserts=True)[0]
    assert (loose.equal, loose.asserts_dropped) == (True, 0)


def test_notes_run_on_over_their_comment_lines():
    source = textwrap.dedent('''
    def f(self):
        # NOTE: vLLM has one pass;
        # kvlab two.
        x = 1  # NOTE(kvlab): trailing

        # unrelated
        return x
    ''')
    func = ast.parse(source).body[0]
    assert FunctionSource(source).notes(func) == ["NOTE: vLLM has one pass; kvlab two.",
                                                  "NOTE(kvlab): trailing"]


# A tiny vLLM tree and a kvlab-like tree that re-exports, inherits and calls a kvlab-only helper.
VLLM_POOL = '''
class BlockPool:
    def get_num_free_blocks(self):
        return self.free_block_queue.num_free_blocks

    def touch(self, blocks):
        for block in blocks:
            block.ref_cnt += 1

    def take_events(self):
        events = self.kv_event_queue
        self.kv_event_queue = []
        return events

    def reset_prefix_cache(self):
        return True


def hash_block_tokens(parent, tokens):
    return hash((parent, tokens))
'''

KVLAB_FILES = {
    "kvpkg/__init__.py": "",
    "kvpkg/core/__init__.py": "",
    "kvpkg/core/block_pool.py": '''
        """The pool. reset_prefix_cache is left out: kvpkg never resets."""
        from kvpkg.core.pool_impl import BlockPool
        from .hashing import hash_block_tokens as _hash
        hash_block_tokens = _hash
    ''',
    "kvpkg/core/pool_base.py": '''
        class PoolBase:
            def get_num_free_blocks(self):
                return self.free_block_queue.num_free_blocks
    ''',
    "kvpkg/core/pool_impl.py": '''
        from kvpkg.core import pool_helpers as helpers
        from kvpkg.core.pool_base import PoolBase

        class BlockPool(PoolBase):
            def touch(self, blocks):
                guard_touch(blocks)
                for block in blocks:
                    block.ref_cnt += 1
                    if self.recorder is not None:
                        self.recorder.touch(block)

            def take_events(self):
                events = helpers.drain(self)
                return events
    ''',
    "kvpkg/core/pool_helpers.py": '''
        from kvpkg.core.queue_ops import swap

        def drain(pool):
            return swap(pool)
    ''',
    "kvpkg/core/queue_ops.py": "def swap(pool):\n    return pool.kv_event_queue\n",
    "kvpkg/core/hashing.py": ("def hash_block_tokens(parent, tokens):\n"
                              "    return hash((parent, tokens))\n"),
}


@pytest.fixture
def trees(tmp_path):
    vllm_dir = tmp_path / "vllm" / "v1" / "core"
    vllm_dir.mkdir(parents=True)
    (vllm_dir / "block_pool.py").write_text(VLLM_POOL)
    for name, text in KVLAB_FILES.items():
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))
    return vllm_dir, tmp_path / "kvpkg" / "core"


def test_resolution_follows_imports_bases_and_kvlab_only_helpers(trees):
    rows, missing = side_by_side.build(*trees, files=("block_pool.py",))
    got = {r.name: (r.status, r.kvlab_file, r.files, r.helpers) for r in rows}
    assert got == {
        "BlockPool.get_num_free_blocks": ("yes", "kvpkg/core/pool_base.py", [
            "kvpkg/core/block_pool.py", "kvpkg/core/pool_impl.py", "kvpkg/core/pool_base.py"], []),
        "BlockPool.touch": ("yes", "kvpkg/core/pool_impl.py", [
            "kvpkg/core/block_pool.py", "kvpkg/core/pool_impl.py"], []),
        "BlockPool.take_events": ("no", "kvpkg/core/pool_impl.py", [
            "kvpkg/core/block_pool.py", "kvpkg/core/pool_impl.py", "kvpkg/core/pool_helpers.py",
            "kvpkg/core/queue_ops.py"],
            ["drain (kvpkg/core/pool_helpers.py:4)", "swap (kvpkg/core/queue_ops.py:1)"]),
        "hash_block_tokens": ("yes", "kvpkg/core/hashing.py", [
            "kvpkg/core/block_pool.py", "kvpkg/core/hashing.py"], []),
    }
    touch = next(r for r in rows if r.name == "BlockPool.touch")
    got = (touch.guard, touch.hook_lines, touch.vllm_lines, touch.kvlab_lines)
    assert got == ("guard_touch", 3, 2, 2)
    assert [(m.name, m.reason) for m in missing] == [
        ("BlockPool.reset_prefix_cache",
         "The pool. reset_prefix_cache is left out: kvpkg never resets.")]


def test_main_prints_the_table_and_json_and_check_fails_on_a_difference(trees, capsys):
    vllm_dir, kvlab_dir = trees
    argv = ["--vllm", str(vllm_dir), "--kvlab", str(kvlab_dir), "--files", "block_pool.py"]
    assert side_by_side.main(argv) == 0
    out = capsys.readouterr().out
    assert ("4 mirrored functions: 3 match vLLM's statement sequence, 0 differ with a NOTE, "
            "1 differ without one") in out
    assert ("| `BlockPool.take_events` | block_pool.py | 3 | 2 | 4 | no: kvlab lacks vLLM L12 "
            "`self.kv_event_queue = []` | no |") in out
    assert side_by_side.main([*argv, "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert [m["name"] for m in data["not_mirrored"]] == ["BlockPool.reset_prefix_cache"]
    assert side_by_side.main([*argv, "--check"]) == 1
    assert "block_pool.py::BlockPool.take_events: kvlab lacks vLLM L12" in capsys.readouterr().err
    impl = kvlab_dir / "pool_impl.py"
    impl.write_text(impl.read_text().replace(
        "events = helpers.drain(self)",
        "# NOTE: kvlab drains through a helper (vLLM swaps in place)\n"
        "        events = helpers.drain(self)"))
    assert side_by_side.main([*argv, "--check"]) == 0
