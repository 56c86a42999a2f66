"""The lock files pin what pyproject.toml names, at versions it allows, and the suite runs on
them (issue 14: a fresh clone installs the versions that were tested); the floors in
pyproject.toml are the releases that have what jobpost uses."""

from __future__ import annotations

import re
import tomllib
from importlib import metadata
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import NormalizedName, canonicalize_name
from packaging.version import Version

ROOT = Path(__file__).resolve().parents[1]
PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text("utf-8"))["project"]
RUNTIME = [Requirement(text) for text in PROJECT["dependencies"]]
TEST = [Requirement(text) for text in PROJECT["optional-dependencies"]["test"]]
DEV = [Requirement(text) for text in PROJECT["optional-dependencies"]["dev"]]
# What `make install` (and so CI, `make run`) installs, and what the Dockerfile installs.
LOCKS = {"requirements-test.txt": RUNTIME + TEST + DEV, "requirements.txt": RUNTIME}
PIN = re.compile(r"^([A-Za-z0-9._-]+)==([^\s;\\]+)", re.MULTILINE)


def pins(lock: str) -> dict[NormalizedName, Version]:
    text = (ROOT / lock).read_text("utf-8")
    return {canonicalize_name(name): Version(version) for name, version in PIN.findall(text)}


@pytest.mark.parametrize("lock", LOCKS)
def test_the_lock_pins_every_dependency_at_a_version_pyproject_allows(lock: str) -> None:
    pinned = pins(lock)
    missing = [str(r) for r in LOCKS[lock] if canonicalize_name(r.name) not in pinned]
    assert not missing, f"{lock} lacks {missing}, which pyproject.toml asks for: run `make lock`"
    refused = [
        f"{r.name}=={pinned[canonicalize_name(r.name)]} (pyproject.toml: {r})"
        for r in LOCKS[lock]
        if not r.specifier.contains(pinned[canonicalize_name(r.name)], prereleases=True)
    ]
    assert not refused, f"{lock} pins {refused}: run `make lock`"


def test_the_runtime_lock_pins_the_versions_the_suite_is_run_on() -> None:
    tested, shipped = pins("requirements-test.txt"), pins("requirements.txt")
    differ = {name: (v, tested.get(name)) for name, v in shipped.items() if tested.get(name) != v}
    assert not differ, f"requirements.txt and requirements-test.txt differ: {differ}; make lock"


def extras_needs(requirement: Requirement, seen: set[str] | None = None) -> set[NormalizedName]:
    """What `requirement`'s extras bring, through the extras those name in turn (celery[redis]
    names kombu[redis], which names redis and packaging), read from the installed metadata."""
    seen = set() if seen is None else seen
    needs: set[NormalizedName] = set()
    for extra in requirement.extras:
        if f"{requirement.name}[{extra}]" in seen:
            continue
        seen.add(f"{requirement.name}[{extra}]")
        for text in metadata.requires(requirement.name) or []:
            needed, marker = Requirement(text), Requirement(text).marker
            # brought by this extra, not by the package alone
            if marker and marker.evaluate({"extra": extra}) and not marker.evaluate({"extra": ""}):
                needs.add(canonicalize_name(needed.name))
                needs |= extras_needs(needed, seen)
    return needs


def test_the_image_lock_carries_what_the_extras_it_needs_bring() -> None:
    """kombu's Redis transport imports `packaging`, which only kombu's `redis` extra brings: a
    lock without it installs an image whose worker and beat stop at once (issue 27)."""
    (celery,) = [r for r in RUNTIME if r.name == "celery"]
    assert "redis" in celery.extras, "pyproject.toml must depend on celery[redis]"
    brought = set().union(*(extras_needs(r) for r in RUNTIME))
    assert {"kombu", "redis", "packaging"} <= brought
    absent = sorted(brought - pins("requirements.txt").keys())
    assert not absent, f"requirements.txt lacks {absent}, which the extras bring: run `make lock`"


def test_the_image_lock_leaves_out_the_test_tools_and_ships_the_bounce_receiver() -> None:
    """The test tools are in requirements-test.txt (`make install`) only; aiosmtpd, which
    `jobpost bounces` serves with (C22), is in the image's too."""
    shipped = pins("requirements.txt")
    for tool in ("pytest", "hypothesis", "schemathesis", "playwright", "fakeredis"):
        name = canonicalize_name(tool)
        assert any(canonicalize_name(r.name) == name for r in TEST), tool
        assert name not in shipped, f"requirements.txt ships {name}, a test tool"
        assert name in pins("requirements-test.txt"), f"make install would lack {name}"
    assert DEV == [] and canonicalize_name("aiosmtpd") in shipped


def installed(name: str) -> Version | None:
    try:
        return Version(metadata.version(name))
    except metadata.PackageNotFoundError:
        return None


def test_the_suite_runs_on_the_locked_versions() -> None:
    stale = {
        name: f"locked {locked}, installed {installed(name)}"
        for name, locked in pins("requirements-test.txt").items()
        if installed(name) != locked
    }
    assert not stale, f"this environment is not the lock: {stale}; run `make install`"


def test_the_gunicorn_floor_has_what_jobpost_serve_uses() -> None:
    """api/gunicorn_workers.py names InvalidResponseHeader(Name), new in gunicorn 27.0 (under
    25.1 to 26.2, each request gunicorn refuses got no answer); api/server.py sets
    control_socket_disable, new in 25.1 (under 23.0 `jobpost serve` stops at start)."""
    from gunicorn.config import KNOWN_SETTINGS
    from gunicorn.http import errors

    assert hasattr(errors, "InvalidResponseHeader"), "the installed gunicorn is older than 27.0"
    assert hasattr(errors, "InvalidResponseHeaderName")
    assert "control_socket_disable" in {setting.name for setting in KNOWN_SETTINGS}
    (gunicorn,) = [r for r in RUNTIME if r.name == "gunicorn"]
    assert not gunicorn.specifier.contains("26.2.0"), f"pyproject.toml allows {gunicorn}"
