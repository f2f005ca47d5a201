"""kvlab's version, in a module of its own: readers (kvlab.trace.fileformat) and the build
(hatch's ``[tool.hatch.version]``) take it from here without importing the whole package."""

__version__ = "0.1.0"
