"""Which build of jobpost a process runs: `jobpost_build_info`, which the web's and the
worker's /metrics both serve (C9)."""

from __future__ import annotations

import platform
from collections.abc import Iterable
from functools import cache
from importlib import metadata

from prometheus_client.metrics_core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector


@cache
def labels() -> dict[str, str]:
    """The package's version (as installed) and the Python it runs on."""
    try:
        version = metadata.version("jobpost")
    except metadata.PackageNotFoundError:  # run from a source tree that was never installed
        version = "unknown"
    return {"version": version, "python": platform.python_version()}


class BuildInfo(Collector):
    """`jobpost_build_info{version,python} 1`: which build answers."""

    def collect(self) -> Iterable[Metric]:
        info = labels()
        gauge = GaugeMetricFamily(
            "jobpost_build_info",
            "The build of jobpost this process runs (always 1).",
            labels=[*info],
        )
        gauge.add_metric([*info.values()], 1)
        yield gauge
