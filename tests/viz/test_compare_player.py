"""ComparePlayer (kvlab.viz.compare_player): vLLM beside a radix tree, frames built from recorded runs."""

from __future__ import annotations

import pytest

pytest.importorskip("anywidget")

import traitlets  # noqa: E402

from kvlab.compare import compare, shared_system_prompt  # noqa: E402
from kvlab.viz import ComparePlayer  # noqa: E402
from kvlab.viz.assets import static_text  # noqa: E402
from kvlab.viz.compare_player import compare_frames  # noqa: E402


@pytest.fixture(scope="module")
def runs():
    return compare(shared_system_prompt(4, 30, 8, 4), pool_tokens=64, block_size=4,
                   policies=("vllm", "radix"), record=True)  # fmt: skip


def test_frames_hold_both_caches_and_what_differs(runs) -> None:
    frames = compare_frames(runs)
    assert [f["step"] for f in frames] == list(range(max(len(r.steps) for r in runs.runs.values())))
    assert all([p["policy"] for p in f["panels"]] == ["vllm", "radix"] for f in frames)
    assert frames[1]["notes"][0] == ("sys-1 admitted: hit tokens vllm 28, radix 30 (vLLM hits whole 4-token "
                                     "blocks only: the last 2 matching tokens sit in a partial block)")  # fmt: skip
    assert frames[5]["notes"][-1] == "evicted so far (tokens): vllm 16, radix 11"
    assert "free_block_queue" in frames[0]["panels"][0]["html"] and "radix tree" in frames[0]["panels"][1]["html"]
    assert "<script" not in "".join(p["html"] for f in frames for p in f["panels"])


def test_the_widget_syncs_frames_and_refuses_a_bad_index(runs) -> None:
    player = ComparePlayer(runs)
    assert player.trait_metadata("frames", "sync") and player._esm == static_text("compare_player.js")
    player.index = 3
    with pytest.raises(traitlets.TraitError, match=r"index must be in \[0, 9\), got 9"):
        player.index = 9
    assert player.index == 3 and repr(player) == "ComparePlayer(9 steps, index=3)"
    with pytest.raises(KeyError, match=r"policies \['nano-vllm'\] were not run"):
        ComparePlayer(runs, policies=("vllm", "nano-vllm"))
    zh = ComparePlayer(runs, lang="zh")
    assert zh.labels == {"prev": "上一步", "next": "下一步", "step": "步"}
    assert zh.frames[1]["notes"][0].startswith("sys-1 被接纳：命中 token 数 vllm 28, radix 30")


def test_the_player_steps_in_chromium_without_a_kernel(runs, tmp_path) -> None:
    """The widget's JavaScript with a stand-in for anywidget's model, from file://, offline."""
    import json

    from _browser import SKIP_REASON, browser_page

    if SKIP_REASON is not None:
        pytest.skip(SKIP_REASON)
    player = ComparePlayer(runs)
    # NOTE: Chromium refuses module imports from file://: the widget's code is inlined.
    code = static_text("compare_player.js").replace("export default { render };", "const player = { render };")
    state = json.dumps({"frames": player.frames, "index": 0, "labels": player.labels})
    page_path = tmp_path / "player.html"
    page_path.write_text(f"""<!doctype html><meta charset="utf-8"><div id="root"></div>
<script type="module">
{code}
const state = {state}, handlers = {{}};
const model = {{ get: (k) => state[k], set: (k, v) => {{ state[k] = v; (handlers["change:" + k] || []).forEach((f) => f()); }},
  save_changes: () => {{}}, on: (e, f) => (handlers[e] = (handlers[e] || []).concat([f])), off: () => {{}} }};
player.render({{ model, el: document.getElementById("root") }});
window.kvlabReady = true;
</script>""", encoding="utf-8")
    with browser_page() as (page, guard):
        page.goto(page_path.as_uri())
        page.wait_for_function("window.kvlabReady === true")
        caption = page.locator(".kvlab-cmp-caption")
        assert caption.inner_text() == "step 0 (1 / 9)"
        page.get_by_title("next step").click()
        assert caption.inner_text() == "step 1 (2 / 9)"
        assert "radix 30" in page.locator(".kvlab-cmp-notes").inner_text()
        assert page.locator('[data-policy="vllm"] pre').count() == 1
        page.locator(".kvlab-cmp").press("ArrowLeft")
        assert caption.inner_text() == "step 0 (1 / 9)"
        assert guard.blocked == []
