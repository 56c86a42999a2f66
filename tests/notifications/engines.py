"""Search engines stood in for by one local HTTP server (C18), checking the protocols: an
IndexNow endpoint, Google's OAuth token endpoint, which verifies the service account's JWT
assertion (its RS256 signature against the account's public key, its claims), and the
Indexing API's publish endpoint, which takes only a token the token endpoint issued."""

from __future__ import annotations

import base64
import http.server
import json
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qs

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import padding, rsa

JWT_BEARER = "urn:ietf:params:oauth:grant-type:jwt-bearer"
SCOPE = "https://www.googleapis.com/auth/indexing"
CLIENT_EMAIL = "indexer@jobpost-test.iam.gserviceaccount.com"
# The audience Google's token endpoint requires of an assertion, wherever it is asked.
AUDIENCE = "https://oauth2.googleapis.com/token"


def _b64(part: str) -> bytes:
    return base64.urlsafe_b64decode(part + "=" * (-len(part) % 4))


@dataclass
class Engines:
    public_key: rsa.RSAPublicKey
    port: int = 0
    indexnow: list[dict[str, Any]] = field(default_factory=list)  # the bodies posted
    published: list[dict[str, Any]] = field(default_factory=list)  # each accepted body
    tokens: list[str] = field(default_factory=list)  # issued
    claims: list[dict[str, Any]] = field(default_factory=list)  # of the verified assertions
    refused: list[str] = field(default_factory=list)  # why a request was refused
    answers: dict[str, list[int]] = field(default_factory=dict)  # path → statuses to answer
    lock: threading.Lock = field(default_factory=threading.Lock)

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.port}{path}"

    def answer(self, path: str, *statuses: int) -> None:
        """The next requests to `path` answer these statuses, in order, before the normal."""
        with self.lock:
            self.answers[path] = list(statuses)

    def next_status(self, path: str, normal: int) -> int:
        with self.lock:
            waiting = self.answers.get(path) or []
            return waiting.pop(0) if waiting else normal

    def verify_assertion(self, assertion: str) -> str | None:
        """Why the JWT is not a valid service-account assertion for the indexing scope (None:
        it is): a compact JWS signed RS256 by the account's key, with its claims."""
        try:
            head, body, signature = assertion.split(".")
            header, claims = json.loads(_b64(head)), json.loads(_b64(body))
        except ValueError:
            return "not a compact JWT"
        if header.get("alg") != "RS256":
            return f"alg {header.get('alg')}"
        try:
            self.public_key.verify(
                _b64(signature), f"{head}.{body}".encode(), padding.PKCS1v15(), hashes.SHA256()
            )
        except InvalidSignature:
            return "bad signature"
        now = time.time()
        if claims.get("iss") != CLIENT_EMAIL:
            return f"iss {claims.get('iss')}"
        if claims.get("aud") != AUDIENCE:
            return f"aud {claims.get('aud')}"
        if claims.get("scope") != SCOPE:
            return f"scope {claims.get('scope')}"
        if not claims.get("iat", 0) - 60 <= now < claims.get("exp", 0):
            return "expired"
        with self.lock:
            self.claims.append(claims)
        return None


class Handler(http.server.BaseHTTPRequestHandler):
    engines: Engines

    def log_message(self, *args: Any) -> None:
        pass

    def reply(self, status: int, data: object = None) -> None:
        body = b"" if data is None else json.dumps(data).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def refuse(self, status: int, why: str) -> None:
        with self.engines.lock:
            self.engines.refused.append(why)
        self.reply(status, {"error": why})

    def do_POST(self) -> None:
        raw = self.rfile.read(int(self.headers.get("Content-Length", "0")))
        if self.path == "/token":
            return self.token(raw)
        if self.path == "/indexnow":
            return self.submit(raw)
        if self.path == "/publish":
            return self.publish(raw)
        return self.refuse(404, f"no {self.path}")

    def token(self, raw: bytes) -> None:
        form = {k: v[0] for k, v in parse_qs(raw.decode()).items()}
        if form.get("grant_type") != JWT_BEARER:
            return self.refuse(400, "grant_type")
        why = self.engines.verify_assertion(form.get("assertion", ""))
        if why is not None:
            return self.refuse(400, why)
        issued = f"ya29.test-{len(self.engines.tokens) + 1}"
        with self.engines.lock:
            self.engines.tokens.append(issued)
        self.reply(200, {"access_token": issued, "expires_in": 3600, "token_type": "Bearer"})

    def submit(self, raw: bytes) -> None:
        if not self.headers.get("Content-Type", "").startswith("application/json"):
            return self.refuse(415, "content type")
        body = json.loads(raw)
        with self.engines.lock:
            self.engines.indexnow.append(body)
        if set(body) != {"host", "key", "keyLocation", "urlList"}:
            return self.refuse(400, f"members {sorted(body)}")
        if not 1 <= len(body["urlList"]) <= 10_000:
            return self.refuse(422, "urlList size")
        status = self.engines.next_status("/indexnow", 200)
        self.reply(status)

    def publish(self, raw: bytes) -> None:
        bearer = self.headers.get("Authorization", "").removeprefix("Bearer ")
        if bearer not in self.engines.tokens:
            return self.refuse(401, "token")
        body = json.loads(raw)
        if set(body) != {"url", "type"} or body["type"] not in ("URL_UPDATED", "URL_DELETED"):
            return self.refuse(400, f"body {body}")
        status = self.engines.next_status("/publish", 200)
        if status == 200:
            with self.engines.lock:
                self.engines.published.append(body)
            return self.reply(200, {"urlNotificationMetadata": {"url": body["url"]}})
        self.reply(status, {"error": {"code": status}})


@contextmanager
def serving(public_key: rsa.RSAPublicKey) -> Iterator[Engines]:
    engines = Engines(public_key)
    server = http.server.ThreadingHTTPServer(
        ("127.0.0.1", 0), type("Bound", (Handler,), {"engines": engines})
    )
    engines.port = server.server_address[1]
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield engines
    finally:
        server.shutdown()
        server.server_close()
