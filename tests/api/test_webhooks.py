"""The webhooks API (C12, C14) through HTTP in-process, on SQLite and PostgreSQL: every rule
broken, each refused address class (by the resolver seam), secrets shown once and stored
encrypted, rotation, test, the deliveries log, retry, and isolation between employers."""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import falcon.testing
import pytest
from cryptography.fernet import Fernet
from sqlalchemy import func, select, update
from sqlalchemy.orm import Session, sessionmaker

from api import ratelimit
from api.app import Collaborators, create_app
from models.core.dates import utcnow
from models.core.settings import Settings
from models.db.entities import WebhookDelivery, WebhookEndpoint, WebhookMessage
from models.webhooks import endpoints as webhooks
from models.webhooks import messages as webhook_messages
from models.webhooks import secrets
from models.webhooks.urls import Unresolved
from tests.conftest import Account, Api, Clock

V = "/api/v1.1"
URL = "https://hooks.example.com/jobpost"
PUBLIC = "93.184.215.14"
SECRET = re.compile(r"whsec_[A-Za-z0-9+/]{43}=")
KEY = Fernet.generate_key()

# What the fake resolver answers, per host; a host not here does not resolve (in time).
HOSTS: dict[str, list[str]] = {
    "hooks.example.com": [PUBLIC],
    "hooks.example.net": ["2606:4700::1111"],
}


def resolver(table: dict[str, list[str]]) -> Callable[[str, int, float], list[str]]:
    def resolve(host: str, port: int, timeout: float) -> list[str]:
        assert timeout == 2.0  # C12: a host that does not resolve within 2 s is refused
        if host not in table:
            raise Unresolved(f"{host} did not resolve within {timeout:g} s")
        return table[host]

    return resolve


@dataclasses.dataclass
class Hooks:
    api: Api
    enqueued: list[list[int]]
    hosts: dict[str, list[str]]
    sessions: sessionmaker[Session]
    settings: Settings


def build(
    settings: Settings,
    sessions: sessionmaker[Session],
    clock: Clock,
    *,
    allow_http: bool = False,
    allow_private: bool = False,
    resends: ratelimit.Limiter | None = None,
) -> Hooks:
    settings = dataclasses.replace(
        settings,
        secret_key=KEY.decode(),
        webhook_allow_http=allow_http,
        webhook_allow_private=allow_private,
    )
    enqueued: list[list[int]] = []
    hosts = dict(HOSTS)
    policy = webhooks.UrlPolicy(
        settings.webhook_allow_http,
        settings.webhook_allow_private,
        resolver(hosts),
        settings.webhook_allowed_ports,
    )
    parts = Collaborators(
        url_policy=policy, enqueue_webhooks=enqueued.append, resend_limiter=resends
    )
    app = create_app(settings, sessions, parts, today=clock)
    return Hooks(Api(app), enqueued, hosts, sessions, settings)


@pytest.fixture
def hooks(settings: Settings, sessions: sessionmaker[Session], clock: Clock) -> Hooks:
    return build(settings, sessions, clock)


def register(hooks: Hooks, key: str, **body: Any) -> dict[str, Any]:
    result = hooks.api.post(f"{V}/webhooks", key=key, json={"url": URL, "events": ["*"], **body})
    assert result.status_code == 201, result.json
    created: dict[str, Any] = result.json
    return created


def entries(result: falcon.testing.Result) -> list[tuple[str, str]]:
    assert result.status_code == 422, result.json
    assert result.json["code"] == "validation_failed"
    return [(e["field"], e["code"]) for e in result.json["errors"]]


# ------------------------------------------------------------------------------ registering


def test_register_answers_201_with_location_and_the_secret_once(
    hooks: Hooks, employer: Account
) -> None:
    result = hooks.api.post(
        f"{V}/webhooks",
        key=employer.key,
        json={"url": URL, "events": ["job.expired", "application.received"]},
    )
    assert result.status_code == 201
    body = result.json
    assert result.headers["location"] == f"http://127.0.0.1:8000{V}/webhooks/{body['id']}"
    assert result.headers["cache-control"] == "no-store"
    assert SECRET.fullmatch(body["secret"])
    assert body == {
        "id": body["id"],
        "url": URL,
        "events": ["job.expired", "application.received"],
        "description": None,
        "status": "enabled",
        "createdAt": body["createdAt"],
        "secret": body["secret"],
    }
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", body["createdAt"])
    read = hooks.api.get(f"{V}/webhooks/{body['id']}", key=employer.key).json
    assert "secret" not in read and read == {k: v for k, v in body.items() if k != "secret"}
    listed = hooks.api.get(f"{V}/webhooks", key=employer.key).json["data"]
    assert listed == [read]


def test_the_secret_is_stored_encrypted(hooks: Hooks, employer: Account) -> None:
    created = register(hooks, employer.key)
    with hooks.sessions() as s:
        row = s.get(WebhookEndpoint, created["id"])
        assert row is not None
        assert created["secret"] not in row.secret
        assert created["secret"].removeprefix("whsec_") not in row.secret
        assert secrets.decrypt(row.secret, KEY) == created["secret"]


def test_two_secrets_are_never_the_same(hooks: Hooks, employer: Account) -> None:
    assert register(hooks, employer.key)["secret"] != register(hooks, employer.key)["secret"]


def test_list_is_oldest_first_and_paged(hooks: Hooks, employer: Account) -> None:
    ids = [register(hooks, employer.key, description=f"n{n}")["id"] for n in range(3)]
    page = hooks.api.get(f"{V}/webhooks?pageSize=2", key=employer.key).json
    assert [w["id"] for w in page["data"]] == ids[:2]
    assert page["paging"]["total"] == 3 and page["paging"]["pages"] == 2
    assert page["paging"]["next"].endswith(f"{V}/webhooks?pageSize=2&page=2")
    second = hooks.api.get(f"{V}/webhooks?pageSize=2&page=2", key=employer.key).json
    assert [w["id"] for w in second["data"]] == ids[2:]
    bad = hooks.api.get(f"{V}/webhooks?pageSize=0", key=employer.key)
    assert (bad.status_code, bad.json["code"]) == (400, "invalid_query")


# ---------------------------------------------------------------------------- the rules


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        ({"events": ["*"]}, [("url", "required")]),
        ({"url": None, "events": ["*"]}, [("url", "required")]),
        ({"url": 7, "events": ["*"]}, [("url", "invalid_type")]),
        ({"url": "ftp://hooks.example.com/x", "events": ["*"]}, [("url", "invalid_format")]),
        ({"url": "http://hooks.example.com/x", "events": ["*"]}, [("url", "invalid_format")]),
        ({"url": "/relative/path", "events": ["*"]}, [("url", "invalid_format")]),
        ({"url": "https:///nohost", "events": ["*"]}, [("url", "invalid_format")]),
        ({"url": "https://u:p@hooks.example.com/", "events": ["*"]}, [("url", "invalid_format")]),
        ({"url": "https://u@hooks.example.com/", "events": ["*"]}, [("url", "invalid_format")]),
        ({"url": "https://hooks.example.com:x/", "events": ["*"]}, [("url", "invalid_format")]),
        ({"url": "https://hooks.example.com/a\x00", "events": ["*"]}, [("url", "invalid_format")]),
        ({"url": URL + "/" + "a" * 2000, "events": ["*"]}, [("url", "too_long")]),
        ({"url": "https://nowhere.invalid/", "events": ["*"]}, [("url", "url_not_allowed")]),
        ({"url": "https://hooks.example.com:22/", "events": ["*"]}, [("url", "url_not_allowed")]),
        ({"url": "https://hooks.example.com:80/", "events": ["*"]}, [("url", "url_not_allowed")]),
        ({"url": URL}, [("events", "required")]),
        ({"url": URL, "events": []}, [("events", "too_few")]),
        ({"url": URL, "events": "*"}, [("events", "invalid_type")]),
        ({"url": URL, "events": [1]}, [("events[0]", "invalid_type")]),
        ({"url": URL, "events": ["job.expired", "job.removed"]}, [("events[1]", "out_of_range")]),
        ({"url": URL, "events": ["*", "job.expired"]}, [("events[0]", "out_of_range")]),
        ({"url": URL, "events": ["job.expired", "job.expired"]}, [("events[1]", "duplicate")]),
        ({"url": URL, "events": ["*"], "description": "d" * 201}, [("description", "too_long")]),
        ({"url": URL, "events": ["*"], "description": 5}, [("description", "invalid_type")]),
        (
            {"url": "ftp://x", "events": [], "description": "d" * 201},
            [("url", "invalid_format"), ("events", "too_few"), ("description", "too_long")],
        ),
    ],
)
def test_each_rule_broken_on_register_is_a_422_naming_it(
    hooks: Hooks, employer: Account, body: dict[str, Any], expected: list[tuple[str, str]]
) -> None:
    assert entries(hooks.api.post(f"{V}/webhooks", key=employer.key, json=body)) == expected
    with hooks.sessions() as s:
        assert s.scalars(select(WebhookEndpoint)).all() == []  # nothing half-written


def test_the_longest_url_and_description_are_taken(hooks: Hooks, employer: Account) -> None:
    url = URL + "/" + "a" * (2000 - len(URL) - 1)
    created = register(hooks, employer.key, url=url, description="d" * 200)
    assert (len(created["url"]), len(created["description"])) == (2000, 200)


def test_only_web_ports_are_taken_unless_webhook_allowed_ports_widens_them(
    settings: Settings, sessions: sessionmaker[Session], clock: Clock, employer: Account
) -> None:
    """C12: 443 and 8443; 80 and 8080 with plain HTTP; WEBHOOK_ALLOWED_PORTS adds others. A
    port refused is named, and no name is resolved for it."""
    hooks = build(settings, sessions, clock)
    for url in ("https://hooks.example.com/", "https://hooks.example.com:8443/a"):
        assert register(hooks, employer.key, url=url)["url"] == url
    body = {"url": "https://hooks.example.com:5432/", "events": ["*"]}
    refused = hooks.api.post(f"{V}/webhooks", key=employer.key, json=body)
    assert entries(refused) == [("url", "url_not_allowed")]
    assert refused.json["errors"][0]["message"] == (
        "url's port 5432 is not allowed: use a web port (443, 8443)."
    )
    del hooks.hosts["hooks.example.com"]  # a lookup would now fail with another message
    refused = hooks.api.post(f"{V}/webhooks", key=employer.key, json=body)
    assert "port 5432 is not allowed" in refused.json["errors"][0]["message"]
    plain = build(settings, sessions, clock, allow_http=True)
    for url in ("http://hooks.example.com/", "http://hooks.example.com:8080/"):
        assert register(plain, employer.key, url=url)["url"] == url
    body = {"url": "http://hooks.example.com:8000/", "events": ["*"]}
    refused = plain.api.post(f"{V}/webhooks", key=employer.key, json=body)
    assert refused.json["errors"][0]["message"] == (
        "url's port 8000 is not allowed: use a web port (80, 443, 8080, 8443)."
    )
    wider = build(
        dataclasses.replace(settings, webhook_allowed_ports=((5432, 5432), (9000, 9099))),
        sessions,
        clock,
    )
    for port in (5432, 9000, 9099):
        register(wider, employer.key, url=f"https://hooks.example.com:{port}/")
    body = {"url": "https://hooks.example.com:9100/", "events": ["*"]}
    assert entries(wider.api.post(f"{V}/webhooks", key=employer.key, json=body)) == [
        ("url", "url_not_allowed")
    ]


def test_http_only_with_webhook_allow_http(
    settings: Settings, sessions: sessionmaker[Session], clock: Clock, employer: Account
) -> None:
    hooks = build(settings, sessions, clock, allow_http=True)
    assert register(hooks, employer.key, url="http://hooks.example.com/in")["url"].startswith(
        "http://"
    )
    refused = hooks.api.post(
        f"{V}/webhooks", key=employer.key, json={"url": "ftp://hooks.example.com", "events": ["*"]}
    )
    assert entries(refused) == [("url", "invalid_format")]


REFUSED = [
    "127.0.0.1",  # loopback
    "::1",
    "10.0.0.5",  # private
    "172.16.3.4",
    "192.168.1.10",
    "fc00::1",
    "169.254.169.254",  # link-local (cloud metadata)
    "fe80::1",
    "224.0.0.1",  # multicast
    "ff02::1",
    "240.0.0.1",  # reserved
    "0.0.0.0",
    "100.64.0.1",  # shared address space, 100.64.0.0/10
    "100.127.255.254",
    "::ffff:127.0.0.1",  # IPv4-mapped
    "::ffff:10.1.2.3",
    "2002:a00:1::1",  # 6to4 of 10.0.0.1
    "2002:7f00:1::1",  # 6to4 of 127.0.0.1
    "2001:0:808:808:0:0:f5ff:fffe",  # Teredo, client 10.0.0.1 (server 8.8.8.8)
    "2001:0:a00:1:0:0:f7f7:f7f7",  # Teredo, server 10.0.0.1 (client 8.8.8.8)
    "64:ff9b::a00:1",  # NAT64 of 10.0.0.1
    "64:ff9b::7f00:1",  # NAT64 of 127.0.0.1
]


@pytest.mark.parametrize("address", REFUSED)
def test_a_host_resolving_to_a_refused_address_is_url_not_allowed(
    hooks: Hooks, employer: Account, address: str
) -> None:
    hooks.hosts["inside.example.com"] = [address]
    body = {"url": "https://inside.example.com/hook", "events": ["*"]}
    assert entries(hooks.api.post(f"{V}/webhooks", key=employer.key, json=body)) == [
        ("url", "url_not_allowed")
    ]


@pytest.mark.parametrize(
    "address",
    [
        PUBLIC,
        "2606:4700::1111",
        "::ffff:8.8.8.8",
        "2002:808:808::1",
        "2001:0:808:808:0:0:f7f7:f7f7",
        "64:ff9b::808:808",
    ],
)
def test_global_addresses_and_those_carrying_one_are_taken(
    hooks: Hooks, employer: Account, address: str
) -> None:
    hooks.hosts["outside.example.com"] = [address]
    register(hooks, employer.key, url="https://outside.example.com/hook")


def test_one_refused_address_among_several_refuses_the_url(hooks: Hooks, employer: Account) -> None:
    hooks.hosts["mixed.example.com"] = [PUBLIC, "10.0.0.1"]
    body = {"url": "https://mixed.example.com/", "events": ["*"]}
    assert entries(hooks.api.post(f"{V}/webhooks", key=employer.key, json=body)) == [
        ("url", "url_not_allowed")
    ]


def test_a_literal_address_in_the_url_is_judged_too(hooks: Hooks, employer: Account) -> None:
    hooks.hosts["127.0.0.1"] = ["127.0.0.1"]
    body = {"url": "https://127.0.0.1:8443/", "events": ["*"]}
    assert entries(hooks.api.post(f"{V}/webhooks", key=employer.key, json=body)) == [
        ("url", "url_not_allowed")
    ]


def test_private_addresses_with_webhook_allow_private(
    settings: Settings, sessions: sessionmaker[Session], clock: Clock, employer: Account
) -> None:
    hooks = build(settings, sessions, clock, allow_private=True)
    for address in ("127.0.0.1", "10.0.0.5", "::1"):
        hooks.hosts["inside.example.com"] = [address]
        register(hooks, employer.key, url="https://inside.example.com/hook")


def test_the_eleventh_endpoint_is_too_many_on_url(hooks: Hooks, employer: Account) -> None:
    for _ in range(10):
        register(hooks, employer.key)
    eleventh = hooks.api.post(f"{V}/webhooks", key=employer.key, json={"url": URL, "events": ["*"]})
    assert entries(eleventh) == [("url", "too_many")]
    with hooks.sessions() as s:
        assert len(s.scalars(select(WebhookEndpoint)).all()) == 10


def test_too_many_comes_before_the_url_rules_and_beside_the_other_fields(
    hooks: Hooks, employer: Account
) -> None:
    """A full employer's URL is not checked, so not resolved: too_many is its one error, and
    the other fields' errors come with it in the same answer (C1, C12)."""
    for _ in range(10):
        register(hooks, employer.key)
    body = {"url": "https://unresolvable.example.org/hook", "events": ["job.nope"]}
    eleventh = hooks.api.post(f"{V}/webhooks", key=employer.key, json=body)
    assert sorted(entries(eleventh)) == [("events[0]", "out_of_range"), ("url", "too_many")]
    no_url = hooks.api.post(f"{V}/webhooks", key=employer.key, json={"events": ["*"]})
    assert entries(no_url) == [("url", "too_many")]


def test_another_employers_endpoints_do_not_count(
    hooks: Hooks, employer: Account, make_employer: Any
) -> None:
    other = make_employer("Birch Ltd")
    for _ in range(10):
        register(hooks, other.key)
    register(hooks, employer.key)


def test_bodies_c1(hooks: Hooks, employer: Account) -> None:
    no_json = hooks.api.post(f"{V}/webhooks", key=employer.key, body="url=x")
    assert (no_json.status_code, no_json.json["code"]) == (415, "unsupported_media_type")
    broken = hooks.api.post(
        f"{V}/webhooks", key=employer.key, body="{", headers={"Content-Type": "application/json"}
    )
    assert (broken.status_code, broken.json["code"]) == (400, "malformed_json")
    nobody = hooks.api.post(f"{V}/webhooks", json={"url": URL, "events": ["*"]})
    assert (nobody.status_code, nobody.json["code"]) == (401, "unauthorized")


# ---------------------------------------------------------------------------- updating


def test_put_is_partial(hooks: Hooks, employer: Account) -> None:
    created = register(hooks, employer.key, description="first")
    path = f"{V}/webhooks/{created['id']}"
    updated = hooks.api.put(path, key=employer.key, json={"events": ["job.expired"]})
    assert updated.status_code == 200
    assert updated.json["events"] == ["job.expired"]
    assert (updated.json["url"], updated.json["description"]) == (URL, "first")
    cleared = hooks.api.put(path, key=employer.key, json={"description": None}).json
    assert cleared["description"] is None and cleared["events"] == ["job.expired"]
    moved = hooks.api.put(path, key=employer.key, json={"url": "https://hooks.example.net/x"})
    assert moved.json["url"] == "https://hooks.example.net/x"


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        ({"status": "paused"}, [("status", "out_of_range")]),
        ({"status": True}, [("status", "invalid_type")]),
        ({"url": None}, [("url", "required")]),
        ({"events": None}, [("events", "required")]),
        ({"events": []}, [("events", "too_few")]),
        ({"url": "https://nowhere.invalid/"}, [("url", "url_not_allowed")]),
        ({"url": "https://hooks.example.com:6379/"}, [("url", "url_not_allowed")]),
        (
            {"description": "x" * 201, "status": "off"},
            [("description", "too_long"), ("status", "out_of_range")],
        ),
    ],
)
def test_each_rule_broken_on_update_is_a_422_and_nothing_changes(
    hooks: Hooks, employer: Account, body: dict[str, Any], expected: list[tuple[str, str]]
) -> None:
    created = register(hooks, employer.key, description="kept")
    path = f"{V}/webhooks/{created['id']}"
    assert entries(hooks.api.put(path, key=employer.key, json=body)) == expected
    after = hooks.api.get(path, key=employer.key).json
    assert after == {k: v for k, v in created.items() if k != "secret"}


def test_disabling_stops_new_deliveries_and_re_enabling_restores_them(
    hooks: Hooks, employer: Account
) -> None:
    created = register(hooks, employer.key)
    path = f"{V}/webhooks/{created['id']}"
    assert hooks.api.put(path, key=employer.key, json={"status": "disabled"}).json["status"] == (
        "disabled"
    )
    with hooks.sessions() as s:
        webhook_messages.emit(s, employer.id, "job.expired", {"id": 1}, now=utcnow())
        assert s.scalars(select(WebhookDelivery)).all() == []
    assert hooks.api.put(path, key=employer.key, json={"status": "enabled"}).json["status"] == (
        "enabled"
    )
    with hooks.sessions() as s:
        webhook_messages.emit(s, employer.id, "job.expired", {"id": 1}, now=utcnow())
        [delivery] = s.scalars(select(WebhookDelivery)).all()
        assert delivery.endpoint_id == created["id"]
        endpoint = s.get(WebhookEndpoint, created["id"])
        assert endpoint is not None and endpoint.disabled_reason is None


def test_delete_takes_the_deliveries_with_it(hooks: Hooks, employer: Account) -> None:
    created = register(hooks, employer.key)
    kept = register(hooks, employer.key)
    test = hooks.api.post(f"{V}/webhooks/{created['id']}/test", key=employer.key)
    with hooks.sessions() as s:  # one in flight: claimed by a worker
        s.execute(update(WebhookDelivery).values(status="sending", attempts=1))
        webhook_messages.emit(s, employer.id, "job.expired", {"id": 1}, now=utcnow())
        s.commit()
    path = f"{V}/webhooks/{created['id']}"
    assert hooks.api.delete(path, key=employer.key).status_code == 204
    assert hooks.api.get(path, key=employer.key).status_code == 404
    assert hooks.api.delete(path, key=employer.key).status_code == 404
    with hooks.sessions() as s:
        left = s.scalars(select(WebhookDelivery.endpoint_id)).all()
        assert left == [kept["id"]]  # the worker's claimed row is gone: nothing to send
        assert test.json["id"] in s.scalars(select(WebhookMessage.message_id)).all()


# ------------------------------------------------------------------------ secret rotation


def test_rotation_signs_with_both_secrets_for_24_hours(hooks: Hooks, employer: Account) -> None:
    created = register(hooks, employer.key)
    rotated = hooks.api.post(f"{V}/webhooks/{created['id']}/secret", key=employer.key)
    assert rotated.status_code == 200 and list(rotated.json) == ["secret"]
    new = rotated.json["secret"]
    assert SECRET.fullmatch(new) and new != created["secret"]
    with hooks.sessions() as s:
        row = s.get(WebhookEndpoint, created["id"])
        assert row is not None and new not in row.secret
        now = utcnow()
        assert secrets.signing_secrets(row, now, KEY) == [new, created["secret"]]
        later = now + timedelta(hours=24, seconds=1)
        assert secrets.signing_secrets(row, later, KEY) == [new]


def test_rotating_twice_keeps_the_secret_just_replaced(hooks: Hooks, employer: Account) -> None:
    created = register(hooks, employer.key)
    path = f"{V}/webhooks/{created['id']}/secret"
    second = hooks.api.post(path, key=employer.key).json["secret"]
    third = hooks.api.post(path, key=employer.key).json["secret"]
    with hooks.sessions() as s:
        row = s.get(WebhookEndpoint, created["id"])
        assert secrets.signing_secrets(row, utcnow(), KEY) == [third, second]


# --------------------------------------------------------------------------------- testing


def test_test_emits_to_this_endpoint_only_and_enqueues_after_commit(
    hooks: Hooks, employer: Account
) -> None:
    tested = register(hooks, employer.key, events=["job.expired"])
    other = register(hooks, employer.key, events=["*"])
    result = hooks.api.post(f"{V}/webhooks/{tested['id']}/test", key=employer.key)
    assert result.status_code == 202
    message = result.json["id"]
    assert result.json == {"id": message} and message.startswith("msg_")
    with hooks.sessions() as s:
        [delivery] = s.scalars(select(WebhookDelivery)).all()
        assert delivery.endpoint_id == tested["id"] != other["id"]
        row = s.scalars(select(WebhookMessage)).one()
        assert row.message_id == message
        assert json.loads(row.payload)["data"] == {"webhookId": tested["id"]}
        assert json.loads(row.payload)["type"] == "webhook.test"
    assert hooks.enqueued == [[delivery.id]]


def test_testing_a_disabled_endpoint_is_409(hooks: Hooks, employer: Account) -> None:
    created = register(hooks, employer.key)
    hooks.api.put(f"{V}/webhooks/{created['id']}", key=employer.key, json={"status": "disabled"})
    result = hooks.api.post(f"{V}/webhooks/{created['id']}/test", key=employer.key)
    assert (result.status_code, result.json["code"]) == (409, "webhook_disabled")
    with hooks.sessions() as s:
        assert s.scalars(select(WebhookMessage)).all() == []
    assert hooks.enqueued == []


@pytest.mark.parametrize("action", ["secret", "test"])
def test_action_endpoints_take_no_body_but_one_sent_must_be_json(
    hooks: Hooks, employer: Account, action: str
) -> None:
    created = register(hooks, employer.key)
    path = f"{V}/webhooks/{created['id']}/{action}"
    plain = hooks.api.post(
        path, key=employer.key, body="hello", headers={"Content-Type": "text/plain"}
    )
    assert (plain.status_code, plain.json["code"]) == (415, "unsupported_media_type")
    ignored = hooks.api.post(path, key=employer.key, json={"anything": ["at", "all"]})
    assert ignored.status_code in (200, 202)
    bare = hooks.api.post(path, key=employer.key)
    assert bare.status_code in (200, 202)


# ---------------------------------------------------------------------- deliveries and retry


def fail(hooks: Hooks, message_id: str, **values: Any) -> None:
    with hooks.sessions() as s:
        pk = select(WebhookMessage.id).where(WebhookMessage.message_id == message_id)
        values = {"status": "failed", "attempts": 8, "step": 7, "due_at": None, **values}
        s.execute(
            update(WebhookDelivery)
            .where(WebhookDelivery.message_pk == pk.scalar_subquery())
            .values(finished_at=utcnow(), last_status_code=500, last_error="HTTP 500", **values)
        )
        s.commit()


def test_the_deliveries_log_is_newest_first_with_its_shape(hooks: Hooks, employer: Account) -> None:
    created = register(hooks, employer.key)
    path = f"{V}/webhooks/{created['id']}"
    first = hooks.api.post(f"{path}/test", key=employer.key).json["id"]
    second = hooks.api.post(f"{path}/test", key=employer.key).json["id"]
    fail(hooks, first)
    page = hooks.api.get(f"{path}/deliveries", key=employer.key)
    assert page.headers["cache-control"] == "no-store"
    data = page.json["data"]
    assert [d["id"] for d in data] == [second, first]
    assert data[1] == {
        "id": first,
        "event": "webhook.test",
        "status": "failed",
        "attempts": 8,
        "lastStatusCode": 500,
        "lastError": "HTTP 500",
        "createdAt": data[1]["createdAt"],
        "deliveredAt": None,
    }
    failed = hooks.api.get(f"{path}/deliveries?status=failed", key=employer.key).json
    assert [d["id"] for d in failed["data"]] == [first]
    assert failed["paging"]["total"] == 1
    paged = hooks.api.get(f"{path}/deliveries?pageSize=1&status=pending", key=employer.key).json
    assert paged["paging"]["total"] == 1 and paged["paging"]["next"] is None
    bad = hooks.api.get(f"{path}/deliveries?status=sent", key=employer.key)
    assert (bad.status_code, bad.json["code"]) == (400, "invalid_query")
    assert bad.json["errors"][0]["field"] == "status"


def test_retry_sends_a_failed_delivery_again_from_the_start_of_the_schedule(
    hooks: Hooks, employer: Account
) -> None:
    created = register(hooks, employer.key)
    path = f"{V}/webhooks/{created['id']}"
    message = hooks.api.post(f"{path}/test", key=employer.key).json["id"]
    fail(hooks, message)
    hooks.enqueued.clear()
    result = hooks.api.post(f"{path}/deliveries/{message}/retry", key=employer.key)
    assert (result.status_code, result.json) == (202, {"id": message})
    with hooks.sessions() as s:
        d = s.scalars(select(WebhookDelivery)).one()
        assert (d.status, d.attempts, d.step, d.finished_at) == ("pending", 8, 0, None)
        assert d.due_at is not None and abs(d.due_at - utcnow()) < timedelta(minutes=1)
        assert d.lease_until == d.due_at  # marked enqueued: no hand-on sends it again
    assert hooks.enqueued == [[d.id]]
    again = hooks.api.post(f"{path}/deliveries/{message}/retry", key=employer.key)
    assert (again.status_code, again.json["code"]) == (409, "delivery_not_failed")


def test_tests_and_retries_are_throttled_per_endpoint(
    settings: Settings, sessions: sessionmaker[Session], clock: Clock, employer: Account
) -> None:
    """C12: WEBHOOK_TEST_RATE_LIMIT counts an endpoint's tests and retries together; over
    it, 429 rate_limited with Retry-After, and nothing is written or enqueued."""
    now = [1000.0]  # 20 s before the window of a minute ends
    limiter = ratelimit.MemoryLimiter(3, 60, clock=lambda: now[0])
    hooks = build(settings, sessions, clock, resends=limiter)
    first, other = register(hooks, employer.key), register(hooks, employer.key)
    path = f"{V}/webhooks/{first['id']}"
    messages = [hooks.api.post(f"{path}/test", key=employer.key).json["id"] for _ in range(2)]
    fail(hooks, messages[0])
    fail(hooks, messages[1])
    retried = hooks.api.post(f"{path}/deliveries/{messages[0]}/retry", key=employer.key)
    assert retried.status_code == 202  # the third of three
    hooks.enqueued.clear()
    for over in (
        hooks.api.post(f"{path}/test", key=employer.key),
        hooks.api.post(f"{path}/deliveries/{messages[1]}/retry", key=employer.key),
    ):
        assert (over.status_code, over.json["code"]) == (429, "rate_limited")
        assert over.headers["retry-after"] == "20"
        assert over.json["detail"] == "Too many tests and retries for this webhook; retry in 20 s."
    assert hooks.enqueued == []
    with hooks.sessions() as s:
        assert s.scalar(select(func.count()).select_from(WebhookMessage)) == 2
        left = s.scalars(select(WebhookDelivery.status).order_by(WebhookDelivery.id)).all()
        assert left == ["pending", "failed"]
    assert hooks.api.post(f"{V}/webhooks/{other['id']}/test", key=employer.key).status_code == 202
    now[0] = 1020.0  # the next window
    assert hooks.api.post(f"{path}/test", key=employer.key).status_code == 202


@pytest.mark.parametrize("status", ["pending", "sending", "succeeded", "cancelled"])
def test_retrying_a_delivery_that_has_not_failed_is_409(
    hooks: Hooks, employer: Account, status: str
) -> None:
    created = register(hooks, employer.key)
    path = f"{V}/webhooks/{created['id']}"
    message = hooks.api.post(f"{path}/test", key=employer.key).json["id"]
    fail(hooks, message, status=status)
    result = hooks.api.post(f"{path}/deliveries/{message}/retry", key=employer.key)
    assert (result.status_code, result.json["code"]) == (409, "delivery_not_failed")
    with hooks.sessions() as s:
        assert s.scalars(select(WebhookDelivery.status)).one() == status


def test_retrying_an_unknown_message_is_404(hooks: Hooks, employer: Account) -> None:
    created = register(hooks, employer.key)
    path = f"{V}/webhooks/{created['id']}/deliveries/msg_nothing/retry"
    assert hooks.api.post(path, key=employer.key).status_code == 404


# ------------------------------------------------------------------------------ isolation


def test_another_employers_endpoint_and_deliveries_are_404(
    hooks: Hooks, employer: Account, make_employer: Any
) -> None:
    other = make_employer("Birch Ltd")
    theirs = register(hooks, other.key)
    path = f"{V}/webhooks/{theirs['id']}"
    message = hooks.api.post(f"{path}/test", key=other.key).json["id"]
    fail(hooks, message)
    me = employer.key
    answers = [
        hooks.api.get(path, key=me),
        hooks.api.put(path, key=me, json={"description": "mine now"}),
        hooks.api.post(f"{path}/secret", key=me),
        hooks.api.post(f"{path}/test", key=me),
        hooks.api.get(f"{path}/deliveries", key=me),
        hooks.api.post(f"{path}/deliveries/{message}/retry", key=me),
        hooks.api.delete(path, key=me),
        hooks.api.get(f"{V}/webhooks/abc", key=me),
        hooks.api.get(f"{V}/webhooks/2147483648", key=me),
    ]
    assert [(a.status_code, a.json["code"]) for a in answers] == [(404, "not_found")] * 9
    assert hooks.api.get(f"{V}/webhooks", key=me).json["data"] == []
    # Nothing of theirs changed.
    after = hooks.api.get(path, key=other.key).json
    assert after == {k: v for k, v in theirs.items() if k != "secret"}
    with hooks.sessions() as s:
        assert s.scalars(select(WebhookDelivery.status)).all() == ["failed"]


def test_my_delivery_is_not_retried_through_another_of_my_endpoints(
    hooks: Hooks, employer: Account
) -> None:
    one, two = register(hooks, employer.key), register(hooks, employer.key)
    message = hooks.api.post(f"{V}/webhooks/{one['id']}/test", key=employer.key).json["id"]
    fail(hooks, message)
    path = f"{V}/webhooks/{two['id']}/deliveries/{message}/retry"
    assert hooks.api.post(path, key=employer.key).status_code == 404


def test_without_a_key_a_registration_is_refused_and_nothing_written(
    settings: Settings,
    sessions: sessionmaker[Session],
    clock: Clock,
    employer: Account,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Neither JOBPOST_SECRET_KEY nor the key file: no secret can be stored. The client gets
    a 503 secret_key_missing naming no setting, before any URL is resolved; the log names
    the variable (C1, C12)."""
    resolved: list[str] = []

    def resolve(host: str, port: int, timeout: float) -> list[str]:
        resolved.append(host)
        return resolver(HOSTS)(host, port, timeout)

    policy = webhooks.UrlPolicy(resolve=resolve)
    app = create_app(settings, sessions, Collaborators(url_policy=policy), today=clock)
    result = Api(app).post(f"{V}/webhooks", key=employer.key, json={"url": URL, "events": ["*"]})
    assert (result.status_code, result.json["code"]) == (503, "secret_key_missing")
    assert result.headers["Retry-After"] == "60"
    assert "JOBPOST_SECRET_KEY" not in result.text and resolved == []
    assert any("JOBPOST_SECRET_KEY" in r.getMessage() for r in caplog.records)
    with sessions() as s:
        assert s.scalars(select(WebhookEndpoint)).all() == []
