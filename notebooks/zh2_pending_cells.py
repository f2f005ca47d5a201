"""Issue 21 (zh2): the notebook cells that need executing, prepared for whoever re-executes.

Run once from the repository root, then execute the five notebooks and delete this file:

    .venv/bin/python notebooks/zh2_pending_cells.py
    .venv/bin/python tests/notebooks/run_notebooks.py 01 04 07 08 12 zh/01 zh/04 zh/07 zh/08 zh/12

It inserts five asserting sections into the English notebooks (each after a named cell), syncs
the Chinese notebooks (tests/notebooks/zh_sync.py), writes the Chinese text of the new markdown
cells and marks them translated, and points the errata (rows 15, 16, 18) and the seed map
(000 §4.3, 003 Q24, 003's closing remarks) at the new sections, with the seed-map test's keys.
It also corrects the note notebook 12 §6 blames (markdown only, en + zh).

| notebook | after cell | new section | backs |
|---|---|---|---|
| 01 | c03 | ## What a decode step reads | seed map: 003 "kvcache的特点" |
| 04 | c15n | ### Sampling parameters are not in the hash | seed map: 003 Q24 |
| 07 | 8db34368 | ### Groups follow the attention type, not the number format | errata 16 |
| 07 | c06 | ### The study notes' worked example: H0✓ H1✓ H2✓ H3✗ | errata 15, seed map 000 §4.3 |
| 08 | c07h | ### Chunked prefill adds no KV capacity | errata 18 |

Every code cell here was run against kvlab with the notebook's earlier cells (the whole
notebook, in order) before it was written down.
"""

from __future__ import annotations

import sys
from pathlib import Path

import nbformat

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "notebooks"))
from zh_sync import mark_translated, sync  # noqa: E402

# (notebook, insert after cell id, [(id, kind, English source, Chinese source for markdown)])
CELLS = [
    ("01_why_paged_kv", "c03", [
        ("zh2n01a", "markdown", """\
## What a decode step reads

Paging decides where a request's K and V live, not how much of them a decode step reads: to
produce one token, every layer's attention reads the K and V of every earlier token of the
request, through its block-table row (notebook 9 reads them back that way). So the bytes a
decode step reads grow with the context:""", """\
## 一次解码步读多少

分页决定的是一个请求的 K 和 V 放在哪里，而不是一次解码步要读多少：为了生成一个 token，每一层的注意力都要经由这个请求的块表行，
读出它之前每一个 token 的 K 和 V（第 9 个笔记本就是这样把它们读回来的）。所以一次解码步读取的字节数随上下文增长："""),
        ("zh2n01b", "code", """\
for context in (1_024, 4_096, 16_384):
    num_blocks_read = -(-context // smol.block_size)                  # the request's block-table row
    read = num_blocks_read * smol.page_size_bytes * num_layers
    print(f"{context:>6,} tokens of context: {num_blocks_read:>5,} blocks, "
          f"{read / 2**20:>5.0f} MiB read per decode step")
    assert read == context * bytes_per_token                          # whole blocks: paged == contiguous
assert 16_384 * bytes_per_token == 720 * 2**20""", None),
        ("zh2n01c", "markdown", """\
One output token of a 16,384-token request reads 720 MiB of K/V in float32, exactly what a
contiguous cache would read: a study note's remark that the KV cache does not shrink what a
decode step reads (note `003`, "kvcache的特点") holds for vLLM. What paging changes is
allocation: less memory reserved and wasted, more requests at once (below), and prefixes shared
between requests (notebook 4).""", """\
一个 16,384 token 的请求每生成一个 token，要读 720 MiB 的 K/V（float32），和连续存放的缓存读的一样多：学习笔记说 KV 缓存并不减少
一次解码步要读的数据量（学习笔记 `003`，「kvcache的特点」），这一点对 vLLM 成立。分页改变的是分配：预留和浪费的显存更少，
同时容纳的请求更多（见下文），请求之间还能共享前缀（第 4 个笔记本）。"""),
    ]),
    ("04_block_hashes_and_prefix_caching", "c15n", [
        ("zh2n04a", "markdown", """\
### Sampling parameters are not in the hash

What a block hash covers is the table above: the tokens and the extra keys
(`get_request_block_hasher` reads nothing else). Sampling parameters (temperature, top-p,
top-k, the number of tokens to generate) decide which token comes next, not the K and V of the
tokens already there, so two requests with the same prompt share its full blocks whatever they
sample with. kvlab's `SamplingParams` keeps only what the KV-cache code reads (`max_tokens`,
`prompt_logprobs`, `extra_args`); here one request is greedy for one token, the other samples
256 tokens with its own settings:""", """\
### 采样参数不参与哈希

块哈希涵盖的就是上表列出的内容：token 和额外键（`get_request_block_hasher` 不读别的）。采样参数（temperature、top-p、top-k、
要生成的 token 数）决定的是下一个 token 选什么，而不是已有 token 的 K 和 V，所以提示词相同的两个请求，不管怎么采样，都共享
提示词的满块。kvlab 的 `SamplingParams` 只保留 KV 缓存代码会读的字段（`max_tokens`、`prompt_logprobs`、`extra_args`）；
下面一个请求贪心地只生成一个 token，另一个按自己的设置采样 256 个 token："""),
        ("zh2n04b", "code", """\
greedy = Request("greedy", prompt[:12] + [7], SamplingParams(max_tokens=1), None, block_hasher=hasher)
sampled = Request("sampled", prompt[:12] + [7],
                  SamplingParams(max_tokens=256, extra_args={"temperature": 0.8, "top_p": 0.95}), None,
                  block_hasher=hasher)
print("same block hashes:", greedy.block_hashes == sampled.block_hashes == a.block_hashes)
assert greedy.block_hashes == sampled.block_hashes == a.block_hashes   # 3 full blocks, a's hashes
assert lookup(greedy) == lookup(sampled) == (12, [1, 2, 3])""", None),
        ("zh2n04c", "markdown", """\
Both hit a's 12 tokens. The one sampling parameter that changes a lookup is `prompt_logprobs`:
a request that asks for the log-probabilities of its prompt tokens must compute all of them, so
it skips the prefix cache (notebook 13).""", """\
两者都命中了 a 的 12 个 token。唯一会改变查找结果的采样参数是 `prompt_logprobs`：要求返回提示词 token 对数概率的请求必须把它们
全部算一遍，所以会跳过前缀缓存（第 13 个笔记本）。"""),
    ]),
    ("07_hybrid_models_fixed_point", "8db34368", [
        ("zh2n07c", "markdown", """\
### Groups follow the attention type, not the number format

A group is a set of layers that share one block table, so what decides the grouping is which
tokens a layer's attention needs, not its dtype or its head count. Two full-attention layers in
different dtypes with different head counts make one group (`UniformTypeKVCacheSpecs`: the same
tokens in the same blocks, each layer with its own page size); a full-attention layer and a
sliding-window layer in the same dtype make two:""", """\
### 分组看注意力类型，不看数值格式

一个组就是共用同一张块表的一组层，所以决定分组的是一层的注意力需要哪些 token，而不是它的 dtype 或头数。两个 dtype 不同、
头数也不同的全注意力层合成一个组（`UniformTypeKVCacheSpecs`：相同的 token 放在相同的块里，每层保留自己的页大小）；
dtype 相同的一个全注意力层和一个滑动窗口层则分成两个组："""),
        ("zh2n07d", "code", """\
mixed_precision = {
    "layers.0": FullAttentionSpec(block_size=4, num_kv_heads=2, head_size=8, dtype="bfloat16"),
    "layers.1": FullAttentionSpec(block_size=4, num_kv_heads=4, head_size=8, dtype="float32"),
}
by_type = {"layers.0": full(), "layers.1": window(8)}
grouping = {name: get_kv_cache_groups(VllmConfig(max_model_len=256), dict(layers))
            for name, layers in (("mixed precision", mixed_precision), ("full + window", by_type))}
for name, found in grouping.items():
    print(f"{name:<16}", [(type(g.kv_cache_spec).__name__, g.layer_names) for g in found])
assert [type(g.kv_cache_spec).__name__ for g in grouping["mixed precision"]] == ["UniformTypeKVCacheSpecs"]
assert [type(g.kv_cache_spec).__name__ for g in grouping["full + window"]] == ["FullAttentionSpec", "SlidingWindowSpec"]""",
         None),
    ]),
    ("07_hybrid_models_fixed_point", "c06", [
        ("zh2n07e", "markdown", """\
### The study notes' worked example: H0✓ H1✓ H2✓ H3✗

A study note kvlab was built from (`000`, "4.3 HybridKVCacheCoordinator") walks through this
search on a small example: 4-token blocks; full attention finds H0, H1 and H2 and misses H3 (12
tokens); the sliding window, which needs the 2 blocks before the hit end, finds H2 and H1 right
to left. The note concludes "hit_length = 8 tokens", a second round at 8, and the sliding-window
result `[NULL, NULL, Block 1, Block 2]`. Here it is: one full-attention layer, one window-8
layer (`cdiv(8 - 1, 4) = 2` blocks before the end), a request whose 3 full blocks are cached,
and one that shares them and then differs:""", """\
### 学习笔记中推演的例子：H0✓ H1✓ H2✓ H3✗

kvlab 据以实现的一篇学习笔记（`000`，「4.3 HybridKVCacheCoordinator」）用一个小例子推演了这个查找：块大小 4；全注意力找到 H0、H1、H2，
在 H3 未命中（12 个 token）；滑动窗口需要命中终点之前的 2 个块，从右往左找到 H2 和 H1。学习笔记的结论是“hit_length = 8 tokens”，
接着在 8 处再来一轮，滑动窗口的结果是 `[NULL, NULL, Block 1, Block 2]`。下面实际运行它：一个全注意力层、一个窗口为 8 的层
（命中终点之前需要 `cdiv(8 - 1, 4) = 2` 个块），一个 3 个满块都已缓存的请求，以及一个与它共享这些块、之后不同的请求："""),
        ("zh2n07f", "code", """\
note_hybrid, note_recorder = build([(["full"], full()), (["window"], window(8))])
a = make("a", list(range(13)))                            # 3 full blocks: H0 H1 H2
note_hybrid.allocate_slots(a, 13)
note_hybrid.free(a)
b = make("b", list(range(12)) + [50, 51, 52, 53, 54])     # H0 H1 H2 as a, then an H3 never cached
blocks, num_hit = note_hybrid.get_computed_blocks(b)
note_trace = note_recorder.trace()
note_rows = fixed_point_rows(note_trace, note_trace.calls("get_computed_blocks")[-1])
for row in note_rows:
    print(f"iteration {row.iteration}  groups {row.kv_cache_group_ids}: {row.hit_length_in:>2} -> {row.hit_length_out:>2}")
print("hit:", num_hit, "tokens, blocks per group:", blocks.get_block_ids())
assert num_hit == 12 and blocks.get_block_ids() == ([1, 2, 3], [0, 6, 7])   # [null_block, Block 1, Block 2]
assert [(r.iteration, r.hit_length_in, r.hit_length_out) for r in note_rows] == [(0, 16, 12), (0, 12, 12)]""",
         None),
        ("zh2n07g", "markdown", """\
12 tokens, not 8. The sliding window's search ends at H2 and needs the 2 blocks before that end,
H1 and H2: both are cached, so the window accepts all 12 tokens it is given and returns
`[null_block, Block 1, Block 2]` (block 0 is out of every later token's window). Nobody shortens
the candidate, so there is no second round. The note's own result list, four entries, would be
16 tokens and contradicts its 8 (the errata page lists the point).""", """\
是 12 个 token，不是 8 个。滑动窗口的查找止于 H2，需要它之前的 2 个块，即 H1 和 H2：两者都已缓存，所以窗口接受给它的全部 12 个 token，
返回 `[null_block, Block 1, Block 2]`（块 0 在之后每个 token 的窗口之外）。没有哪个组缩短候选长度，所以没有第二轮。学习笔记自己
给出的结果列表有四项，对应 16 个 token，与它说的 8 自相矛盾（笔记勘误页列出了这一条）。"""),
    ]),
    ("08_the_scheduler", "c07h", [
        ("zh2n08a", "markdown", """\
### Chunked prefill adds no KV capacity

The token budget (`max_num_batched_tokens`) decides how much of a prompt is computed per step;
the blocks a request holds are those of its sequence however it was computed, and the gate
admits a request only when its whole prompt fits. Four requests of 24 prompt tokens and 8 output
tokens (6 blocks at admission, 8 at the end) on this notebook's 19 usable blocks, with a budget
that computes a prompt in one step and with two chunked ones:""", """\
### 分块预填充不增加 KV 容量

token 预算（`max_num_batched_tokens`）决定的是每一步算多少提示词；请求持有的块就是它整个序列的块，与怎么算无关，而准入闸门
只在整个提示词放得下时才接纳请求。四个请求，各有 24 个提示词 token、8 个输出 token（接纳时 6 个块，结束时 8 个块），跑在本笔记本
19 个可用块的块池上，一次用一步就能算完提示词的预算，另外两次用分块的预算："""),
        ("zh2n08b", "code", """\
def run_budget(max_num_batched_tokens):
    \"\"\"Four 24-token requests (8 output tokens) on a fresh 20-block pool: (peak running, preempted, steps).\"\"\"
    pool = KVCacheManager(config, max_model_len=128, hash_block_size=BLOCK_SIZE)
    s = Scheduler(pool, SchedulerConfig(max_num_seqs=8, max_num_batched_tokens=max_num_batched_tokens,
                                        max_model_len=128))
    for i in range(4):
        s.add_request(Request(f"r{i}", list(range(100 * i, 100 * i + 24)), SamplingParams(max_tokens=8),
                              None, block_hasher=hasher))
    peak_running = 0
    while s.has_unfinished_requests():
        out = s.schedule()
        peak_running = max(peak_running, len(s.running))
        s.update_from_output(out, {r: [7] for r in out.num_scheduled_tokens})
    return peak_running, [rid for r in s.step_log for rid in r.preempted_req_ids], len(s.step_log)


budgets = {budget: run_budget(budget) for budget in (128, 16, 8)}
for budget, (peak, preempted, steps) in budgets.items():
    print(f"max_num_batched_tokens {budget:>3}: {steps} steps, at most {peak} running, preempted {preempted}")
assert [steps for _, _, steps in budgets.values()] == [16, 20, 25]             # the budget spreads the work
assert all((peak, preempted) == (3, ["r2"]) for peak, preempted, _ in budgets.values())  # not the capacity""",
         None),
        ("zh2n08c", "markdown", """\
With every budget at most 3 requests run at once and the third is preempted: the budget spreads
the prefills over 16, 20 or 25 steps, but 19 blocks hold three prompts (6 blocks each) and not
three finished sequences (8 each), whatever the budget. The study note that calls for chunked
prefill to raise concurrency (`000`, "9.1 配置分析") mixes up computation per step with KV
capacity: the concurrency a pool allows is its tokens divided by the sequence length (notebook
12 §7), and the budget is not in that division.""", """\
无论预算是多少，同时运行的请求最多 3 个，而且第三个都会被抢占：预算把预填充分摊到 16、20 或 25 步，但 19 个块放得下三个提示词
（各 6 个块），放不下三个完整的序列（各 8 个块），与预算无关。学习笔记说需要用分块预填充来提高并发（`000`，「9.1 配置分析」），
是把每一步的计算量和 KV 容量混为一谈：块池能支持的并发是它的 token 数除以序列长度（第 12 个笔记本 §7），预算不在这个除法里。"""),
    ]),
]

# (notebook, cell id, English old, English new, Chinese old, Chinese new): markdown only. Notebook
# 12 §6 blamed note 000 "9.2" and note 001's life-cycle diagram, which are right (they touch in
# allocate_slots); the wrong one is note 001's lookup flow chart (errata row 1, misconceptions row 6).
MARKDOWN = [
    ("12_misconceptions", "127cf0dc",
     """**Corrects:** the loose wording of study note 000 (“05 - KV Cache 管理机制”) "9.2 Prefix Caching 示例" and of study note 001's
life-cycle diagram ("Cached → SharedCached: touch() (另一请求命中)"), read as "a hit touches the
block".""",
     """**Corrects:** study note 001 (“KV Cache 管理器”), the lookup flow chart of "3.1
get_computed_blocks()": `找到匹配块? → 是 → 增加引用计数` (a hit increments the reference count).
Note 000's "9.2 Prefix Caching 示例" and note 001's life-cycle diagram ("Cached → SharedCached:
touch()") are right: their `touch` happens in `allocate_slots`, as below.""",
     """**纠正**：学习笔记 000（“05 - KV Cache 管理机制”）“9.2 Prefix Caching 示例”中不严谨的措辞，以及学习笔记 001 的生命周期图
（“Cached → SharedCached: touch() (另一请求命中)”），它们读起来像是“命中会 touch 块”。""",
     """**纠正**：学习笔记 001（“KV Cache 管理器”）「3.1 get_computed_blocks()」中的查找流程图：`找到匹配块? → 是 → 增加引用计数`。
学习笔记 000 的「9.2 Prefix Caching 示例」和学习笔记 001 的生命周期图（“Cached → SharedCached: touch()”）是对的：
它们的 `touch` 发生在 `allocate_slots` 中，正如下面所示。"""),
]

N = "../tutorials/"
DOCS = {  # file -> [(old, new)]: the errata rows and seed-map rows that the new sections back
    "docs/explanation/errata.md": [
        (f"[notebook 7 · a window hit that ends at block 2]({N}07_hybrid_models_fixed_point.ipynb#gemma-3-like-full-attention-sliding-window)",
         f"[notebook 7 · the study notes' example, run]({N}07_hybrid_models_fixed_point.ipynb#the-study-notes-worked-example-h0-h1-h2-h3)"),
        ("Layers are grouped by what they attend to, not by their number format.",
         "Layers are grouped by what they attend to, not by their number format: full-attention layers "
         "in different dtypes or head counts are one group "
         "(`vllm/v1/kv_cache_interface.py::UniformTypeKVCacheSpecs.is_uniform_type`)."),
        (f"[notebook 7 · groups of a hybrid model]({N}07_hybrid_models_fixed_point.ipynb#gemma-3-like-full-attention-sliding-window)",
         f"[notebook 7 · groups follow the attention type]({N}07_hybrid_models_fixed_point.ipynb#groups-follow-the-attention-type-not-the-number-format)"),
        (f"[notebook 5 · the admission gate]({N}05_anatomy_of_allocate_slots.ipynb#4-the-admission-gate-full_sequence_must_fit), [notebook 12 §7",
         f"[notebook 8 · chunked prefill adds no KV capacity]({N}08_the_scheduler.ipynb#chunked-prefill-adds-no-kv-capacity), [notebook 12 §7"),
    ],
    "docs/explanation/errata.zh.md": [
        (f"[笔记本 7 · 止于块 2 的窗口命中]({N}07_hybrid_models_fixed_point.ipynb#gemma-3-like-full-attention-sliding-window)",
         f"[笔记本 7 · 学习笔记中的例子，实际运行]({N}07_hybrid_models_fixed_point.ipynb#the-study-notes-worked-example-h0-h1-h2-h3)"),
        ("分组看的是层关注哪些 token，而不是数值精度。",
         "分组看的是层关注哪些 token，而不是数值精度：dtype 或头数不同的全注意力层属于同一个组"
         "（`vllm/v1/kv_cache_interface.py::UniformTypeKVCacheSpecs.is_uniform_type`）。"),
        (f"[笔记本 7 · 混合模型的分组]({N}07_hybrid_models_fixed_point.ipynb#gemma-3-like-full-attention-sliding-window)",
         f"[笔记本 7 · 分组看注意力类型]({N}07_hybrid_models_fixed_point.ipynb#groups-follow-the-attention-type-not-the-number-format)"),
        (f"[笔记本 5 · 准入闸门]({N}05_anatomy_of_allocate_slots.ipynb#4-the-admission-gate-full_sequence_must_fit)、[笔记本 12 §7",
         f"[笔记本 8 · 分块预填充不增加 KV 容量]({N}08_the_scheduler.ipynb#chunked-prefill-adds-no-kv-capacity)、[笔记本 12 §7"),
    ],
    "docs/explanation/seed-map.md": [
        (f"[notebook 7 · a second round]({N}07_hybrid_models_fixed_point.ipynb#two-window-sizes-a-second-round)",
         f"[notebook 7 · the study notes' example]({N}07_hybrid_models_fixed_point.ipynb#the-study-notes-worked-example-h0-h1-h2-h3)<br>"
         f"[notebook 7 · a second round]({N}07_hybrid_models_fixed_point.ipynb#two-window-sizes-a-second-round)"),
        (f"[notebook 4 · what enters a block hash]({N}04_block_hashes_and_prefix_caching.ipynb#extra-keys-same-tokens-different-cache-entries)",
         f"[notebook 4 · sampling parameters are not in the hash]({N}04_block_hashes_and_prefix_caching.ipynb#sampling-parameters-are-not-in-the-hash)"),
        (f"[notebook 9 · reading K/V back through the block table]({N}09_the_worker_side.ipynb#writing-kv-into-the-paged-cache-and-reading-it-back)<br>[notebook 1 · what one token costs]({N}01_why_paged_kv.ipynb#what-one-token-costs)",
         f"[notebook 1 · what a decode step reads]({N}01_why_paged_kv.ipynb#what-a-decode-step-reads)<br>"
         f"[notebook 9 · reading K/V back through the block table]({N}09_the_worker_side.ipynb#writing-kv-into-the-paged-cache-and-reading-it-back)"),
    ],
    "docs/explanation/seed-map.zh.md": [
        (f"[笔记本 7 · 第二轮迭代]({N}07_hybrid_models_fixed_point.ipynb#two-window-sizes-a-second-round)",
         f"[笔记本 7 · 学习笔记中的例子]({N}07_hybrid_models_fixed_point.ipynb#the-study-notes-worked-example-h0-h1-h2-h3)<br>"
         f"[笔记本 7 · 第二轮迭代]({N}07_hybrid_models_fixed_point.ipynb#two-window-sizes-a-second-round)"),
        (f"[笔记本 4 · 哪些内容进入块哈希]({N}04_block_hashes_and_prefix_caching.ipynb#extra-keys-same-tokens-different-cache-entries)",
         f"[笔记本 4 · 采样参数不参与哈希]({N}04_block_hashes_and_prefix_caching.ipynb#sampling-parameters-are-not-in-the-hash)"),
        (f"[笔记本 9 · 经由块表读回 K/V]({N}09_the_worker_side.ipynb#writing-kv-into-the-paged-cache-and-reading-it-back)<br>[笔记本 1 · 一个 token 的代价]({N}01_why_paged_kv.ipynb#what-one-token-costs)",
         f"[笔记本 1 · 一次解码步读多少]({N}01_why_paged_kv.ipynb#what-a-decode-step-reads)<br>"
         f"[笔记本 9 · 经由块表读回 K/V]({N}09_the_worker_side.ipynb#writing-kv-into-the-paged-cache-and-reading-it-back)"),
    ],
    "tests/docs/test_seed_map.py": [
        ('("003", "问答 24"): ["extra key", "SamplingParams", "prompt_logprobs"]',
         '("003", "问答 24"): ["SamplingParams", "prompt_logprobs", "temperature"]'),
        ('("003", "kvcache的特点"): ["gather_kv", "block-table row", "bytes"]',
         '("003", "kvcache的特点"): ["block-table row", "decode step", "gather_kv"]'),
    ],
}


def insert_cells(root: Path = ROOT) -> list[str]:
    """Insert CELLS into the English notebooks and sync the Chinese ones; the notebooks changed."""
    changed = []
    for name, after, cells in CELLS:
        path = root / "notebooks" / f"{name}.ipynb"
        en = nbformat.read(path, as_version=4)
        ids = [c.id for c in en.cells]
        if cells[0][0] in ids:
            continue  # applied already
        at = ids.index(after) + 1
        new = []
        for cell_id, kind, source, _zh in cells:
            cell = nbformat.v4.new_markdown_cell(source) if kind == "markdown" else nbformat.v4.new_code_cell(source)
            cell.id = cell_id
            new.append(cell)
        en.cells[at:at] = new
        nbformat.write(en, path)
        zh_file = root / "notebooks" / "zh" / f"{name}.ipynb"
        zh = sync(en, nbformat.read(zh_file, as_version=4))
        by_id = {c.id: c for c in zh.cells}
        for cell_id, kind, _en, zh_source in cells:
            if kind == "markdown":
                by_id[cell_id].source = zh_source
        mark_translated(en, zh, [c[0] for c in cells if c[1] == "markdown"])
        nbformat.write(zh, zh_file)
        changed.append(name)
    return changed


def fix_markdown(root: Path = ROOT) -> None:
    """Apply MARKDOWN to the English notebook and its Chinese twin (marked translated)."""
    for name, cell_id, en_old, en_new, zh_old, zh_new in MARKDOWN:
        en_file, zh_file = (root / "notebooks" / f"{name}.ipynb", root / "notebooks" / "zh" / f"{name}.ipynb")
        en, zh = nbformat.read(en_file, as_version=4), nbformat.read(zh_file, as_version=4)
        en_cell = next(c for c in en.cells if c.id == cell_id)
        zh_cell = next(c for c in zh.cells if c.id == cell_id)
        if en_new in en_cell.source:
            continue  # applied already
        assert en_cell.source.count(en_old) == 1 and zh_cell.source.count(zh_old) == 1, cell_id
        en_cell.source = en_cell.source.replace(en_old, en_new)
        zh_cell.source = zh_cell.source.replace(zh_old, zh_new)
        mark_translated(en, zh, [cell_id])
        nbformat.write(en, en_file)
        nbformat.write(zh, zh_file)


def patch_docs(root: Path = ROOT) -> None:
    for rel, pairs in DOCS.items():
        path = root / rel
        text = path.read_text(encoding="utf-8")
        for old, new in pairs:
            if new in text:
                continue
            assert text.count(old) == 1, (rel, old)
            text = text.replace(old, new)
        path.write_text(text, encoding="utf-8")


if __name__ == "__main__":
    print("inserted into:", ", ".join(insert_cells()) or "nothing (applied already)")
    fix_markdown()
    patch_docs()
    print("notebook 12 §6 corrected; errata, seed map and tests/docs/test_seed_map.py patched;")
    print("now execute 01 04 07 08 12 (en and zh)")
