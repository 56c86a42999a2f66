"""The events models emits carry the API's shapes, installed by each entry point (C12)."""

from __future__ import annotations

import pytest

from api import representations
from models.webhooks import payloads


def test_the_tests_run_with_the_api_shapes_installed() -> None:
    assert payloads.installed() is representations


def test_no_payloads_installed_is_one_line_naming_the_fix(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(payloads, "_installed", [])
    with pytest.raises(RuntimeError, match=r"payloads\.install\(api\.representations"):
        payloads.installed()
