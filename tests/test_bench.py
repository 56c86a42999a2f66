"""The engine bench's pieces work (C12; `python -m bench engine` times them, nothing here is
timed): the SMTP sink that answers DATA late, the webhook receiver, and the bare loop of
signed POSTs on kept connections that the workers are measured against."""

from __future__ import annotations

import base64
import json
import smtplib
import time
from email.message import EmailMessage
from pathlib import Path

from bench import smtp_sink, webhook_loop, webhook_receiver

# The example of the Standard Webhooks specification: its secret, message and signature.
SPEC_SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
SPEC_MESSAGE = webhook_loop.Message("msg_p5jXN8AQM9LWM0D4loKWxJek", b'{"test": 2432232314}')
SPEC_TIMESTAMP = 1614265330
SPEC_SIGNATURE = "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="


def test_the_loop_signs_as_the_standard_webhooks_example() -> None:
    headers = webhook_loop.signed_headers(SPEC_MESSAGE, SPEC_SECRET, SPEC_TIMESTAMP)
    assert headers["webhook-signature"] == SPEC_SIGNATURE
    assert headers["webhook-id"] == SPEC_MESSAGE.id
    assert headers["webhook-timestamp"] == str(SPEC_TIMESTAMP)
    assert headers["Content-Type"] == "application/json"


def test_the_bare_loop_posts_every_message_signed_on_one_connection_per_thread(
    tmp_path: Path,
) -> None:
    secret = "whsec_" + base64.b64encode(b"k" * 32).decode()
    messages = [
        webhook_loop.Message(f"msg_{i}", json.dumps({"type": "webhook.test", "n": i}).encode())
        for i in range(40)
    ]
    with webhook_receiver.running(tmp_path / "receiver.log", delay=0.05) as receiver:
        assert receiver.counts()["posts"] == 0
        rate = webhook_loop.bare_loop(messages, receiver, secret, threads=4)
        counts = receiver.counts()
    assert rate > 0
    assert counts["posts"] == counts["signed"] == 40
    assert counts["bytes"] == sum(len(m.body) for m in messages)
    assert counts["connections"] == 4  # kept: one per thread


def test_the_receiver_counts_unsigned_posts_apart_and_answers_each_late(tmp_path: Path) -> None:
    import urllib3

    with webhook_receiver.running(tmp_path / "receiver.log", delay=0.3) as receiver:
        pool = urllib3.HTTPConnectionPool(receiver.host, receiver.port, maxsize=1)
        started = time.monotonic()
        answer = pool.request("POST", "/hooks", body=b"{}", headers={"webhook-id": "msg_1"})
        took = time.monotonic() - started
        pool.close()
        counts = receiver.counts()
    assert answer.status == 200
    assert took >= 0.3  # the receiver's round trip, as the bench asks
    assert (counts["posts"], counts["signed"]) == (1, 0)


def test_the_sink_answers_the_end_of_data_late_and_counts(tmp_path: Path) -> None:
    with smtp_sink.running(tmp_path / "sink.log", data_delay=0.3) as sink:
        message = EmailMessage()
        message["From"], message["To"], message["Subject"] = "a@jobs.test", "b@jobs.test", "Hi"
        message.set_content("Hello.")
        with smtplib.SMTP(sink.host, sink.port, timeout=10) as conn:
            started = time.monotonic()
            assert conn.noop()[0] == 250  # every other reply at once
            conn.send_message(message)
            took = time.monotonic() - started
        messages, size = sink.counts()
    assert took >= 0.3
    assert messages == 1 and size > 0
