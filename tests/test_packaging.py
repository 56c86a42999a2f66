"""`pip install .` (not only editable installs) gives a working `jobpost`, migrations and
reference data included (issue: foundations)."""

from __future__ import annotations

import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from tests.harness import copy_tracked


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("wheel")
    source = copy_tracked(tmp_path_factory.mktemp("source"))  # no build/ in the checkout
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "--no-build-isolation",
            "-q",
            "-w",
            str(out),
            str(source),
        ],
        check=True,
        capture_output=True,
        cwd=out,
    )
    (built,) = out.glob("jobpost-*.whl")
    return built


def test_the_wheel_carries_code_migrations_and_documents(wheel: Path) -> None:
    names = set(zipfile.ZipFile(wheel).namelist())
    for needed in (
        "beat_schedule.py",
        "api/openapi.json",
        "models/db/migrations/env.py",
        "models/db/migrations/script.py.mako",
        "models/db/migrations/versions/0001_initial_schema.py",
        "models/db/migrations/versions/0002_job_version.py",
        "workers/cli/__init__.py",
        "workers/cli/__main__.py",
        "api/templates/job.html",  # the pages and emails, and their French (C13)
        "workers/mail/templates/copy.txt",
        "workers/mail/templates/copy.html",
        "models/core/locale/fr/LC_MESSAGES/messages.mo",
    ):
        assert needed in names, f"{needed} is missing from the wheel"
    entry_points = next(n for n in names if n.endswith("entry_points.txt"))
    text = zipfile.ZipFile(wheel).read(entry_points).decode()
    assert "jobpost = workers.cli:main" in text


@pytest.mark.slow
def test_installed_jobpost_migrates_and_issues_keys_outside_the_checkout(
    wheel: Path, tmp_path: Path
) -> None:
    """Installed into a folder of its own and run from elsewhere, the package still works."""
    target = tmp_path / "site"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "--no-deps",
            "-q",
            "--target",
            str(target),
            str(wheel),
        ],
        check=True,
        capture_output=True,
    )
    env = {**os.environ, "PYTHONPATH": str(target), "JOBPOST_VAR_DIR": str(tmp_path / "var")}
    env.pop("DATABASE_URL", None)

    def jobpost(*args: str) -> subprocess.CompletedProcess[str]:
        code = "import sys, workers.cli, models; assert models.__file__.startswith(sys.argv[1]); "
        code += "sys.exit(workers.cli.main(sys.argv[2:]))"
        return subprocess.run(
            [sys.executable, "-c", code, str(target), *args],
            env=env,
            cwd=tmp_path,
            capture_output=True,
            text=True,
        )

    upgraded = jobpost("db", "upgrade", "--json")
    assert upgraded.returncode == 0, upgraded.stderr
    created = jobpost("employers", "create", "Packaged Inc", "--json")
    assert created.returncode == 0, created.stderr
    assert '"apiKey":"jp_' in created.stdout
    assert (tmp_path / "var" / "jobpost.db").exists()
