#!/usr/bin/env bash
# Build a CPU-only venv where SGLang 0.5.23's radix cache imports, for tests/sglang/test_vs_sglang.py
# (kvlab's radix policy against SGLang's own RadixCache, allocator and life-cycle functions).
#
#   usage: tests/sglang/setup_sglang_venv.sh VENV_DIR        (e.g. /work/sglang-venv)
#   then:  PYTHONPATH=$PWD VENV_DIR/bin/python -m pytest tests/sglang/test_vs_sglang.py
#
# Exits at once if VENV_DIR already imports SGLang 0.5.23's mem_cache; refuses a non-empty
# VENV_DIR that does not. Approach (SGLang's own pins pull CUDA torch, several GB):
#  * torch 2.13.0 CPU (plain `pip install torch==2.13.0`: this machine's pip config finds the
#    local CPU wheel), sglang==0.5.23 with --no-deps;
#  * the pure-Python packages sglang/srt/mem_cache's imports reach, each pinned and --no-deps;
#  * a stand-in `torchvision` package: SGLang's model configs import a few torchvision names at
#    module level, and no torchvision wheel matches a CPU torch here (PyPI's is a CUDA build). The
#    radix cache never calls them; the stand-in raises if anything does;
#  * what kvlab's tests need to import kvlab (numpy, xxhash, cbor2, msgspec, pytest).
set -euo pipefail
VENV=${1:?usage: $0 VENV_DIR}
PY=${PYTHON:-python3}   # CPython 3.11 (the local torch wheel is cp311)

check() {
  "$VENV/bin/python" -W ignore - <<'PY' >/dev/null 2>&1
import importlib.metadata
assert importlib.metadata.version("sglang") == "0.5.23"
from sglang.srt.mem_cache.radix_cache import RadixCache  # noqa: F401
from sglang.srt.mem_cache.common import release_kv_cache  # noqa: F401
from sglang.srt.managers.schedule_batch import ReqKvInfo  # noqa: F401
import pytest, xxhash, cbor2  # noqa: F401,E401
PY
}

if [ -x "$VENV/bin/python" ] && check; then
  echo "$VENV already imports SGLang 0.5.23's mem_cache: nothing to do"
  exit 0
fi
if [ -e "$VENV" ] && [ -n "$(ls -A "$VENV" 2>/dev/null)" ]; then
  echo "refusing: $VENV exists but does not import SGLang 0.5.23 (rm -rf it first)" >&2
  exit 1
fi

"$PY" -m venv "$VENV"
PIP=("$VENV/bin/python" -m pip install --disable-pip-version-check -q)
"${PIP[@]}" torch==2.13.0
"${PIP[@]}" --no-deps sglang==0.5.23
"${PIP[@]}" --no-deps \
  aiohappyeyeballs==2.7.1 aiohttp==3.14.5 aiosignal==1.4.0 annotated-types==0.8.0 anyio==4.16.0 \
  apache-tvm-ffi==0.1.15.post2 attrs==26.1.0 certifi==2026.10.19.post1 compressed-tensors==0.20.0 \
  dill==0.4.1 frozenlist==1.8.0 gguf==0.19.0 h11==0.16.0 httpcore2==2.16.2 httpx2==2.16.2 \
  huggingface_hub==2.4.0 idna==3.20 ipython==9.18.1 loguru==0.7.3 msgspec==0.22.0 \
  multidict==7.2.1 numpy==2.4.6 openai==3.57.0 orjson==3.13.0 packaging==26.4 \
  partial-json-parser==0.2.1.1.post7 pillow==13.0.0 propcache==0.5.4 psutil==7.2.2 \
  pybase64==1.5.1 pydantic==2.14.4 pydantic_core==2.50.5 Pygments==2.21.0 PyYAML==6.0.4 \
  pyzmq==27.3.0 regex==2026.11.19 requests==2.34.2 safetensors==0.8.0 sentencepiece==0.2.3 \
  sniffio==1.3.1 starlette==1.10.0 tokenizers==0.23.3 tqdm==4.70.1 traitlets==5.16.1 \
  transformers==5.24.0 triton==3.9.0 truststore==0.10.5 typing-inspection==0.4.5 \
  urllib3==2.8.0 yarl==1.25.1 \
  xxhash==4.1.0 cbor2==6.3.0 pytest==9.2.0 iniconfig==2.3.1 pluggy==1.7.0

SITE=$("$VENV/bin/python" -c "import sysconfig; print(sysconfig.get_paths()['purelib'])")
mkdir -p "$SITE/torchvision/transforms"
cat > "$SITE/torchvision/__init__.py" <<'PY'
"""Stand-in for torchvision in kvlab's SGLang environment (CPU torch; no matching torchvision
wheel): SGLang's model configs import these names at module level, the radix cache never calls
them. Any torchvision.* submodule imports as a module of such stand-ins."""
import importlib.abc
import importlib.machinery
import sys
import types

__version__ = "0.0.0+kvlab-stand-in"


class Missing:
    """A torchvision name; calling it says that it is a stand-in."""

    def __init__(self, name):
        self.name = name

    def __call__(self, *args, **kwargs):
        raise RuntimeError(f"torchvision.{self.name} is a stand-in in kvlab's SGLang environment")

    def __getattr__(self, name):
        return Missing(f"{self.name}.{name}")


def __getattr__(name):
    if name.startswith("__"):
        raise AttributeError(name)
    return Missing(name)


class _Loader(importlib.abc.Loader):
    def create_module(self, spec):
        mod = types.ModuleType(spec.name)
        mod.__path__ = []

        def module_getattr(name, _prefix=spec.name[len("torchvision."):]):
            if name.startswith("__"):
                raise AttributeError(name)
            return Missing(f"{_prefix}.{name}")

        mod.__getattr__ = module_getattr
        return mod

    def exec_module(self, module):
        pass


class _Finder(importlib.abc.MetaPathFinder):
    def find_spec(self, fullname, path, target=None):
        if fullname.startswith("torchvision.") and fullname != "torchvision.transforms" \
                and not fullname.startswith("torchvision.transforms.functional"):
            return importlib.machinery.ModuleSpec(fullname, _Loader(), is_package=True)
        return None


sys.meta_path.append(_Finder())
PY
cat > "$SITE/torchvision/transforms/__init__.py" <<'PY'
from torchvision import Missing
from torchvision.transforms import functional
from torchvision.transforms.functional import InterpolationMode


def __getattr__(name):
    if name.startswith("__"):
        raise AttributeError(name)
    return Missing(f"transforms.{name}")
PY
cat > "$SITE/torchvision/transforms/functional.py" <<'PY'
import enum

from torchvision import Missing


class InterpolationMode(enum.Enum):
    NEAREST = "nearest"
    NEAREST_EXACT = "nearest-exact"
    BILINEAR = "bilinear"
    BICUBIC = "bicubic"
    BOX = "box"
    HAMMING = "hamming"
    LANCZOS = "lanczos"


def __getattr__(name):
    if name.startswith("__"):
        raise AttributeError(name)
    return Missing(f"transforms.functional.{name}")
PY

if check; then
  echo "$VENV: SGLang 0.5.23's mem_cache imports"
else
  echo "$VENV: SGLang 0.5.23's mem_cache does not import; see: $VENV/bin/python -c" \
       "'from sglang.srt.mem_cache.common import release_kv_cache'" >&2
  exit 1
fi
