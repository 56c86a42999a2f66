"""A small HTTP client for the set-up and the checks around the load (wrk makes the load)."""

from __future__ import annotations

import http.client
import json
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit


@dataclass(frozen=True)
class Response:
    status: int
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body)


class Client:
    def __init__(self, base_url: str, api_key: str | None = None, timeout: float = 30) -> None:
        parts = urlsplit(base_url)
        self.host, self.port = parts.hostname or "127.0.0.1", parts.port or 80
        self.api_key = api_key
        self.timeout = timeout

    def request(
        self, method: str, path: str, body: str | None = None, *, auth: bool = True
    ) -> Response:
        headers = {"API-Key": self.api_key} if auth and self.api_key else {}
        if body is not None:
            headers["Content-Type"] = "application/json"
        conn = http.client.HTTPConnection(self.host, self.port, timeout=self.timeout)
        try:
            conn.request(method, path, body=body, headers=headers)
            answer = conn.getresponse()
            return Response(answer.status, answer.read())
        finally:
            conn.close()
