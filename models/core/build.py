"""Which build of jobpost a process runs: the labels of `jobpost_build_info` (C9)."""

from __future__ import annotations

import platform
from functools import cache
from importlib import metadata


@cache
def labels() -> dict[str, str]:
    """The package's version (as installed) and the Python it runs on."""
    try:
        version = metadata.version("jobpost")
    except metadata.PackageNotFoundError:  # run from a source tree that was never installed
        version = "unknown"
    return {"version": version, "python": platform.python_version()}
