"""Lab radix_cache's report draws SGLang's tree beside the learner's, after the divergent call,
with the differing nodes marked (``≠`` on a red background); vLLM labs' reports are unchanged."""
from __future__ import annotations

import html
import re

import buggy_block_pool
import buggy_free_queue
from buggy_radix_cache import BUGS
from kvlab.labs import check
from kvlab.labs.radix_view import differing_paths, snapshot_from_state
from kvlab.labs.view import result_html

PANEL = "<div class='kvlab-radix-panel'>"


def _panels(report: str) -> list[list[tuple[str, bool]]]:
    """Each tree panel as (line's text, drawn on the red background) per line."""
    out = []
    for chunk in report.split(PANEL)[1:]:
        pre = chunk[: chunk.index("</pre>")]
        lines = pre.rstrip("\n").split("\n")
        red = "background-color: #fde2e1"
        out.append([(html.unescape(re.sub(r"<[^>]+>", "", line)), red in line) for line in lines])
    return out


def test_no_split_on_match_shows_the_split_sglang_made_and_the_learner_did_not() -> None:
    result = check("radix_cache", BUGS["no_split_on_match"], seed=0)
    div = result.divergence
    assert div.call == "match_prefix([3, 1, 2, 3, 1, 1, 3])"
    assert differing_paths(div.want_state, div.got_state) == {(3, 1), (3, 1, 3)}
    sglang, yours = _panels(result_html(result))
    assert sglang == [
        ("SGLang 0.5.23 (kvlab.sglang), at the divergence", False),
        ("root", False),
        ("└── #1 [3] 1 tok · lock 0 · t=13", False),
        ("    ├── #5 [1] 1 tok · lock 0 · t=13 ≠", True),  # the node the split made
        ("    │   └── #2 [3] 1 tok · lock 0 · t=13 · evict #2 ≠", True),  # lower half
        ("    └── #3 [3 2] 2 tok · lock 0 · t=12", False),
        ("        └── #4 [3 0] 2 tok · lock 0 · t=12 · evict #1", False),
    ]
    assert yours == [
        ("yours, after the same call", False),
        ("root", False),
        ("└── #1 [3] 1 tok · lock 0 · t=13", False),
        ("    ├── #2 [1 3] 2 tok · lock 0 · t=13 · evict #2 ≠", True),  # left whole
        ("    └── #3 [3 2] 2 tok · lock 0 · t=12", False),
        ("        └── #4 [3 0] 2 tok · lock 0 · t=12 · evict #1", False),
    ]


def test_ignores_lock_ref_shows_the_locked_leaf_the_learner_evicted() -> None:
    result = check("radix_cache", BUGS["ignores_lock_ref"], seed=0)
    assert result.divergence.call == "evict(1)"
    sglang, yours = _panels(result_html(result))
    assert sglang[2:] == [
        ("└── #1 [3] 1 tok · lock 2 · t=27", False),
        ("    └── #5 [1] 1 tok · lock 1 · t=21 ≠", True),  # locked: SGLang keeps it
    ]
    assert yours[2:] == [
        ("└── #1 [3] 1 tok · lock 2 · t=27", False),
        ("    └── #8 [0 3 3 0] 4 tok · lock 0 · t=26 · evict #1 ≠", True),
    ]


def test_the_chinese_report_has_translated_titles_and_legend() -> None:
    zh = result_html(check("radix_cache", BUGS["ignores_lock_ref"], seed=0, lang="zh"))
    sglang, yours = _panels(zh)
    assert sglang[0][0] == "SGLang 0.5.23 (kvlab.sglang)，停在分歧处"
    assert yours[0][0] == "你的，执行同一个调用之后"
    assert "≠：另一棵树中没有从根到此处 token 相同的节点" in zh


def test_the_trees_come_back_from_the_flat_listing() -> None:
    state = {"tree": [[[1], [5]], [[1, 2, 3], [6, 7]], [[1, 4], [8]], [[2, 2], [9, 10]]],
             "node_id": [3, 4, 7, 1], "lock_ref": [1, 0, 1, 0], "last_access_time": [5, 2, 5, 4],
             "free slots": [0, 1]}  # fmt: skip
    snap = snapshot_from_state(state)
    assert snap.root_children == (3, 1) and snap.nodes[3].children == (4, 7)
    assert [(n.node_id, n.parent_id, n.key, n.value) for n in snap.nodes.values()] == [
        (3, 0, (1,), (5,)), (4, 3, (2, 3), (6, 7)), (7, 3, (4,), (8,)), (1, 0, (2, 2), (9, 10))]
    assert snap.eviction_order() == [4, 1] and snap.free_slots == (0, 1)
    # node ids that cannot key a tree (repeated, or the root's 0) are replaced by positions
    assert list(snapshot_from_state({**state, "node_id": [2, 2, 0, 5]}).nodes) == [1, 2, 3, 4]
    # a state the learner left unreadable is not drawn
    assert snapshot_from_state({**state, "lock_ref": ["x", 0, 1, 0]}) is None
    assert snapshot_from_state({**state, "lock_ref": [0]}) is None
    assert snapshot_from_state({"tree": []}) is None


def test_vllm_labs_reports_draw_no_tree() -> None:
    """Only the radix lab's states hold a tree: a vLLM lab's report is its field table alone."""
    for result in (check("free_queue", buggy_free_queue.AppendAtHead, seed=7),
                   check("free_queue", buggy_free_queue.AppendAtHead, seed=7, lang="zh"),
                   check("block_pool", buggy_block_pool.EagerEviction, seed=0)):  # fmt: skip
        page = result_html(result)
        assert "<table class='kvlab-divergence'>" in page and page.endswith("</div>")
        assert PANEL not in page and "≠" not in page
