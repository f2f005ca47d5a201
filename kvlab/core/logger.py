"""vLLM's logger for kvlab.core: a standard-library logger with ``*_once`` methods.

Mirrors: vllm/logger.py::init_logger (only what kvlab.core's mirrored code calls:
``info_once`` / ``warning_once`` / ``debug_once`` log a given message and arguments once per
process, as vLLM's do; everything else is ``logging.Logger``'s).

Examples:
    >>> logger = init_logger("kvlab.core.example")
    >>> logger.info_once("shown once: %d", 1); logger.info_once("shown once: %d", 1)
"""

from __future__ import annotations

import logging
from typing import Any

__all__ = ["init_logger"]


class _VllmLogger(logging.Logger):
    """A Logger whose ``*_once`` methods skip a (message, args) pair seen before."""

    _seen: set[tuple[int, str, tuple[Any, ...]]] = set()

    def _once(self, level: int, msg: str, *args: Any) -> None:
        key = (level, msg, args)
        if key in _VllmLogger._seen:
            return
        _VllmLogger._seen.add(key)
        self.log(level, msg, *args, stacklevel=3)

    def debug_once(self, msg: str, *args: Any) -> None:
        """``debug`` the first time this message is logged with these arguments."""
        self._once(logging.DEBUG, msg, *args)

    def info_once(self, msg: str, *args: Any) -> None:
        """``info`` the first time this message is logged with these arguments."""
        self._once(logging.INFO, msg, *args)

    def warning_once(self, msg: str, *args: Any) -> None:
        """``warning`` the first time this message is logged with these arguments."""
        self._once(logging.WARNING, msg, *args)


def init_logger(name: str) -> _VllmLogger:
    """The logger ``name`` (from the standard logging tree), with vLLM's ``*_once`` methods.

    Mirrors: vllm/logger.py::init_logger
    """
    logger = logging.getLogger(name)
    if not isinstance(logger, _VllmLogger):
        logger.__class__ = _VllmLogger  # NOTE: same object: handlers and levels are kept
    return logger  # type: ignore[return-value]
