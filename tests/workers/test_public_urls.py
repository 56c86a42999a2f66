"""C9 `PUBLIC_BASE_URL`, for real: `jobpost serve` on an address of its own, a worker, an
SMTP server and a webhook receiver. An applicant (and an employer's client) sends a forged
Host, X-Forwarded-Host and Forwarded; the Location header, the signed
`application.received` payload's resumeUrl and the email copy name PUBLIC_BASE_URL when it
is set, else the address `jobpost serve --host/--port` listens on; the forged host appears
nowhere. The stacks (database, broker, workers) are tests/workers/stacks.py's."""

from __future__ import annotations

import base64
import http.client
import json
from collections.abc import Iterator
from typing import Any

import pytest
from cryptography.fernet import Fernet
from standardwebhooks import Webhook

from models import employers
from models.core.dates import utcnow
from models.db.entities import WebhookEndpoint
from models.db.unit_of_work import session_scope
from models.webhooks import secrets
from tests.harness import JOBPOST, Program, free_port, wait_for
from tests.webhook_receiver import Receiver, receiving
from tests.workers import stacks
from tests.workers.processes import SinkServer, worker_env
from tests.workers.stacks import Stack

pytestmark = pytest.mark.slow

sqlite_template = stacks.sqlite_template
postgres_template = stacks.postgres_template
globals()["stack"] = stacks.stack
sink = stacks.sink

API = "/api/v1.1"
SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
KEY = Fernet.generate_key()
PDF = b"%PDF-1.4\n1 0 obj<</Type/Catalog>>endobj\ntrailer<</Root 1 0 R>>\n%%EOF\n"
FORGED = {
    "Host": "attacker.test",
    "X-Forwarded-Host": "attacker.test",
    "X-Forwarded-Proto": "https",
    "Forwarded": "host=attacker.test;proto=https",
}


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    with receiving() as r:
        yield r


def send(port: int, path: str, body: dict[str, Any], **headers: str) -> http.client.HTTPResponse:
    """A POST of `body` with the forged headers (http.client sends the Host it is given)."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    conn.putrequest("POST", path, skip_host=True, skip_accept_encoding=True)
    data = json.dumps(body).encode()
    for name, value in {**FORGED, **headers, "Content-Type": "application/json"}.items():
        conn.putheader(name, value)
    conn.putheader("Content-Length", str(len(data)))
    conn.endheaders(data)
    answer = conn.getresponse()
    answer.read()
    conn.close()
    return answer


@pytest.mark.parametrize(
    ("stack", "public"),
    [
        pytest.param("embedded-sqlite", None, id="embedded-sqlite-listen-address"),
        pytest.param(
            "redis-postgresql",
            "https://jobs.example.test",
            marks=[pytest.mark.redis, pytest.mark.postgres],
            id="redis-postgresql-public",
        ),
    ],
    indirect=["stack"],
)
def test_a_forged_host_reaches_no_location_payload_or_email(
    stack: Stack, sink: SinkServer, receiver: Receiver, public: str | None
) -> None:
    received = sink.start()
    with session_scope(stack.sessions) as s:
        employer = employers.create_employer(s, "Maple Corp")
        api_key = employers.issue_key(s, employer.id).key
        s.add(
            WebhookEndpoint(
                employer_id=employer.id,
                url=f"http://127.0.0.1:{receiver.port}/hook",
                events='["application.received"]',
                status="enabled",
                secret=secrets.encrypt(SECRET, KEY),
                created_at=utcnow(),
                updated_at=utcnow(),
            )
        )
    extra = {
        "WEBHOOK_ALLOW_HTTP": "true",
        "WEBHOOK_ALLOW_PRIVATE": "true",
        "WEBHOOK_ALLOWED_PORTS": "1024-65535",  # the receiver's free port (C12)
        "JOBPOST_SECRET_KEY": KEY.decode(),
        "PUBLIC_BASE_URL": public or "",
    }
    stack.start_worker(sink.port, extra=extra)
    port = free_port()
    env = worker_env(
        database_url=stack.database_url,
        broker_url=stack.broker_url,
        smtp_port=sink.port,
        workdir=stack.workdir,
        extra=extra,
    )
    command = [*JOBPOST, "serve", "--host", "127.0.0.1", "--port", str(port), "--workers", "1"]
    base = public or f"http://127.0.0.1:{port}"
    with Program(command, stack.workdir / "web.log", env=env, name="web") as web:
        web.wait_until(lambda: listening(port), timeout=60, what="jobpost serve")
        job = {
            "title": "Line Cook",
            "status": "active",
            "locations": [{"description": "Toronto, ON"}],
            "categories": [{"id": 12}],
            "positionType": {"id": 1},
            "description": "<p>Cook.</p>",
            "applicantRoutingType": {"id": 1},
            "applicationEmail": "hiring@maple.test",
        }
        created = send(port, f"{API}/jobs", job, **{"API-Key": api_key})
        assert created.status == 201
        location = created.headers["Location"]
        job_id = int(location.rsplit("/", 1)[1])
        assert location == f"{base}{API}/jobs/{job_id}"
        resume = {"filename": "cv.pdf", "content": base64.b64encode(PDF).decode()}
        application = {"name": "Ada", "email": "ada@example.org", "resume": resume}
        assert send(port, f"{API}/jobs/{job_id}/applications", application).status == 202
        # The applicant's receipt (C20) goes only with PUBLIC_BASE_URL, the base of its link.
        emails = 1 if public is None else 2
        sent = lambda: receiver.received and len(received.messages) >= emails  # noqa: E731
        wait_for(sent, timeout=60, what="the webhook and the emails sent")
        [hook] = receiver.received
        payload = Webhook(SECRET).verify(hook.body, hook.headers)
        app_id = payload["data"]["id"]
        assert payload["data"]["resumeUrl"] == f"{base}{API}/applications/{app_id}/resume"
        mails = received.messages
        assert len(mails) == emails and b"attacker" not in hook.body
        assert not any("attacker" in mail.as_string() for mail in mails)
        if public is not None:
            [receipt] = [mail for mail in mails if mail["To"] == "ada@example.org"]
            body = receipt.get_body(("plain",))
            assert body is not None and f"{public}/applications/status/" in body.get_content()
        if public is None:  # the receiver that fetches it with its key reaches the service
            fetched = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
            fetched.request(
                "GET", f"{API}/applications/{app_id}/resume", headers={"API-Key": api_key}
            )
            answer = fetched.getresponse()
            assert answer.status == 200 and answer.read() == PDF
            fetched.close()


def listening(port: int) -> bool:
    try:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
        conn.request("GET", "/healthz")
        ok = conn.getresponse().status == 200
        conn.close()
        return ok
    except OSError:
        return False
