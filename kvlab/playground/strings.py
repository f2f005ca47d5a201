"""The playground page's labels: every English string its JavaScript shows, as catalogue messages.

``static/playground.js`` looks each label up with ``t("...")`` in a ``{english: translation}``
object that ``build.page_html`` embeds for each language (``playground_strings(lang)``). The
strings are listed here, marked with ``N_``, so that ``pybabel extract`` puts them in kvlab's
catalogue; tests/playground/test_strings.py keeps this list equal to the ``t()`` calls of the
script. vLLM's identifiers (num_gpu_blocks, block_size, max_tokens ...) are not labels.

Examples:
    >>> playground_strings("zh")["Run"]
    '运行'
"""

from __future__ import annotations

from kvlab.i18n import N_, check_language, translations

__all__ = ["PLAYGROUND_STRINGS", "playground_strings"]

PLAYGROUND_STRINGS = (
    N_("The link's scenario could not be read; the default scenario is shown."),
    N_("There is no preset {name}; the default scenario is shown."),
    N_("request id"),
    N_("prompt"),
    N_("output tokens"),
    N_("arrival step"),
    N_("remove this request"),
    N_("preset"),
    N_("full attention"),
    N_("sliding window"),
    N_("hybrid: full + sliding window"),
    N_("token ids"),
    N_("words"),
    N_("the scheduler (continuous batching)"),
    N_("KVCacheManager calls (as in the notebooks)"),
    N_("calls, one per line"),
    N_("window (tokens)"),
    N_("groups, in order"),
    N_("per KV cache group: full, or a window in tokens; e.g. full, 8, 12"),
    N_("Preemption pressure"),
    N_("token budget per step (max_num_batched_tokens)"),
    N_("reserve the whole prompt on admission (scheduler_reserve_full_isl)"),
    N_("chunked prefill (enable_chunked_prefill)"),
    N_("A smaller pool, budget or reservation makes requests wait and running ones get preempted."),
    N_("Calls, one per line"),
    N_("admit R · prefill R · decode R [N] · lookup R · free R · evict BLOCK_ID ... · reset"),
    N_("Run"),
    N_("Share"),
    N_("share link"),
    N_("load preset"),
    N_("Block pool"),
    N_("Cache design"),
    N_("attention"),
    N_("prefix caching (enable_caching)"),
    N_("hash function"),
    N_("Requests"),
    N_("prompts are written as"),
    N_("add a request"),
    N_(
        "Token ids: integers separated by spaces or commas; a..b is the range a to b. Words: each "
        "word becomes the id crc32(word) mod 49152; a Chinese character is a word by itself. Past "
        "its output tokens a request generates token 7."
    ),
    N_("Driver"),
    N_("Predict mode asks before:"),
    N_("Loading the Python interpreter (Pyodide, about 13 MB)…"),
    N_("Unpacking kvlab.core and cbor2…"),
    N_("Importing kvlab.core…"),
    N_("Running the scenario…"),
    N_(
        "The playground runs Python in your browser, which browsers allow only for pages served "
        "over http(s). Serve this folder (kvlab playground --serve, or python3 -m http.server) "
        "and open it from there."
    ),
    N_("Python could not start in this page."),
    N_("details (Python traceback)"),
    N_("This scenario cannot run:"),
    N_("Ready. Fix the scenario and run again."),
    N_("{events} events, {steps} scheduler steps, run in {ms} ms."),
    N_("Ready (first run {s} s after opening the page)."),
    N_("Link copied: it opens this scenario and runs it."),
    N_("Copy the link above: it opens this scenario and runs it."),
    N_("kvlab playground"),
    N_(
        "Edit a scenario and run it: the exact kvlab.core that makes vLLM 0.22.1's KV-cache "
        "decisions runs here, in your browser (Python through Pyodide, nothing is sent "
        "anywhere). The trace player below replays every decision."
    ),
    N_("This link needs a look:"),
    N_("{n} token"),
    N_("{n} tokens"),
)
"""The English labels of playground.js, in the order the script uses them."""


def playground_strings(lang: str) -> dict[str, str]:
    """``{english: translation}`` for every PLAYGROUND_STRINGS entry (``{}`` for English).

    Raises:
        ValueError: If ``lang`` is not a language kvlab speaks.
    """
    lang = check_language(lang)
    if lang == "en":
        return {}
    gettext = translations(lang).gettext
    return {message: gettext(message) for message in PLAYGROUND_STRINGS}
