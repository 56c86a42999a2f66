"""C13 through the API: each rule broken in each mode on POST, PUT by id and PUT by
referenceId; drafts not checked; an unchanged update in `enforce`; the employer's settings."""

from __future__ import annotations

from typing import Any

import pytest
from sqlalchemy.orm import Session, sessionmaker

from models import employers
from models.core.settings import Settings
from tests.conftest import Account, Api, Clock
from tests.factories import JOBS, entries, job_body, problem
from workers import syncing

EMPLOYER = "/api/v1.1/employer"
SYNCS = "/api/v1.1/syncs"

# A body breaking one rule (its location decides the jurisdiction), and its (field, code).
BROKEN: dict[str, tuple[dict[str, Any], tuple[str, str]]] = {
    "bc_pay": (
        {"locations": [{"description": "Vancouver, BC"}], "salary": None},
        ("salary", "pay_required"),
    ),
    "pe_pay": (
        {"locations": [{"description": "Charlottetown, PE"}], "salary": None},
        ("salary", "pay_required"),
    ),
    "on_pay": ({"salary": {"amount": 0, "period": {"id": 1}}}, ("salary", "pay_required")),
    "on_range": (
        {"salary": {"amount": 50000, "maxAmount": 100000.01, "period": {"id": 1}}},
        ("salary.maxAmount", "pay_range_too_wide"),
    ),
    "on_ai": ({"aiScreening": None}, ("aiScreening", "ai_disclosure_required")),
    "on_vacancy": ({"existingVacancy": None}, ("existingVacancy", "vacancy_disclosure_required")),
    "qc_french": (
        {"locations": [{"description": "Montréal, QC"}]},
        ("translation", "french_version_required"),
    ),
}


def set_mode(sessions: sessionmaker[Session], account: Account, mode: str, **more: Any) -> None:
    with sessions() as s:
        employers.set_compliance(s, account.id, mode=mode, **more)
        s.commit()


def warning_codes(result: Any) -> list[tuple[str, str]]:
    assert result.status_code in (200, 201), result.text
    return [(w["field"], w["code"]) for w in result.json["warnings"]]


def write(api: Api, account: Account, how: str, body: dict[str, Any]) -> Any:
    """POST, or PUT by referenceId (an upsert's create), or PUT by id of an active job
    that complied."""
    if how == "post":
        return api.post(JOBS, json=body, key=account.key)
    if how == "upsert":
        return api.put(JOBS, json={**body, "referenceId": "C-1"}, key=account.key)
    created = api.post(JOBS, json=job_body(status="active"), key=account.key)
    assert warning_codes(created) == []
    return api.put(f"{JOBS}/{created.json['id']}", json=body, key=account.key)


@pytest.mark.parametrize("how", ["post", "upsert", "put"])
@pytest.mark.parametrize("rule", sorted(BROKEN))
def test_each_rule_is_a_warning_in_warn_an_error_in_enforce_and_nothing_when_off(
    api: Api, sessions: sessionmaker[Session], make_employer: Any, rule: str, how: str
) -> None:
    changes, entry = BROKEN[rule]
    body = job_body(status="active", **changes) if how != "put" else changes
    warned = make_employer("Warned")  # warn is the default
    assert entry in warning_codes(write(api, warned, how, body))
    enforced = make_employer("Enforced")
    set_mode(sessions, enforced, "enforce")
    refused = write(api, enforced, how, body)
    assert entries(refused) == [entry]
    assert api.get(JOBS, key=enforced.key).json["paging"]["total"] == (1 if how == "put" else 0)
    off = make_employer("Off")
    set_mode(sessions, off, "off")
    assert warning_codes(write(api, off, how, body)) == []


@pytest.mark.parametrize("mode", ["warn", "enforce"])
def test_canadian_experience_is_a_warning_in_every_mode_that_checks(
    api: Api, sessions: sessionmaker[Session], employer: Account, mode: str
) -> None:
    set_mode(sessions, employer, mode)
    body = job_body(status="active", description="<p>EXPÉRIENCE Canadienne exigée</p>")
    result = api.post(JOBS, json=body, key=employer.key)
    assert result.status_code == 201
    assert warning_codes(result) == [("description", "canadian_experience_requirement")]


def test_a_draft_is_not_checked_and_publishing_it_is(
    api: Api, sessions: sessionmaker[Session], employer: Account
) -> None:
    set_mode(sessions, employer, "enforce")
    draft = api.post(JOBS, json=job_body(aiScreening=None, salary=None), key=employer.key)
    assert warning_codes(draft) == []
    path = f"{JOBS}/{draft.json['id']}"
    assert entries(api.put(path, json={"status": "active"}, key=employer.key)) == [
        ("aiScreening", "ai_disclosure_required"),
        ("salary", "pay_required"),
    ]
    fixed = {"status": "active", "aiScreening": True, "salary": {"amount": 20, "period": {"id": 5}}}
    assert warning_codes(api.put(path, json=fixed, key=employer.key)) == []
    archived = api.put(path, json={"status": "archived", "salary": None}, key=employer.key)
    assert warning_codes(archived) == []  # leaving active is not checked


def test_in_enforce_an_active_job_that_does_not_comply_fails_every_update_until_it_does(
    api: Api, sessions: sessionmaker[Session], employer: Account
) -> None:
    """Stored while in warn; in enforce even a write changing nothing names what to fix."""
    created = api.post(JOBS, json=job_body(status="active", aiScreening=None), key=employer.key)
    assert warning_codes(created) == [("aiScreening", "ai_disclosure_required")]
    set_mode(sessions, employer, "enforce")
    path = f"{JOBS}/{created.json['id']}"
    for change in ({}, {"title": "Baker"}):
        assert entries(api.put(path, json=change, key=employer.key)) == [
            ("aiScreening", "ai_disclosure_required")
        ]
    assert api.get(path, key=employer.key).json["title"] == "Senior Baker"
    assert warning_codes(api.put(path, json={"aiScreening": False}, key=employer.key)) == []


def test_several_jurisdictions_at_once_de_duplicated(
    api: Api, sessions: sessionmaker[Session], employer: Account
) -> None:
    body = job_body(
        status="active",
        salary=None,
        locations=[
            {"description": "Vancouver, BC"},
            {"description": "Toronto, ON"},
            {"description": "Charlottetown, PE"},
        ],
    )
    assert warning_codes(api.post(JOBS, json=body, key=employer.key)) == [
        ("salary", "pay_required")
    ]
    set_mode(sessions, employer, "enforce")
    assert entries(api.post(JOBS, json=body, key=employer.key)) == [("salary", "pay_required")]


def test_a_province_as_the_location_puts_the_job_there(api: Api, employer: Account) -> None:
    body = job_body(status="active", salary=None, locations=[{"description": "Ontario"}])
    assert warning_codes(api.post(JOBS, json=body, key=employer.key)) == [
        ("salary", "pay_required")
    ]


def test_a_dry_run_answers_the_compliance_error_and_a_used_reference_is_409_first(
    api: Api, sessions: sessionmaker[Session], employer: Account
) -> None:
    set_mode(sessions, employer, "enforce")
    api.post(JOBS, json=job_body(referenceId="R-1"), key=employer.key)
    broken = job_body(status="active", aiScreening=None)
    assert entries(api.post(JOBS + "?dryRun=true", json=broken, key=employer.key)) == [
        ("aiScreening", "ai_disclosure_required")
    ]
    taken = api.post(JOBS, json={**broken, "referenceId": "R-1"}, key=employer.key)
    problem(taken, 409, "duplicate_reference_id")


def test_before_ontario_s_rules_are_in_force_nothing_is_asked(
    api: Api, sessions: sessionmaker[Session], employer: Account, clock: Clock
) -> None:
    from datetime import date

    clock.today = date(2025, 12, 31)
    set_mode(sessions, employer, "enforce")
    body = job_body(status="active", salary=None, aiScreening=None, existingVacancy=None)
    assert warning_codes(api.post(JOBS, json=body, key=employer.key)) == []


def test_the_statements_are_written_read_and_sent_back_unchanged(
    api: Api, employer: Account
) -> None:
    created = api.post(
        JOBS, json=job_body(aiScreening=True, existingVacancy=False), key=employer.key
    )
    path = f"{JOBS}/{created.json['id']}"
    read = api.get(path, key=employer.key).json
    assert read["aiScreening"] is True and read["existingVacancy"] is False
    again = api.put(path, json=read, key=employer.key)  # the symmetry rule
    assert again.status_code == 200 and again.json["warnings"] == []
    assert api.get(path, key=employer.key).json["closeDate"] == read["closeDate"]
    cleared = api.put(path, json={"aiScreening": None}, key=employer.key)
    assert cleared.json["aiScreening"] is None
    bad: Any
    for bad in ("yes", 1, [], {}):
        assert entries(api.put(path, json={"existingVacancy": bad}, key=employer.key)) == [
            ("existingVacancy", "invalid_type")
        ]


def test_the_employer_reads_and_changes_its_settings(
    api: Api, employer: Account, make_employer: Any
) -> None:
    assert api.get(EMPLOYER).status_code == 401
    shown = api.get(EMPLOYER, key=employer.key)
    assert shown.status_code == 200 and shown.headers["cache-control"] == "no-store"
    assert shown.json == {
        "id": employer.id,
        "name": "Maple Corp",
        "plan": "standard",
        "language": "en",
        "compliance": "warn",
        "ontario25Plus": True,
        "emailKnockedOut": True,
        "notificationEmail": None,
        "flaggedAddresses": [],
    }
    changed = api.put(
        EMPLOYER,
        json={"compliance": "enforce", "ontario25Plus": False, "plan": "unlimited", "id": 9},
        key=employer.key,
    )
    assert changed.status_code == 200
    assert changed.json == {**shown.json, "compliance": "enforce", "ontario25Plus": False}
    assert api.get(EMPLOYER, key=employer.key).json == changed.json
    other = make_employer("Other")
    assert api.get(EMPLOYER, key=other.key).json["compliance"] == "warn"
    partial = api.put(EMPLOYER, json={"ontario25Plus": True}, key=employer.key)
    assert partial.json["compliance"] == "enforce" and partial.json["ontario25Plus"] is True


def test_bad_settings_are_422_all_at_once_and_change_nothing(api: Api, employer: Account) -> None:
    bad = api.put(EMPLOYER, json={"compliance": "strict", "ontario25Plus": "yes"}, key=employer.key)
    assert entries(bad) == [("compliance", "out_of_range"), ("ontario25Plus", "invalid_type")]
    for value in (None, 1):
        assert entries(api.put(EMPLOYER, json={"compliance": value}, key=employer.key)) == [
            ("compliance", "invalid_type")
        ]
    nulled = api.put(EMPLOYER, json={"ontario25Plus": None, "compliance": "off"}, key=employer.key)
    assert entries(nulled) == [("ontario25Plus", "invalid_type")]
    assert api.get(EMPLOYER, key=employer.key).json["compliance"] == "warn"
    problem(
        api.put(EMPLOYER, body="[", key=employer.key, headers={"Content-Type": "application/json"}),
        400,
        "malformed_json",
    )


def test_a_job_in_quebec_complies_in_french_or_with_its_translation(
    api: Api, sessions: sessionmaker[Session], employer: Account
) -> None:
    set_mode(sessions, employer, "enforce")
    montreal = {"locations": [{"description": "Montréal, QC"}], "status": "active"}
    french = api.post(JOBS, json=job_body(language="fr", **montreal), key=employer.key)
    assert warning_codes(french) == []
    translation = {"title": "Boulanger", "description": "<p>Faire du pain.</p>"}
    translated = api.post(
        JOBS, json=job_body(translation=translation, **montreal), key=employer.key
    )
    assert warning_codes(translated) == []
    path = f"{JOBS}/{translated.json['id']}"
    assert entries(api.put(path, json={"translation": None}, key=employer.key)) == [
        ("translation", "french_version_required")
    ]


@pytest.mark.parametrize("rule", BROKEN)
def test_sync_items_warn_fail_in_enforce_and_pass_when_off_for_each_rule(
    api: Api, sessions: sessionmaker[Session], make_employer: Any, settings: Settings, rule: str
) -> None:
    """C13 on sync items (C11), as on writes: a created item and an update of an active job
    that complied; in enforce both fail and the stored job is left as it was."""
    changes, entry = BROKEN[rule]

    def synced(account: Account) -> list[dict[str, Any]]:
        complying = api.put(
            JOBS, json={**job_body(status="active"), "referenceId": "U"}, key=account.key
        )
        assert warning_codes(complying) == []
        jobs = [
            {**job_body(status="active", **changes), "referenceId": "N"},
            {**job_body(status="active"), **changes, "referenceId": "U"},
        ]
        run = api.post(SYNCS, json={"mode": "upsert", "jobs": jobs}, key=account.key)
        assert run.status_code == 202, run.text
        done = syncing.process(
            sessions, run.json["id"], lease_seconds=300, timezone=settings.timezone
        )
        assert done == "completed"
        items = api.get(f"{SYNCS}/{run.json['id']}/items", key=account.key)
        data: list[dict[str, Any]] = items.json["data"]
        return data

    def codes(found: list[dict[str, Any]]) -> list[tuple[str, str]]:
        return [(e["field"], e["code"]) for e in found]

    warned = synced(make_employer("Warned"))
    assert [i["outcome"] for i in warned] == ["created", "updated"]
    assert all(entry in codes(i["warnings"]) for i in warned)
    enforced_account = make_employer("Enforced")
    set_mode(sessions, enforced_account, "enforce")
    enforced = synced(enforced_account)
    assert [(i["outcome"], codes(i["errors"])) for i in enforced] == [("failed", [entry])] * 2
    listed = api.get(f"{JOBS}?status=active", key=enforced_account.key).json
    assert listed["paging"]["total"] == 1  # the complying job, unchanged
    off_account = make_employer("Off")
    set_mode(sessions, off_account, "off")
    off = synced(off_account)
    assert [i["outcome"] for i in off] == ["created", "updated"]
    assert not any(entry in codes(i["warnings"]) for i in off)  # C10's own warnings may stay


# --- C21: a screening question asking for Canadian experience ---------------------------------

ASKS_IT = [
    {"id": "ok", "type": "yesNo", "text": "Are you entitled to work in Canada?"},
    {
        "id": "exp",
        "type": "number",
        "text": "Years of baking",
        "translation": "Années d’expérience canadienne en boulangerie",
    },
]


@pytest.mark.parametrize(
    ("mode", "ontario25_plus"), [("warn", True), ("warn", False), ("enforce", True)]
)
def test_a_question_asking_for_canadian_experience_follows_the_mode_in_ontario(
    api: Api, sessions: sessionmaker[Session], employer: Account, mode: str, ontario25_plus: bool
) -> None:
    """C13's Ontario row for C21 (the Human Rights Code, as the OHRC's 2013 policy reads it):
    any employer, warned in warn, refused in enforce, naming the question."""
    set_mode(sessions, employer, mode, ontario25_plus=ontario25_plus)
    body = job_body(status="active", questions=ASKS_IT)
    result = api.post(JOBS, json=body, key=employer.key)
    expected = [("questions[1].text", "canadian_experience_question")]
    if mode == "enforce":
        assert entries(result) == expected
        assert "'exp'" in result.json["errors"][0]["message"]
    else:
        assert warning_codes(result) == expected


@pytest.mark.parametrize(
    "text",
    [
        "Do you have Canadian experience?",
        "How many years of CANADIAN work experience do you have?",
        "Years of experience working in Canada",
        "Avez-vous une expérience canadienne?",
        "Avez-vous de l’expérience de travail au Canada?",
    ],
)
def test_each_wording_of_the_question_is_found(api: Api, employer: Account, text: str) -> None:
    body = job_body(status="active", questions=[{"id": "q", "type": "yesNo", "text": text}])
    result = api.post(JOBS, json=body, key=employer.key)
    assert warning_codes(result) == [("questions[0].text", "canadian_experience_question")]


def test_the_question_rule_is_off_outside_ontario_in_off_mode_and_for_drafts(
    api: Api, sessions: sessionmaker[Session], employer: Account, make_employer: Any
) -> None:
    asks = [{"id": "q", "type": "yesNo", "text": "Canadian experience?"}]
    vancouver = job_body(
        status="active", questions=asks, locations=[{"description": "Vancouver, BC"}]
    )
    assert warning_codes(api.post(JOBS, json=vancouver, key=employer.key)) == []
    draft = job_body(status="draft", questions=asks)
    assert warning_codes(api.post(JOBS, json=draft, key=employer.key)) == []
    off = make_employer("Off")
    set_mode(sessions, off, "off")
    on = job_body(status="active", questions=asks)
    assert warning_codes(api.post(JOBS, json=on, key=off.key)) == []
