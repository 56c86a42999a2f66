"""The public application form's one-time token (C10), the form's Idempotency-Key, on committed
databases of this module's own (SQLite and PostgreSQL): one per view of the form, a double or
concurrent submit makes one application, a form sent back with errors keeps its token."""

from __future__ import annotations

from tests.api.idempotency_service import (
    APPLICANT,
    THREADS,
    TOKEN,
    Service,
    form_token,
    fresh,
    in_parallel,
    replayed,
    submit,
)
from tests.api.idempotency_service import database as database
from tests.api.idempotency_service import service as service
from tests.api.idempotency_service import sessions as sessions

# --- the public form's one-time token --------------------------------------------------------


def test_each_view_of_the_form_has_its_own_token(service: Service) -> None:
    job_id = service.job()
    one, two = form_token(service, job_id), form_token(service, job_id)
    assert one != two and len(one) >= 22
    url_job = service.job(applicantRoutingType={"id": 2}, applicationUrl="https://maple.test/a")
    page = service.pages.simulate_get(f"/jobs/{url_job}")
    assert not TOKEN.findall(page.text) and "cache-control" not in page.headers


def test_a_double_submit_of_the_form_makes_one_application(service: Service) -> None:
    job_id = service.job()
    fields = {**APPLICANT, "idempotencyKey": form_token(service, job_id)}
    first = submit(service, job_id, fields)
    assert (
        first.status_code == 303 and first.headers["location"] == f"/jobs/{job_id}/applied?lang=en"
    )
    replayed(first, submit(service, job_id, fields))
    assert len(service.applications(job_id)) == 1 and len(service.enqueued) == 1
    # Sent back with other answers (the page kept in the browser's history): not applied.
    again = submit(service, job_id, {**fields, "coverLetter": "Another letter."})
    assert again.status_code == 422 and "This form was sent already" in again.text
    # A new view of the form applies again.
    fresh(submit(service, job_id, {**fields, "idempotencyKey": form_token(service, job_id)}), 303)
    assert len(service.applications(job_id)) == 2


def test_concurrent_submits_of_the_form_make_one_application(service: Service) -> None:
    job_id = service.job()
    fields = {**APPLICANT, "idempotencyKey": form_token(service, job_id)}
    results = in_parallel(THREADS, lambda: submit(service, job_id, fields))
    assert {r.status_code for r in results} <= {303, 409}
    for result in results:
        if result.status_code == 409:
            assert result.headers["retry-after"] == "1"
            assert "Your application is being sent" in result.text
    assert len(service.applications(job_id)) == 1 and len(service.enqueued) == 1


def test_a_form_sent_back_with_errors_keeps_its_token_and_then_applies_once(
    service: Service,
) -> None:
    job_id = service.job()
    token = form_token(service, job_id)
    invalid = submit(service, job_id, {**APPLICANT, "email": "nope", "idempotencyKey": token})
    assert invalid.status_code == 422 and TOKEN.findall(invalid.text) == [token]
    fields = {**APPLICANT, "idempotencyKey": token}
    first = submit(service, job_id, fields)
    assert first.status_code == 303
    replayed(first, submit(service, job_id, fields))
    assert len(service.applications(job_id)) == 1


def test_a_form_without_a_token_or_with_a_malformed_one(service: Service) -> None:
    job_id = service.job()
    for _ in range(2):  # a page from before the tokens: as before, each submit applies
        fresh(submit(service, job_id, APPLICANT), 303)
    assert len(service.applications(job_id)) == 2
    bad = submit(service, job_id, {**APPLICANT, "idempotencyKey": "k" * 256})
    assert bad.status_code == 400 and "The form could not be read" in bad.text
    assert len(service.applications(job_id)) == 2


def test_a_form_that_cannot_be_read_counts_against_the_rate_first(service: Service) -> None:
    """C1's order without a key: 429 before 400. The form is read before its token is known,
    so an unreadable one is checked against the rate first; a readable one is answered by
    its key before the rate (C10)."""
    job_id = service.job()
    fields = {**APPLICANT, "idempotencyKey": form_token(service, job_id)}
    first = submit(service, job_id, fields)
    assert first.status_code == 303
    service.gate.wait = 30
    unreadable = service.pages.simulate_post(
        f"/jobs/{job_id}/apply",
        body=b"no parts here",
        headers={"Content-Type": "multipart/form-data; boundary=nothing"},
    )
    assert unreadable.status_code == 429 and unreadable.headers["retry-after"] == "30"
    replayed(first, submit(service, job_id, fields))
    assert submit(service, job_id, APPLICANT).status_code == 429  # no token: no key
