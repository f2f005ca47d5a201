"""Skip policy: under CI (``CI=true``) a skip is allowed only for "needs CUDA", "needs the vLLM
environment" or "needs the SGLang environment" (vLLM 0.22.1 / SGLang 0.5.23 importable: neither
installs in CI, tests/vllm_suite and tests/sglang/setup_sglang_venv.sh say how to run those tests);
any other skip (a missing package, browser or node) fails the session, listing each."""
from __future__ import annotations

import os
import re

import pytest

ALLOWED_SKIP = re.compile(r"needs CUDA|needs the vLLM environment|needs the SGLang environment")
_unexpected: list[str] = []


def _skip_reason(report) -> str:
    longrepr = report.longrepr
    if isinstance(longrepr, tuple) and len(longrepr) == 3:
        return str(longrepr[2])
    return str(longrepr)


def _note(report) -> None:
    if report.skipped and not hasattr(report, "wasxfail"):
        reason = _skip_reason(report)
        if not ALLOWED_SKIP.search(reason):
            _unexpected.append(f"{report.nodeid}: {reason}")


def pytest_runtest_logreport(report):
    _note(report)


def pytest_collectreport(report):
    _note(report)


def _ci() -> bool:
    return os.environ.get("CI", "").lower() in ("1", "true", "yes")


@pytest.hookimpl(trylast=True)
def pytest_sessionfinish(session, exitstatus):
    if not _ci() or not _unexpected or hasattr(session.config, "workerinput"):
        return
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    lines = ["CI skip policy: only 'needs CUDA', 'needs the vLLM environment' and "
             "'needs the SGLang environment' may skip; these did:",
             *(f"  {u}" for u in _unexpected)]
    if reporter is not None:
        reporter.write_line("\n".join(lines), red=True)
    session.exitstatus = pytest.ExitCode.TESTS_FAILED
