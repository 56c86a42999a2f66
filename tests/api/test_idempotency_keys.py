"""Idempotency-Key (C10) on POST /jobs and POST /jobs/{id}/applications, on committed databases
of this module's own (SQLite and PostgreSQL): the key itself, replays byte for byte, the scope
of a key, which answer comes first, and the canonical form requests are compared in."""

from __future__ import annotations

import json
from decimal import Decimal

import pytest
from sqlalchemy import func, select

from api.idempotency import canonical
from models.db.entities import IdempotencyKey
from tests.api.idempotency_service import (
    APPLICANT,
    HEADER,
    PDF,
    Service,
    apply_path,
    fresh,
    multipart,
    replayed,
)
from tests.api.idempotency_service import database as database
from tests.api.idempotency_service import service as service
from tests.api.idempotency_service import sessions as sessions
from tests.conftest import Account
from tests.factories import JOBS, job_body, problem

# --- the key itself ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "key",
    ["", "k" * 256, "tab\there", "bell\x07", "del\x7f", "clé", "naïve-ключ"],
    ids=["empty", "256-chars", "tab", "control", "del", "latin-1", "not-latin-1"],
)
def test_a_malformed_key_is_400_and_nothing_is_done(service: Service, key: str) -> None:
    job_id = service.job()
    before = service.jobs()
    problem(service.post_job(key), 400, "invalid_idempotency_key")
    assert service.jobs() == before
    problem(service.apply(job_id, key), 400, "invalid_idempotency_key")
    assert service.applications(job_id) == []


@pytest.mark.parametrize("key", ["k" * 255, "x", " space inside ~!", '"quoted"'])
def test_a_key_of_1_to_255_printable_ascii_characters_is_taken(service: Service, key: str) -> None:
    first = service.post_job(key)
    fresh(first, 201)
    replayed(first, service.post_job(key))
    assert service.jobs() == 1


# --- replays ---------------------------------------------------------------------------------


def test_a_retried_job_post_is_replayed_byte_for_byte_and_creates_nothing(
    service: Service,
) -> None:
    first = service.post_job("job-1")
    fresh(first, 201)
    assert first.headers["location"] and first.headers["etag"]
    # The job changes since; the replay is the recorded answer all the same.
    job_id = first.json["id"]
    changed = service.api.put(f"{JOBS}/{job_id}", key=service.employer.key, json={"title": "New"})
    assert changed.status_code == 200
    again = service.post_job("job-1")
    replayed(first, again)
    assert again.json["title"] == "Senior Baker"
    assert service.jobs() == 1


def test_a_retried_application_is_replayed_and_sends_one_copy(service: Service) -> None:
    job_id = service.job()
    first = service.apply(job_id, "apply-1")
    fresh(first, 202)
    replayed(first, service.apply(job_id, "apply-1"))
    assert service.applications(job_id) == [first.json["id"]]
    assert service.enqueued == [first.json["id"]]


def test_json_is_compared_as_values(service: Service) -> None:
    body = job_body(salary={"amount": 60000, "period": {"id": 1}})
    first = service.post_job("values", json.dumps(body).encode())
    fresh(first, 201)
    reordered = dict(reversed(list(body.items())))
    reordered["salary"] = {"period": {"id": 1}, "amount": Decimal("60000.00")}
    text = json.dumps(reordered, indent=4, default=str).replace('"60000.00"', "6.0000e4")
    replayed(first, service.post_job("values", text.encode()))
    assert service.jobs() == 1


def test_query_parameters_count_in_any_order(service: Service) -> None:
    first = service.post_job("query", path=f"{JOBS}?b=2&a=1&a=3")
    fresh(first, 201)
    replayed(first, service.post_job("query", path=f"{JOBS}?a=1&b=2&a=3"))
    # All of them count: one more, or one fewer, is another request.
    for path in (f"{JOBS}?a=1&b=2", f"{JOBS}?a=1&b=2&a=3&dryRun=false", JOBS):
        problem(service.post_job("query", path=path), 422, "idempotency_key_reused")
    assert service.jobs() == 1


def test_a_multipart_application_is_compared_by_its_fields_and_files(service: Service) -> None:
    job_id = service.job()
    form = dict(APPLICANT, phone="+1 514 555 0199")
    first = service.apply(job_id, "form-1", multipart(form, ("cv.pdf", PDF)))
    fresh(first, 202)
    # Another boundary, other part headers, the parts in another order: the same request.
    again = multipart(
        dict(reversed(list(form.items()))),
        ("cv.pdf", PDF),
        boundary="AnotherBoundary42",
        part_type="text/plain; charset=utf-8",
    )
    replayed(first, service.apply(job_id, "form-1", again))
    for other in (
        multipart(form, ("cv.pdf", PDF + b"%")),  # the file's bytes
        multipart(form, ("resume.pdf", PDF)),  # its name
        multipart(dict(form, phone="+1 514 555 0100"), ("cv.pdf", PDF)),  # a value
        multipart(form),  # no file
    ):
        problem(service.apply(job_id, "form-1", other), 422, "idempotency_key_reused")
    # The same content as JSON is another request too.
    problem(service.apply(job_id, "form-1", form), 422, "idempotency_key_reused")
    assert service.applications(job_id) == [first.json["id"]]


def test_a_key_reused_for_a_different_request_is_422_without_errors(service: Service) -> None:
    fresh(service.post_job("reused"), 201)
    body = problem(
        service.post_job("reused", job_body(title="Pastry Chef")), 422, "idempotency_key_reused"
    )
    assert "errors" not in body
    job_id = service.job()
    fresh(service.apply(job_id, "reused-too"), 202)
    body = problem(
        service.apply(job_id, "reused-too", dict(APPLICANT, name="Ada")),
        422,
        "idempotency_key_reused",
    )
    assert "errors" not in body
    assert service.jobs() == 2 and len(service.applications(job_id)) == 1


# --- scopes ----------------------------------------------------------------------------------


def test_a_key_belongs_to_the_employer_for_jobs(service: Service) -> None:
    other = service.new_employer()
    fresh(service.post_job("shared"), 201)
    fresh(service.post_job("shared", account=other), 201)  # not a replay of the first
    problem(
        service.post_job("shared", job_body(title="Other"), account=other),
        422,
        "idempotency_key_reused",
    )
    assert service.jobs() == 1 and service.jobs(other) == 1


def test_a_key_belongs_to_the_job_for_applications(service: Service) -> None:
    one, two = service.job(), service.job()
    fresh(service.apply(one, "shared"), 202)
    fresh(service.apply(two, "shared"), 202)
    assert len(service.applications(one)) == len(service.applications(two)) == 1


def test_the_key_is_ignored_on_other_operations(service: Service) -> None:
    put = {"referenceId": "R-1", **job_body()}
    for _ in range(2):
        result = service.api.put(JOBS, key=service.employer.key, json=put, headers={HEADER: ""})
        assert result.status_code in (200, 201) and "idempotent-replayed" not in result.headers
    # A POST overridden as PUT is a PUT (C7): its key is not looked at either.
    override = {"X-HTTP-Method-Override": "PUT"}
    result = service.post_job("k" * 300, {**put, "title": "Baker"}, headers=override)
    assert result.status_code == 200 and result.json["title"] == "Baker"
    with service.sessions() as s:
        assert (
            s.scalar(
                select(func.count())
                .select_from(IdempotencyKey)
                .where(
                    IdempotencyKey.scope_id == service.employer.id,
                    IdempotencyKey.scope == "employer",
                )
            )
            == 0
        )


# --- the order of answers ------------------------------------------------------------------------


def test_401_and_the_body_come_before_the_keys_answers(service: Service) -> None:
    fresh(service.post_job("order"), 201)
    stranger = Account(service.employer.id, "x", "not-a-key")
    problem(service.post_job("order", account=stranger), 401, "unauthorized")
    problem(service.post_job("order", b'{"title": '), 400, "malformed_json")
    problem(
        service.post_job("order", headers={"Content-Type": "text/plain"}),
        415,
        "unsupported_media_type",
    )


def test_413_and_415_come_before_a_malformed_key_and_the_key_before_the_body(
    service: Service,
) -> None:
    big = b'{"title": "' + b"x" * (1024 * 1024) + b'"}'
    problem(service.post_job("", big), 413, "payload_too_large")
    problem(
        service.post_job("", headers={"Content-Type": "text/plain"}), 415, "unsupported_media_type"
    )
    problem(service.post_job("", b'{"title": '), 400, "invalid_idempotency_key")
    job_id = service.job()
    result = service.api.post(
        apply_path(job_id), body=b"x", headers={HEADER: "", "Content-Type": "text/plain"}
    )
    problem(result, 415, "unsupported_media_type")


def test_a_retry_is_replayed_where_a_first_try_would_now_be_refused(service: Service) -> None:
    """C10's order: the key's answers come before 429, 404, 409 and 422."""
    first = service.post_job("job", job_body(referenceId="REF-1", status="active"))
    fresh(first, 201)
    job_id = first.json["id"]
    applied = service.apply(job_id, "apply")
    fresh(applied, 202)
    archive = service.api.put(
        f"{JOBS}/{job_id}", key=service.employer.key, json={"status": "archived"}
    )
    assert archive.status_code == 200
    service.gate.wait = 30  # the applicant's address is over its limit
    replayed(applied, service.apply(job_id, "apply"))
    problem(service.apply(job_id, "another"), 429, "rate_limited")
    service.gate.wait = None
    problem(service.apply(job_id, "another"), 404, "not_found")  # archived: not open
    problem(
        service.apply(job_id, "apply", dict(APPLICANT, name="Ada")), 422, "idempotency_key_reused"
    )
    replayed(
        first, service.post_job("job", job_body(referenceId="REF-1", status="active"))
    )  # not a 409
    deleted = service.api.delete(f"{JOBS}/{job_id}", key=service.employer.key)
    assert deleted.status_code == 204
    replayed(first, service.post_job("job", job_body(referenceId="REF-1", status="active")))
    replayed(applied, service.apply(job_id, "apply"))  # the job is gone: not a 404
    assert service.applications(job_id) == [] and service.enqueued == [applied.json["id"]]


# --- the canonical form -----------------------------------------------------------------------


def test_the_canonical_form_compares_json_as_values() -> None:
    assert canonical({"b": [1, "é"], "a": None}) == canonical({"a": None, "b": [1, "é"]})
    numbers = [1, Decimal("1.0"), Decimal("1e0"), Decimal("0.10e1")]
    assert len({canonical(n) for n in numbers}) == 1
    assert canonical(Decimal("1.5")) == canonical(Decimal("1.50")) != canonical(Decimal("1.05"))
    assert canonical(Decimal("-0.0")) == canonical(0)
    assert canonical(True) != canonical(1)
    assert canonical(10**40) != canonical(10**40 + 1)
    exact = Decimal("1.00000000000000000000000000000001")  # past the default precision
    assert canonical(exact) != canonical(1)
    assert len(canonical(Decimal("1e999999999"))) < 20  # never written out digit by digit
