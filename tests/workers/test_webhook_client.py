"""C12: the webhook client against a real HTTP(S) receiver; signatures checked with the
Standard Webhooks library."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from pathlib import Path

import httpcore
import pytest
from standardwebhooks import Webhook
from standardwebhooks.webhooks import WebhookVerificationError

from tests.webhook_receiver import HOST_NAME, Behaviour, Receiver, receiving
from workers.webhooks import client, signing

SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
OLD_SECRET = "whsec_QUJDREVGR0hJSktMTU5PUFFSU1RVVldYWVoxMjM0NTY="


def local(host: str, port: int, timeout: float) -> list[str]:
    """DNS faked at its seam: every name is the receiver's address."""
    return ["127.0.0.1"]


@pytest.fixture
def receiver(tmp_path: Path) -> Iterator[Receiver]:
    with receiving(tmp_path) as r:
        yield r


def make_client(receiver: Receiver, **kw: object) -> client.Client:
    return client.Client(
        allowed=lambda ip: True,
        resolve=local,
        ssl_context=receiver.trust(),
        **kw,  # type: ignore[arg-type]
    )


def post(c: client.Client, receiver: Receiver, body: bytes = b'{"type":"t"}') -> client.Answer:
    headers = signing.headers("msg_1", body, [SECRET], at=datetime.now(UTC))
    return c.post(receiver.url(), body, headers, limit=15)


def test_a_signed_post_reaches_the_host_by_name_over_verified_tls(receiver: Receiver) -> None:
    body = json.dumps({"type": "job.expired", "data": {"id": 1}}).encode()
    answer = post(make_client(receiver), receiver, body)
    assert answer.status == 204
    [got] = receiver.received
    assert got.headers["Host"] == f"{HOST_NAME}:{receiver.port}"
    assert receiver.sni == [HOST_NAME]
    assert got.headers["User-Agent"] == "jobpost-webhooks/1"
    assert got.headers["Content-Type"] == "application/json"
    assert got.headers["webhook-id"] == "msg_1"
    assert abs(int(got.headers["webhook-timestamp"]) - time.time()) < 5
    assert Webhook(SECRET).verify(got.body, got.headers) == json.loads(body)


def test_two_secrets_sign_and_either_verifies(receiver: Receiver) -> None:
    body = b'{"type":"webhook.test"}'
    headers = signing.headers("msg_2", body, [SECRET, OLD_SECRET], at=datetime.now(UTC))
    make_client(receiver).post(receiver.url(), body, headers, limit=15)
    [got] = receiver.received
    assert len(got.headers["webhook-signature"].split(" ")) == 2
    Webhook(SECRET).verify(got.body, got.headers)
    Webhook(OLD_SECRET).verify(got.body, got.headers)
    with pytest.raises(WebhookVerificationError):
        Webhook("whsec_" + "A" * 43 + "=").verify(got.body, got.headers)


def test_a_certificate_from_an_unknown_ca_is_refused(receiver: Receiver) -> None:
    c = client.Client(allowed=lambda ip: True, resolve=local)
    with pytest.raises(httpcore.ConnectError):
        post(c, receiver)
    assert receiver.received == []


def test_a_certificate_for_another_name_is_refused(receiver: Receiver) -> None:
    c = make_client(receiver)
    with pytest.raises(httpcore.ConnectError):
        c.post(receiver.url(host="other.test"), b"{}", {}, limit=15)


def test_an_address_judged_forbidden_is_never_connected_to(receiver: Receiver) -> None:
    """DNS that now answers a forbidden address: refused before any connection."""
    c = client.Client(allowed=lambda ip: ip != "127.0.0.1", resolve=local)
    with pytest.raises(client.Refused, match="forbidden address"):
        post(c, receiver)
    assert receiver.received == [] and receiver.sni == []


def test_one_forbidden_address_among_others_refuses_the_host(receiver: Receiver) -> None:
    def mixed(host: str, port: int, timeout: float) -> list[str]:
        return ["127.0.0.1", "10.0.0.1"]

    c = client.Client(allowed=lambda ip: ip == "127.0.0.1", resolve=mixed)
    with pytest.raises(client.Refused):
        post(c, receiver)
    assert receiver.received == []


def test_a_host_that_does_not_resolve_is_refused() -> None:
    def nothing(host: str, port: int, timeout: float) -> list[str]:
        raise OSError("Name or service not known")

    c = client.Client(allowed=lambda ip: True, resolve=nothing)
    with pytest.raises(client.Refused, match="does not resolve"):
        c.post("https://nowhere.test/x", b"{}", {}, limit=15)


def test_a_redirect_is_not_followed(receiver: Receiver) -> None:
    receiver.behaviour = Behaviour(status=302, location="https://elsewhere.test/")
    assert post(make_client(receiver), receiver).status == 302
    assert len(receiver.received) == 1


def test_a_huge_answer_is_read_only_to_64_kib(receiver: Receiver) -> None:
    receiver.behaviour = Behaviour(status=200, body_bytes=100 * 1024 * 1024)
    answer = post(make_client(receiver), receiver)
    assert answer.status == 200
    assert len(answer.body) == client.MAX_ANSWER


def test_a_receiver_that_hangs_is_left_at_the_exchange_limit(receiver: Receiver) -> None:
    receiver.behaviour = Behaviour(hang=True)
    with pytest.raises(httpcore.TimeoutException):
        post(make_client(receiver, exchange_limit=1.0), receiver)


def test_a_receiver_that_drips_its_answer_is_left_at_the_limit(receiver: Receiver) -> None:
    """Each byte comes within any read timeout; the exchange's own deadline ends it."""
    receiver.behaviour = Behaviour(drip=True)
    c = make_client(receiver, exchange_limit=2.5)
    with pytest.raises(httpcore.TimeoutException):
        post(c, receiver)
    assert len(receiver.received) == 1


def test_the_callers_limit_shortens_the_exchange(receiver: Receiver) -> None:
    receiver.behaviour = Behaviour(hang=True)
    headers = signing.headers("msg_1", b"{}", [SECRET], at=datetime.now(UTC))
    with pytest.raises(httpcore.TimeoutException):
        make_client(receiver).post(receiver.url(), b"{}", headers, limit=1.0)


def test_a_slow_answer_within_the_limit_is_taken(receiver: Receiver) -> None:
    receiver.behaviour = Behaviour(status=200, delay=0.5)
    assert post(make_client(receiver), receiver).status == 200


def test_a_closed_connection_is_an_error(receiver: Receiver) -> None:
    receiver.behaviour = Behaviour(close=True)
    with pytest.raises((httpcore.NetworkError, httpcore.RemoteProtocolError)):
        post(make_client(receiver), receiver)


def test_the_default_resolver_refuses_a_name_that_does_not_resolve() -> None:
    c = client.Client(allowed=lambda ip: True)
    with pytest.raises(client.Refused, match="does not resolve"):
        c.post("https://no-such-host.invalid/x", b"{}", {}, limit=5)


def test_plain_http_when_the_url_says_so() -> None:
    with receiving() as r:
        c = client.Client(allowed=lambda ip: True, resolve=local)
        assert c.post(r.url(), b"{}", {}, limit=5).status == 204
        assert r.received[0].headers["Host"] == f"{HOST_NAME}:{r.port}"


# --- kept connections (the workers' client keeps one a thread and origin) -------------------------


def test_a_kept_connection_serves_the_next_posts_to_the_same_address(receiver: Receiver) -> None:
    c = make_client(receiver, keep=True)
    try:
        assert [post(c, receiver).status for _ in range(3)] == [204, 204, 204]
        assert receiver.sni == [HOST_NAME]  # one TLS handshake for the three
        assert len(receiver.received) == 3
    finally:
        c.close()
    assert post(c, receiver).status == 204  # closed: the next POST connects again
    assert receiver.sni == [HOST_NAME, HOST_NAME]
    c.close()


def test_without_keep_each_post_connects_anew(receiver: Receiver) -> None:
    c = make_client(receiver)
    assert [post(c, receiver).status for _ in range(2)] == [204, 204]
    assert receiver.sni == [HOST_NAME, HOST_NAME]


def test_a_kept_connection_is_judged_again_before_each_post(receiver: Receiver) -> None:
    """The name resolves and each address is judged before every POST: a kept connection
    to an address now forbidden is closed and not used; nor is one to an address the name
    no longer resolves to."""
    forbid = {"127.0.0.1": False}
    answers = [["127.0.0.1"]]
    c = client.Client(
        allowed=lambda ip: not forbid.get(ip, False),
        resolve=lambda host, port, timeout: answers[-1],
        ssl_context=receiver.trust(),
        keep=True,
    )
    try:
        assert post(c, receiver).status == 204
        forbid["127.0.0.1"] = True
        with pytest.raises(client.Refused, match="forbidden address"):
            post(c, receiver)
        forbid["127.0.0.1"] = False
        assert post(c, receiver).status == 204
        assert len(receiver.sni) == 2  # the refusal closed the kept connection
        answers.append(["127.0.0.3"])  # moved to an address where nothing listens
        with pytest.raises(httpcore.ConnectError):
            post(c, receiver)
        assert len(receiver.received) == 2  # the kept connection to 127.0.0.1 was not used
    finally:
        c.close()


def test_each_thread_keeps_its_own_connection(receiver: Receiver) -> None:
    c = make_client(receiver, keep=True)
    try:
        with ThreadPoolExecutor(2) as pool:
            barrier = threading.Barrier(2)

            def two_posts() -> list[int]:
                barrier.wait()
                return [post(c, receiver).status for _ in range(2)]

            results = [f.result() for f in [pool.submit(two_posts) for _ in range(2)]]
        assert results == [[204, 204], [204, 204]]
        assert receiver.sni == [HOST_NAME, HOST_NAME]  # two threads, two connections
    finally:
        c.close()


def test_after_a_huge_answer_or_a_closed_connection_the_next_post_connects_anew(
    receiver: Receiver,
) -> None:
    c = make_client(receiver, keep=True)
    try:
        receiver.behaviour = Behaviour(status=200, body_bytes=10 * 2**20)
        assert len(post(c, receiver).body) == client.MAX_ANSWER  # the rest never read
        receiver.behaviour = Behaviour(close=True)
        with pytest.raises((httpcore.NetworkError, httpcore.RemoteProtocolError)):
            post(c, receiver)
        receiver.behaviour = Behaviour()
        assert post(c, receiver).status == 204
        assert len(receiver.sni) == 3
    finally:
        c.close()
