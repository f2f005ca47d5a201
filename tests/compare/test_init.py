"""kvlab.compare's public API, and that it needs none of the optional packages to import."""

from __future__ import annotations

import subprocess
import sys

import kvlab.compare

BLOCK = (
    "import sys\n"
    "class _Block:\n"
    "    def find_spec(self, name, path=None, target=None):\n"
    "        if name.split('.')[0] in ('torch', 'rich', 'msgspec', 'zmq', 'ipywidgets'):\n"
    "            raise ImportError('blocked for this test: ' + name)\n"
    "sys.meta_path.insert(0, _Block())\n"
)


def test_all_names_resolve() -> None:
    assert [n for n in kvlab.compare.__all__ if not hasattr(kvlab.compare, n)] == []
    assert len(set(kvlab.compare.__all__)) == len(kvlab.compare.__all__)


def test_old_names_are_the_objects_of_the_packages_they_moved_to() -> None:
    """Code written against the old layout keeps working: the same objects, not copies."""
    import kvlab.kv_events
    import kvlab.nanovllm
    import kvlab.sglang

    moved = {name: pkg for pkg in (kvlab.nanovllm, kvlab.sglang, kvlab.kv_events)
             for name in pkg.__all__ if name in kvlab.compare.__all__}  # fmt: skip
    assert {"NanoBlockManager", "record_nano", "RadixCache", "TokenToKVPoolAllocator",
            "read_kv_event_file", "KVEventSubscriber", "encode_kv_event_batch"} <= set(moved)
    assert [n for n, pkg in moved.items() if getattr(kvlab.compare, n) is not getattr(pkg, n)] == []
    assert len(moved) == 38  # every cache / KV-event name kvlab.compare exported before the move


def test_import_and_compare_without_optional_packages() -> None:
    code = BLOCK + (
        "from kvlab.compare import compare, shared_system_prompt, encode_kv_event_batch\n"
        "from kvlab.core.kv_events import KVEventBatch\n"
        "c = compare(shared_system_prompt(3, 16, 4, 2), pool_tokens=128, block_size=4)\n"
        "print([s.hit_tokens for s in c.summaries()])\n"
        "try:\n"
        "    encode_kv_event_batch(KVEventBatch(0.0, []))\n"
        "except ImportError as e:\n"
        "    print(e)\n"
    )
    run = subprocess.run([sys.executable, "-c", code], check=False, capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    lines = run.stdout.splitlines()
    assert lines[0] == "[32, 32, 32]"
    assert "needs the optional package 'msgspec': pip install msgspec" in lines[1]
