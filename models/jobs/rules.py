"""The write shape of a job (C4): every rule checked, every broken rule reported at once."""

from __future__ import annotations

from collections.abc import Callable
from datetime import date
from typing import Any

from sqlalchemy.orm import Session

from models.core import checks
from models.core.checks import Invalid
from models.core.errors import FieldError, ValidationFailed
from models.core.i18n import LANGUAGES
from models.db.entities import Employer
from models.jobs import html, questions, warnings, workplace
from models.jobs.rows import StoredJob
from models.reference import places
from models.reference.lists import (
    CATEGORY_NAMES,
    EMAIL_ROUTE,
    POSITION_TYPE_NAMES,
    ROUTING_TYPES,
    SALARY_PERIOD_NAMES,
)
from models.reference.places import Place

STATUSES = ("active", "archived", "draft")
REQUIRED = (
    "title",
    "locations",
    "categories",
    "positionType",
    "description",
    "applicantRoutingType",
)


class _Context:
    def __init__(self, session: Session, employer: Employer, job: StoredJob | None, today: date):
        self.session, self.employer, self.job, self.today = session, employer, job, today
        self.errors: list[FieldError] = []
        self.out: dict[str, Any] = {}
        self.warnings: list[warnings.Warning] = []

    def fail(self, field: str, code: str, message: str) -> None:
        self.errors.append(FieldError(field, code, message))


def _reference_id(ctx: _Context, value: Any) -> None:
    if value is None or value == "":
        ctx.out["reference_id"] = None
    else:
        ctx.out["reference_id"] = checks.string(value, "referenceId", max_len=50)


def _title(ctx: _Context, value: Any) -> None:
    ctx.out["title"] = _title_text(value, "title")


def _title_text(value: Any, field: str) -> str:
    return checks.string(value, field, max_len=256, trim=True)


def _close_date(ctx: _Context, value: Any) -> None:
    if value is None:
        ctx.out["close_date"] = None  # reset to the default by the caller (C4)
        return
    close = checks.iso_date(value, "closeDate")
    if ctx.job is not None and close == ctx.job.close_date:
        return  # sent back as stored (a GET result PUT back, a repeated upsert): not a write (C4)
    if close < ctx.today:
        raise Invalid(
            "closeDate", "in_the_past", f"closeDate must not be before today ({ctx.today})."
        )
    if ctx.job is not None and close < ctx.job.publish_date:
        raise Invalid("closeDate", "out_of_range", "closeDate must not be before publishDate.")
    ctx.out["close_date"] = close


def _confidential(ctx: _Context, value: Any) -> None:
    ctx.out["confidential"] = checks.boolean(value, "confidential")


def _auto_refresh(ctx: _Context, value: Any) -> None:
    flag = checks.boolean(value, "autoRefresh")
    if ctx.job is not None and flag == ctx.job.auto_refresh:
        return  # sent back as stored, a true left from a plan downgrade too: not a write (C4)
    if flag and ctx.employer.plan != "unlimited":
        raise Invalid(
            "autoRefresh",
            "auto_refresh_requires_unlimited_plan",
            "autoRefresh is available only on unlimited job plans.",
        )
    ctx.out["auto_refresh"] = flag


def _status(ctx: _Context, value: Any) -> None:
    text = checks.string(value, "status", max_len=10)
    if text not in STATUSES:
        raise Invalid("status", "out_of_range", "status must be active, archived or draft.")
    ctx.out["status"] = text


def _locations(ctx: _Context, value: Any) -> None:
    entries = checks.array(value, "locations", least=1, most=3, noun=("location", "locations"))
    found: list[Place] = []
    for i, entry in enumerate(entries):
        result = places.resolve(ctx.session, entry, f"locations[{i}]")
        if isinstance(result, FieldError):
            ctx.errors.append(result)
        elif any(loc.id == result.id for loc in found):
            ctx.fail(f"locations[{i}]", "duplicate", f"{result.description} is listed twice.")
        else:
            found.append(result)
            others = places.alternatives(ctx.session.connection(), entry, result)
            if others:
                written = str(entry.get("description"))  # resolved by it: a string
                ctx.warnings.append(warnings.ambiguous(f"locations[{i}]", written, result, others))
    ctx.out["locations"] = tuple(found)


def _categories(ctx: _Context, value: Any) -> None:
    entries = checks.array(value, "categories", least=1, most=3, noun=("category", "categories"))
    found: list[int] = []
    for i, entry in enumerate(entries):
        field = f"categories[{i}]"
        try:
            cid = checks.int32(_member(entry, field, "id"), f"{field}.id")
        except Invalid as e:
            ctx.errors.append(e.error)
            continue
        if cid not in CATEGORY_NAMES:
            ctx.fail(f"{field}.id", "unknown_category", f"No job category has id {cid}.")
        elif cid in found:
            ctx.fail(f"{field}.id", "duplicate", f"Category {cid} is listed twice.")
        else:
            found.append(cid)
    ctx.out["category_ids"] = tuple(found)


def _member(value: Any, field: str, name: str) -> Any:
    """`value[name]` of a JSON object, or a `required` error on `field.name`."""
    if checks.obj(value, field).get(name) is None:
        raise Invalid(f"{field}.{name}", "required", f"{field}.{name} is required.")
    return value[name]


def _position_type(ctx: _Context, value: Any) -> None:
    pid = checks.int32(_member(value, "positionType", "id"), "positionType.id")
    if pid not in POSITION_TYPE_NAMES:
        raise Invalid("positionType.id", "unknown_position_type", f"No position type has id {pid}.")
    ctx.out["position_type_id"] = pid


def _salary(ctx: _Context, value: Any) -> None:
    if value is None:
        ctx.out.update(salary_amount=None, salary_max=None, salary_period_id=None)
        ctx.out["salary_commission"] = False
        return
    salary = checks.obj(value, "salary")
    parts: dict[str, Any] = {}
    for key, check in _SALARY_PARTS.items():
        try:
            parts[key] = check(ctx, salary.get(key))
        except Invalid as e:
            ctx.errors.append(e.error)
    amount, top = parts.get("amount"), parts.get("maxAmount")
    if amount is not None and top is not None and top < amount:
        ctx.fail("salary.maxAmount", "below_amount", "salary.maxAmount must not be below amount.")
    ctx.out.update(salary_amount=amount, salary_max=top, salary_period_id=parts.get("period"))
    ctx.out["salary_commission"] = parts.get("plusCommission", False)


def _salary_amount(ctx: _Context, value: Any) -> Any:
    if value is None:
        raise Invalid("salary.amount", "required", "salary.amount is required in a salary.")
    return checks.amount(value, "salary.amount")


def _salary_max(ctx: _Context, value: Any) -> Any:
    return None if value is None else checks.amount(value, "salary.maxAmount")


def _salary_period(ctx: _Context, value: Any) -> int:
    if value is None:
        raise Invalid("salary.period.id", "required", "salary.period.id is required.")
    pid = checks.int32(_member(value, "salary.period", "id"), "salary.period.id")
    if pid not in SALARY_PERIOD_NAMES:
        raise Invalid("salary.period.id", "unknown_salary_period", "salary.period.id is 1 to 5.")
    return pid


def _commission(ctx: _Context, value: Any) -> bool:
    return False if value is None else checks.boolean(value, "salary.plusCommission")


_SALARY_PARTS: dict[str, Callable[[_Context, Any], Any]] = {
    "amount": _salary_amount,
    "maxAmount": _salary_max,
    "period": _salary_period,
    "plusCommission": _commission,
}


def _description(ctx: _Context, value: Any) -> None:
    cleaned = _description_text(ctx, value, "description")
    if cleaned is not None:
        ctx.out["description"] = cleaned


def _description_text(ctx: _Context, value: Any, field: str) -> str | None:
    """The description as stored, or None with its HTML faults added to ctx's errors."""
    text = checks.string(value, field, max_len=10**9, multiline=True)
    if not text.strip():
        raise Invalid(field, "too_short", f"{field} must not be empty.")
    problems = html.check_description(text, field)
    if problems:
        ctx.errors.extend(problems)
        return None
    # Checked as stored: nh3 drops comments, so "<!-- x -->" or "&#32;" alone would be stored
    # blank and a GET result could not be sent back (the symmetry rule).
    cleaned = html.clean_description(text)
    if not cleaned.strip():
        raise Invalid(field, "too_short", f"{field} has no text once cleaned.")
    return cleaned


def _language(ctx: _Context, value: Any) -> None:
    text = checks.string(value, "language", max_len=2)
    if text not in LANGUAGES:
        raise Invalid("language", "out_of_range", "language must be en or fr.")
    ctx.out["language"] = text


def _translation(ctx: _Context, value: Any) -> None:
    """Title and description in the other language (C13), under their own rules (C4); both
    required, the whole replaced on a PUT, null removing it."""
    if value is None:
        ctx.out.update(translation_title=None, translation_description=None)
        return
    members = checks.obj(value, "translation")
    parts: dict[str, Any] = {}
    for name in ("title", "description"):
        field = f"translation.{name}"
        try:
            if members.get(name) is None:
                raise Invalid(field, "required", f"{field} is required in a translation.")
            if name == "title":
                parts[name] = _title_text(members[name], field)
            else:
                parts[name] = _description_text(ctx, members[name], field)
        except Invalid as e:
            ctx.errors.append(e.error)
    ctx.out.update(
        translation_title=parts.get("title"), translation_description=parts.get("description")
    )


def _routing(ctx: _Context, value: Any) -> None:
    rid = checks.int32(_member(value, "applicantRoutingType", "id"), "applicantRoutingType.id")
    if rid not in ROUTING_TYPES:
        raise Invalid(
            "applicantRoutingType.id", "unknown_routing_type", "applicantRoutingType.id is 1 or 2."
        )
    ctx.out["routing_type"] = rid


def _application_email(ctx: _Context, value: Any) -> None:
    if value is not None:
        ctx.out["application_email"] = checks.email(value, "applicationEmail", max_len=50)


def _application_url(ctx: _Context, value: Any) -> None:
    if value is not None:
        ctx.out["application_url"] = checks.url(value, "applicationUrl", max_len=200)


def _statement(column: str, field: str) -> Callable[[_Context, Any], None]:
    """A posting statement of C13: true, false, or null for not stated."""

    def rule(ctx: _Context, value: Any) -> None:
        ctx.out[column] = None if value is None else checks.boolean(value, field)

    return rule


def _workplace_type(ctx: _Context, value: Any) -> None:
    """null is the default, as a closeDate's is (C16)."""
    if value is None:
        ctx.out["workplace_type"] = workplace.DEFAULT_TYPE
        return
    if not isinstance(value, str):
        raise Invalid("workplaceType", "invalid_type", "workplaceType must be a string.")
    if value not in workplace.TYPES:
        raise Invalid(
            "workplaceType", "out_of_range", "workplaceType must be onSite, hybrid or remote."
        )
    text = value
    ctx.out["workplace_type"] = text


def _applicant_locations(ctx: _Context, value: Any) -> None:
    """`CA` or province codes, each once (C16); null and [] are the type's default. Kept
    apart (`_check_workplace` stores it), as its meaning depends on the merged type."""
    if value is None:
        ctx.out["applicant_codes"] = ()
        return
    entries = checks.array(
        value,
        "applicantLocations",
        least=0,
        most=len(workplace.CODES),
        noun=("applicant location", "applicant locations"),
    )
    found: list[str] = []
    for i, entry in enumerate(entries):
        field = f"applicantLocations[{i}]"
        code = entry
        if not isinstance(code, str):
            ctx.fail(field, "invalid_type", f"{field} must be a string.")
        elif code not in workplace.CODES:
            ctx.fail(field, "out_of_range", f"{field} must be CA or a province or territory code.")
        elif code in found:
            ctx.fail(field, "duplicate", f"{code} is listed twice.")
        elif workplace.CANADA in (code, *found) and found:
            ctx.fail(field, "duplicate", "CA takes applicants from every province: list CA alone.")
        else:
            found.append(code)
    ctx.out["applicant_codes"] = tuple(found)


def _questions(ctx: _Context, value: Any) -> None:
    """Up to 10 screening questions (C21), replaced whole by a PUT; null and [] remove them."""
    stored, errors = questions.validate(value)
    if errors:
        ctx.errors.extend(errors)
        return
    ctx.out["questions"] = stored


RULES: dict[str, Callable[[_Context, Any], None]] = {
    "referenceId": _reference_id,
    "title": _title,
    "closeDate": _close_date,
    "confidential": _confidential,
    "autoRefresh": _auto_refresh,
    "status": _status,
    "locations": _locations,
    "categories": _categories,
    "positionType": _position_type,
    "salary": _salary,
    "description": _description,
    "applicantRoutingType": _routing,
    "applicationEmail": _application_email,
    "applicationUrl": _application_url,
    "language": _language,
    "translation": _translation,
    "aiScreening": _statement("ai_screening", "aiScreening"),
    "existingVacancy": _statement("existing_vacancy", "existingVacancy"),
    "workplaceType": _workplace_type,
    "applicantLocations": _applicant_locations,
    "questions": _questions,
}


def validate(
    session: Session,
    body: dict[str, Any],
    *,
    employer: Employer,
    job: StoredJob | None,
    today: date,
    notes: list[warnings.Warning] | None = None,
) -> dict[str, Any]:
    """Check a POST or PUT body against the write shape and return the changes to apply.

    With `job` None the body creates a job and every required property must be present;
    otherwise it is a partial update and the merged job must satisfy every rule (C4).
    What a valid body's resolution is worth a warning about goes into `notes` (C10).
    """
    ctx = _Context(session, employer, job, today)
    for name, rule in RULES.items():
        if name not in body:
            if job is None and name in REQUIRED:
                ctx.fail(name, "required", f"{name} is required.")
            continue
        if body[name] is None and name in REQUIRED:
            ctx.fail(name, "required", f"{name} is required and cannot be null.")
            continue
        try:
            rule(ctx, body[name])
        except Invalid as e:
            ctx.errors.append(e.error)
    _check_route(ctx, body)
    _check_republish(ctx, body)
    _check_translation_language(ctx, body)
    _check_workplace(ctx)
    if ctx.errors:
        raise ValidationFailed(ctx.errors, subject="job")
    if notes is not None:
        notes.extend(ctx.warnings)
    return ctx.out


def _check_republish(ctx: _Context, body: dict[str, Any]) -> None:
    """Re-publishing (C5) with a past closeDate sent back as stored: the request sets closeDate,
    so it is not moved, and a job cannot be active after its closeDate. Taking it as left out
    (today + 60) answered an ATS repeating its unchanged upsert of an expired job with the job
    live again for 60 days, and the same PUT the next time with in_the_past."""
    job = ctx.job
    if (
        job is None
        or job.status == "active"
        or ctx.out.get("status") != "active"
        or body.get("closeDate") is None
        or "close_date" in ctx.out  # a new date, checked by _close_date
        or job.close_date >= ctx.today
        or any(e.field == "closeDate" for e in ctx.errors)
    ):
        return
    ctx.fail(
        "closeDate",
        "in_the_past",
        f"closeDate {job.close_date} is before today ({ctx.today}): to re-publish, send a later"
        " closeDate, or null or none for 60 days from today.",
    )


def _check_translation_language(ctx: _Context, body: dict[str, Any]) -> None:
    """A stored translation is in the other language of the job as it was written: a PUT
    that changes `language` and keeps it would make it the job's own language (C13)."""
    job = ctx.job
    if (
        job is None
        or "translation" in body
        or job.translation_title is None
        or ctx.out.get("language", job.language) == job.language
    ):
        return
    ctx.fail(
        "translation",
        "invalid_format",
        f"The stored translation is in {ctx.out['language']}, now the job's own language: "
        "send a translation in the other language, or null to remove it.",
    )


def _check_workplace(ctx: _Context) -> None:
    """The applicant locations as stored for the merged type (C16). An on-site job takes
    applicants where it is: a list sent for one is refused, not dropped, since the client
    meant something the job would not say; a job becoming on site drops its stored list,
    as a route not taken drops its address (C4)."""
    job = ctx.job
    kind = ctx.out.get("workplace_type", job.workplace_type if job else workplace.DEFAULT_TYPE)
    codes = ctx.out.pop("applicant_codes", None)
    if codes is None:  # not sent: the stored list stands, unless the job is now on site
        if job is not None and kind == workplace.ON_SITE and job.applicant_locations:
            ctx.out["applicant_locations"] = ""
        elif job is not None and kind != job.workplace_type:
            # The stored form of the same list under the new type (a remote job's default
            # `["CA"]` is stored as "", a hybrid job's as "CA").
            kept = workplace.listed(job.workplace_type, job.applicant_locations)
            ctx.out["applicant_locations"] = workplace.stored(kind, kept)
        return
    if any(e.field == "workplaceType" for e in ctx.errors):
        return  # the type to judge the list by is unknown
    if kind == workplace.ON_SITE and codes:
        ctx.fail(
            "applicantLocations",
            "not_applicable",
            "An onSite job takes applicants where it is: send applicantLocations only with"
            " workplaceType hybrid or remote.",
        )
        return
    ctx.out["applicant_locations"] = workplace.stored(kind, codes)


def _check_route(ctx: _Context, body: dict[str, Any]) -> None:
    """The route's own address is required; the other route's is stored as null (C4)."""
    route = ctx.out.get("routing_type") or (ctx.job.routing_type if ctx.job else None)
    if route is None:
        return  # the missing routing type is reported already
    own, other, name = (
        ("application_email", "application_url", "applicationEmail")
        if route == EMAIL_ROUTE
        else ("application_url", "application_email", "applicationUrl")
    )
    ctx.out[other] = None
    if own in ctx.out or any(e.field == name for e in ctx.errors):
        return
    # Unwritten: the stored address stands (None when the job was on the other route).
    stored = getattr(ctx.job, own) if ctx.job is not None and name not in body else None
    if stored is None:
        ctx.fail(name, "required", f"{name} is required when applicantRoutingType.id is {route}.")
