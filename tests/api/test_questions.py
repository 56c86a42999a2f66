"""C21 Screening questions: the job's questions in the write and read shapes (symmetry, the
list element, the change feed, sync items, job events), their rules; the applicant's answers
checked, knock-outs stored and marked, emailed or not by the employer's choice; the answers in
the application's shape, its webhook, the export and the email copy."""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

import pytest
from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from api import ratelimit, representations
from api.app import Collaborators, WsgiApp, create_app
from models.applications import privacy
from models.core.dates import utcnow
from models.core.settings import Settings
from models.db.entities import Application, OutboxEntry, WebhookEndpoint, WebhookMessage
from models.jobs import events
from tests.api.test_syncs import item, items_of, run_it, started
from tests.conftest import Api
from tests.factories import JOBS, create_job, entries, read_shape

API = "/api/v1.1"

QUESTIONS: list[dict[str, Any]] = [
    {
        "id": "workAuth",
        "type": "yesNo",
        "text": "Are you legally entitled to work in Canada?",
        "translation": "Êtes-vous légalement autorisé à travailler au Canada?",
        "required": True,
        "knockOut": [False],
    },
    {
        "id": "shift",
        "type": "singleChoice",
        "text": "Which shift can you work?",
        "translation": "Quel quart pouvez-vous faire?",
        "required": True,
        "choices": [
            {"id": "day", "text": "Day", "translation": "Jour"},
            {"id": "night", "text": "Night", "translation": "Nuit"},
        ],
        "knockOut": ["night"],
    },
    {
        "id": "ovens",
        "type": "multiChoice",
        "text": "Which ovens have you used?",
        "translation": None,
        "required": False,
        "choices": [
            {"id": "deck", "text": "Deck", "translation": None},
            {"id": "rack", "text": "Rack", "translation": None},
            {"id": "wood", "text": "Wood-fired", "translation": "À bois"},
        ],
        "knockOut": [],
    },
    {
        "id": "why",
        "type": "text",
        "text": "Why bread?",
        "translation": "Pourquoi le pain?",
        "required": False,
        "maxLength": 20,
    },
    {
        "id": "years",
        "type": "number",
        "text": "Years of baking",
        "translation": None,
        "required": False,
        "min": 0,
        "max": 60,
    },
]


@pytest.fixture
def enqueued() -> list[int]:
    return []


@pytest.fixture
def app(
    settings: Settings, sessions: sessionmaker[Session], clock: Any, enqueued: list[int]
) -> WsgiApp:
    parts = Collaborators(
        enqueue=lambda app_id, rid: enqueued.append(app_id), limiter=ratelimit.Unlimited()
    )
    return create_app(settings, sessions, parts, today=clock)


def asking(api: Any, employer: Any, **overrides: Any) -> dict[str, Any]:
    return create_job(api, employer, status="active", questions=QUESTIONS, **overrides)


# --- the job's shapes -------------------------------------------------------------------------


def test_questions_are_read_as_written_and_default_to_none(api: Any, employer: Any) -> None:
    assert create_job(api, employer)["questions"] == []
    job = asking(api, employer)
    assert job["questions"] == QUESTIONS
    assert api.get(f"{JOBS}/{job['id']}", key=employer.key).json == job


def test_the_defaults_of_a_question_are_filled_in_as_stored(api: Any, employer: Any) -> None:
    sent = [
        {"id": "a", "type": "yesNo", "text": " Over 18? "},
        {"id": "b", "type": "text", "text": "Tell us"},
        {"id": "c", "type": "number", "text": "Hours"},
    ]
    job = create_job(api, employer, questions=sent)
    assert job["questions"] == [
        {
            "id": "a",
            "type": "yesNo",
            "text": "Over 18?",
            "translation": None,
            "required": False,
            "knockOut": [],
        },
        {
            "id": "b",
            "type": "text",
            "text": "Tell us",
            "translation": None,
            "required": False,
            "maxLength": 1000,
        },
        {
            "id": "c",
            "type": "number",
            "text": "Hours",
            "translation": None,
            "required": False,
            "min": None,
            "max": None,
        },
    ]


def test_symmetry_a_get_result_posts_an_equal_job_and_put_back_changes_nothing(
    api: Any, employer: Any
) -> None:
    """C4's symmetry rule with C21's member, and C10: the stored job PUT back is no write."""
    job = asking(api, employer)
    fetched = api.get(f"{JOBS}/{job['id']}", key=employer.key).json
    body = {k: v for k, v in fetched.items() if k not in ("id", "referenceId")}
    again = api.post(JOBS, json=body, key=employer.key)
    assert again.status_code == 201, again.text
    strip = {"id", "referenceId", "updatedAt", "warnings"}
    assert {k: v for k, v in again.json.items() if k not in strip} == {
        k: v for k, v in fetched.items() if k not in strip
    }
    back = api.put(f"{JOBS}/{job['id']}", json=fetched, key=employer.key)
    assert back.status_code == 200 and read_shape(back.json) == fetched  # updatedAt kept
    assert back.headers["etag"] == api.get(f"{JOBS}/{job['id']}", key=employer.key).headers["etag"]


def test_a_put_replaces_the_questions_and_null_or_empty_removes_them(
    api: Any, employer: Any
) -> None:
    job = asking(api, employer)
    path = f"{JOBS}/{job['id']}"
    one = api.put(path, json={"questions": QUESTIONS[:1]}, key=employer.key)
    assert one.status_code == 200 and one.json["questions"] == QUESTIONS[:1]
    kept = api.put(path, json={"title": "Other"}, key=employer.key)
    assert kept.json["questions"] == QUESTIONS[:1]
    empties: tuple[Any, ...] = (None, [])
    for empty in empties:
        api.put(path, json={"questions": QUESTIONS}, key=employer.key)
        gone = api.put(path, json={"questions": empty}, key=employer.key)
        assert gone.status_code == 200 and gone.json["questions"] == []


def test_the_list_element_the_change_feed_and_job_events_carry_the_questions(
    api: Any, employer: Any, session: Session
) -> None:
    job = asking(api, employer)
    (header,) = api.get(JOBS, key=employer.key).json["data"]
    assert header["questions"] == QUESTIONS
    # job events (C12) render the list element: the same member
    described = events.headers(session, [job["id"]])
    event = representations.job_event(*described[job["id"]], None)
    assert event["questions"] == QUESTIONS
    assert json.loads(json.dumps(event, default=str)) == header


def test_the_change_feed_carries_the_questions(
    employer: Any, settings: Settings, sessions: sessionmaker[Session], clock: Any
) -> None:
    """C10's feed is the list element walked by updatedAt: past the lag, the job shows."""
    ahead = Collaborators(now=lambda: utcnow() + timedelta(seconds=60))
    api = Api(create_app(settings, sessions, ahead, today=clock))
    asking(api, employer)
    feed = api.get(JOBS, key=employer.key, params={"sort": "updatedAt"})
    assert feed.status_code == 200, feed.text
    assert [j["questions"] for j in feed.json["data"]] == [QUESTIONS]


def test_a_sync_item_writes_the_questions_and_a_bad_one_names_the_question(
    api: Any, employer: Any, sessions: Any, settings: Settings
) -> None:
    bad = [{**QUESTIONS[0], "type": "maybe"}]
    run = started(
        api,
        employer,
        {"mode": "upsert", "jobs": [item("Q-1", questions=QUESTIONS), item("Q-2", questions=bad)]},
    )
    assert run_it(sessions, settings, run["id"]) == "completed"
    done = {i["referenceId"]: i for i in items_of(api, employer, run["id"])}
    assert done["Q-1"]["outcome"] == "created"
    assert [(e["field"], e["code"]) for e in done["Q-2"]["errors"]] == [
        ("questions[0].type", "out_of_range")
    ]
    job = api.get(f"{JOBS}/{done['Q-1']['jobId']}", key=employer.key).json
    assert job["questions"] == QUESTIONS


def _choice(**kw: Any) -> dict[str, Any]:
    return {**QUESTIONS[1], **kw}


@pytest.mark.parametrize(
    ("questions", "expected"),
    [
        ("x", [("questions", "invalid_type")]),
        ([QUESTIONS[0]] * 11, [("questions", "too_many")]),
        (["x"], [("questions[0]", "invalid_type")]),
        (
            [{}],
            [
                ("questions[0].id", "required"),
                ("questions[0].type", "required"),
                ("questions[0].text", "required"),
            ],
        ),
        ([{**QUESTIONS[0], "id": "a b"}], [("questions[0].id", "invalid_format")]),
        ([{**QUESTIONS[0], "id": "x" * 41}], [("questions[0].id", "too_long")]),
        ([QUESTIONS[0], QUESTIONS[0]], [("questions[1].id", "duplicate")]),
        ([{**QUESTIONS[0], "type": "essay"}], [("questions[0].type", "out_of_range")]),
        ([{**QUESTIONS[0], "text": "  "}], [("questions[0].text", "too_short")]),
        ([{**QUESTIONS[0], "text": "x" * 501}], [("questions[0].text", "too_long")]),
        ([{**QUESTIONS[0], "translation": 5}], [("questions[0].translation", "invalid_type")]),
        ([{**QUESTIONS[0], "required": "yes"}], [("questions[0].required", "invalid_type")]),
        ([{**QUESTIONS[0], "knockOut": ["no"]}], [("questions[0].knockOut[0]", "invalid_type")]),
        ([{**QUESTIONS[0], "choices": []}], [("questions[0].choices", "not_applicable")]),
        (
            [_choice(choices=None)],
            [("questions[0].choices", "required"), ("questions[0].knockOut[0]", "unknown_choice")],
        ),
        (
            [_choice(choices=[{"id": "day", "text": "Day"}])],
            [("questions[0].choices", "too_few"), ("questions[0].knockOut[0]", "unknown_choice")],
        ),
        (
            [
                _choice(
                    choices=[{"id": "day", "text": "D"}, {"id": "day", "text": "E"}], knockOut=[]
                )
            ],
            [("questions[0].choices[1].id", "duplicate")],
        ),
        (
            [_choice(choices=[{"id": "a", "text": ""}, {"text": "b"}], knockOut=[])],
            [
                ("questions[0].choices[0].text", "too_short"),
                ("questions[0].choices[1].id", "required"),
            ],
        ),
        ([_choice(knockOut=["day", "night"])], [("questions[0].knockOut", "too_many")]),
        ([_choice(knockOut=["dusk"])], [("questions[0].knockOut[0]", "unknown_choice")]),
        ([_choice(knockOut=["night", "night"])], [("questions[0].knockOut[1]", "duplicate")]),
        ([{**QUESTIONS[3], "knockOut": ["x"]}], [("questions[0].knockOut", "not_applicable")]),
        ([{**QUESTIONS[3], "maxLength": 0}], [("questions[0].maxLength", "out_of_range")]),
        ([{**QUESTIONS[3], "maxLength": "5"}], [("questions[0].maxLength", "invalid_type")]),
        ([{**QUESTIONS[4], "min": 5, "max": 4}], [("questions[0].max", "out_of_range")]),
        ([{**QUESTIONS[4], "min": True}], [("questions[0].min", "invalid_type")]),
        ([{**QUESTIONS[4], "max": 10**9}], [("questions[0].max", "out_of_range")]),
    ],
)
def test_each_rule_broken_names_the_question_and_its_member(
    api: Any, employer: Any, questions: Any, expected: list[tuple[str, str]]
) -> None:
    result = api.post(JOBS, json=_body(questions), key=employer.key)
    assert sorted(entries(result)) == sorted(expected)


def _body(questions: Any) -> dict[str, Any]:
    from tests.factories import job_body

    return job_body(questions=questions)


# --- the applicant's answers ------------------------------------------------------------------

GOOD = {"workAuth": True, "shift": "day", "ovens": ["wood", "deck"], "why": "Crust", "years": 4.5}


def applying(api: Any, job_id: int, answers: Any, **kw: Any) -> Any:
    body = {"name": "Ada", "email": "ada@example.com", "answers": answers, **kw}
    return api.post(f"{API}/jobs/{job_id}/applications", json=body)


def shown(api: Any, employer: Any, app_id: int) -> dict[str, Any]:
    result = api.get(f"{API}/applications/{app_id}", key=employer.key)
    assert result.status_code == 200, result.text
    found: dict[str, Any] = result.json
    return found


def test_answers_are_stored_with_their_questions_and_shown_in_order(
    api: Any, employer: Any, enqueued: list[int]
) -> None:
    job = asking(api, employer)
    result = applying(api, job["id"], GOOD)
    assert result.status_code == 202, result.text
    application = shown(api, employer, result.json["id"])
    assert application["answers"] == [
        {"questionId": "workAuth", "question": QUESTIONS[0]["text"], "answer": True},
        {"questionId": "shift", "question": QUESTIONS[1]["text"], "answer": "day"},
        {"questionId": "ovens", "question": QUESTIONS[2]["text"], "answer": ["deck", "wood"]},
        {"questionId": "why", "question": "Why bread?", "answer": "Crust"},
        {"questionId": "years", "question": "Years of baking", "answer": 4.5},
    ]
    assert application["knockedOut"] is False and application["knockedOutBy"] is None
    assert enqueued == [application["id"]]


@pytest.mark.parametrize(
    ("answers", "expected"),
    [
        ("yes", [("answers", "invalid_type")]),
        ({}, [("answers.workAuth", "required"), ("answers.shift", "required")]),
        ({**GOOD, "pets": True}, [("answers.pets", "unknown_question")]),
        ({**GOOD, "workAuth": "maybe"}, [("answers.workAuth", "invalid_type")]),
        ({**GOOD, "shift": "dusk"}, [("answers.shift", "unknown_choice")]),
        ({**GOOD, "shift": ["day"]}, [("answers.shift", "invalid_type")]),
        ({**GOOD, "ovens": ["deck", "deck"]}, [("answers.ovens", "duplicate")]),
        ({**GOOD, "ovens": ["gas"]}, [("answers.ovens", "unknown_choice")]),
        ({**GOOD, "ovens": 3}, [("answers.ovens", "invalid_type")]),
        ({**GOOD, "why": "x" * 21}, [("answers.why", "too_long")]),
        ({**GOOD, "why": 7}, [("answers.why", "invalid_type")]),
        ({**GOOD, "years": 61}, [("answers.years", "out_of_range")]),
        ({**GOOD, "years": -1}, [("answers.years", "out_of_range")]),
        ({**GOOD, "years": "many"}, [("answers.years", "invalid_type")]),
        ({**GOOD, "years": True}, [("answers.years", "invalid_type")]),
    ],
)
def test_each_bad_answer_is_a_422_naming_its_question(
    api: Any, employer: Any, answers: Any, expected: list[tuple[str, str]]
) -> None:
    job = asking(api, employer)
    result = applying(api, job["id"], answers, name="")
    assert sorted(entries(result)) == sorted([("name", "required"), *expected])


def test_a_job_without_questions_refuses_answers_to_none(api: Any, employer: Any) -> None:
    job = create_job(api, employer, status="active")
    assert applying(api, job["id"], {}).status_code == 202
    assert entries(applying(api, job["id"], {"x": 1})) == [("answers.x", "unknown_question")]


@pytest.mark.parametrize(
    ("change", "by"),
    [
        ({"workAuth": False}, "workAuth"),
        ({"shift": "night"}, "shift"),
        ({"workAuth": False, "shift": "night"}, "workAuth"),
    ],
)
def test_a_knocked_out_application_is_stored_marked_and_emailed_by_default(
    api: Any, employer: Any, enqueued: list[int], change: dict[str, Any], by: str
) -> None:
    job = asking(api, employer)
    result = applying(api, job["id"], {**GOOD, **change})
    assert result.status_code == 202, result.text
    application = shown(api, employer, result.json["id"])
    assert application["knockedOut"] is True and application["knockedOutBy"] == by
    assert application["status"] == "pending" and enqueued == [application["id"]]


def test_multi_choice_knocks_out_on_any_chosen_knock_out_answer(api: Any, employer: Any) -> None:
    asked = [{**QUESTIONS[2], "knockOut": ["rack"]}]
    job = create_job(api, employer, status="active", questions=asked)
    out = applying(api, job["id"], {"ovens": ["deck", "rack"]}).json["id"]
    kept = applying(api, job["id"], {"ovens": ["deck"]}).json["id"]
    assert shown(api, employer, out)["knockedOutBy"] == "ovens"
    assert shown(api, employer, kept)["knockedOut"] is False


def test_an_employer_may_keep_knocked_out_applications_from_the_mail(
    api: Any, employer: Any, enqueued: list[int], sessions: sessionmaker[Session]
) -> None:
    changed = api.put(f"{API}/employer", json={"emailKnockedOut": False}, key=employer.key)
    assert changed.status_code == 200 and changed.json["emailKnockedOut"] is False
    job = asking(api, employer)
    out = applying(api, job["id"], {**GOOD, "workAuth": False}).json["id"]
    kept = applying(api, job["id"], GOOD).json["id"]
    assert enqueued == [kept]  # the knocked-out one has no copy to send
    application = shown(api, employer, out)
    assert application["knockedOut"] is True
    assert (application["status"], application["attempts"], application["sentAt"]) == (
        None,
        0,
        None,
    )
    listed = api.get(f"{API}/applications", key=employer.key).json["data"]
    assert {a["id"] for a in listed} == {out, kept}
    with sessions() as s:
        assert s.get(OutboxEntry, out) is None and s.get(OutboxEntry, kept) is not None


def test_emailknockedout_must_be_a_boolean(api: Any, employer: Any) -> None:
    result = api.put(f"{API}/employer", json={"emailKnockedOut": "no"}, key=employer.key)
    assert entries(result) == [("emailKnockedOut", "invalid_type")]


def test_the_webhook_and_the_export_carry_the_answers(
    api: Any, employer: Any, sessions: sessionmaker[Session]
) -> None:
    with sessions() as s:
        s.add(
            WebhookEndpoint(
                employer_id=employer.id,
                url="https://hooks.example/x",
                events='["application.received"]',  # not C24's job events
                status="enabled",
                secret="sealed",
                created_at=utcnow(),
                updated_at=utcnow(),
            )
        )
        s.commit()
    job = asking(api, employer)
    app_id = applying(api, job["id"], {**GOOD, "shift": "night"}).json["id"]
    application = shown(api, employer, app_id)
    with sessions() as s:
        (payload,) = s.scalars(select(WebhookMessage.payload)).all()
        data = json.loads(payload)["data"]
        assert data == {**application, "resumeUrl": None}
        exported = representations.export(privacy.export(s, "ada@example.com"))
    assert exported["applications"] == [application]
    assert application["answers"][1] == {
        "questionId": "shift",
        "question": QUESTIONS[1]["text"],
        "answer": "night",
    }


def test_a_knocked_out_application_kept_from_the_mail_is_purged_after_the_retention(
    api: Any, employer: Any, sessions: sessionmaker[Session]
) -> None:
    from models.applications import service

    api.put(f"{API}/employer", json={"emailKnockedOut": False}, key=employer.key)
    job = asking(api, employer)
    app_id = applying(api, job["id"], {**GOOD, "workAuth": False}).json["id"]
    with sessions() as s:
        assert service.purge(s, now=utcnow(), retention_days=30) == 0
        assert service.purge(s, now=utcnow() + timedelta(days=31), retention_days=30) == 1
        s.commit()
        assert s.get(Application, app_id) is None


# --- the email copy, in-process against a real SMTP server ------------------------------------


@pytest.mark.parametrize(
    ("language", "lines"),
    [
        (
            "en",
            [
                "Knocked out: yes, by the answer to: Which shift can you work?",
                "Are you legally entitled to work in Canada?: Yes",
                "Which shift can you work?: Night",
                "Which ovens have you used?: Deck, Wood-fired",
                "Years of baking: 4.5",
            ],
        ),
        (
            "fr",
            [
                "Éliminatoire\u00a0: oui, par la réponse à\u00a0: Which shift can you work?",
                "Are you legally entitled to work in Canada?\u00a0: Oui",
                "Which shift can you work?\u00a0: Night",
            ],
        ),
    ],
)
def test_the_copy_lists_the_answers_and_the_knock_out_in_the_employers_language(
    api: Any,
    employer: Any,
    sessions: sessionmaker[Session],
    settings: Settings,
    smtp_sink: Any,
    language: str,
    lines: list[str],
) -> None:
    import dataclasses

    from workers import delivery

    api.put(f"{API}/employer", json={"language": language}, key=employer.key)
    job = asking(api, employer)
    app_id = applying(api, job["id"], {**GOOD, "shift": "night"}).json["id"]
    mail = dataclasses.replace(
        settings,
        smtp_host=smtp_sink.host,
        smtp_port=smtp_sink.port,
        smtp_timeout=5,
        mail_from="Jobpost <jobpost@jobs.example>",
    )
    assert delivery.deliver(sessions, mail, app_id) == "sent"
    [message] = smtp_sink.messages
    text, page = message.get_body(("plain",)), message.get_body(("html",))
    assert text is not None and page is not None
    content = text.get_content()
    for line in lines:
        assert line in content
    assert "Which ovens have you used?" in page.get_content()
