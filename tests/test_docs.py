"""The README documents what a newcomer and an operator need (C9)."""

from __future__ import annotations

import re
from pathlib import Path

from models.settings import VARIABLES, Settings

README = (Path(__file__).resolve().parents[1] / "README.md").read_text()


def _table_rows() -> dict[str, str]:
    """variable → default cell, from the README's configuration table."""
    rows = {}
    for line in README.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 3:
            for name in re.findall(r"`([A-Z_]+)`", cells[0]):
                rows[name] = cells[1]
    return rows


def test_every_variable_jobpost_reads_is_in_the_configuration_table() -> None:
    missing = [name for name in VARIABLES if name not in _table_rows()]
    assert not missing, f"README's configuration table lacks {missing}"


def test_the_documented_numeric_defaults_are_the_real_ones() -> None:
    real = Settings.from_env({})
    rows = _table_rows()
    for name, value in {
        "SMTP_TIMEOUT": real.smtp_timeout,
        "APPLICATION_RETENTION_DAYS": real.application_retention_days,
        "OUTBOX_SWEEP_GRACE_SECONDS": real.outbox_sweep_grace_seconds,
        "OUTBOX_LEASE_SECONDS": real.outbox_lease_seconds,
        "DELIVERY_RETRY_BASE_SECONDS": real.delivery_retry_base_seconds,
        "DELIVERY_RETRY_HOURS": real.delivery_retry_hours,
        "READY_TIMEOUT_SECONDS": real.ready_timeout_seconds,
        "WORKER_METRICS_PORT": real.worker_metrics_port,
    }.items():
        assert rows[name] == f"`{value:g}`", f"{name}: README says {rows[name]}, the code {value}"


def test_the_two_setup_commands_are_given() -> None:
    assert "make run" in README and "make test" in README
