"""The OpenAPI 3.1 document of the whole API, served at /api/v1.1/openapi.json."""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path
from typing import Any

PATH = Path(__file__).with_name("openapi.json")


@cache
def document() -> dict[str, Any]:
    """The parsed document, loaded once. Shared between callers: do not mutate it."""
    loaded = json.loads(PATH.read_text(encoding="utf-8"))
    if not isinstance(loaded, dict):
        raise TypeError(f"{PATH} does not hold a JSON object")
    return loaded
