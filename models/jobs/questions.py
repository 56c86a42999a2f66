"""Screening questions (C21): a job's questions, their write rules, and the applicant's answers
checked against them, knock-outs found.

A job's questions are stored with it as one JSON text (`jobs.questions`, migration 0030) in
their read shape, every member present, so a GET result PUT back compares equal to the stored
job and is no write (C4, C10). No questions is stored as null and read as [].
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from typing import Any

from models.core import checks
from models.core.checks import Invalid
from models.core.errors import FieldError, ValidationFailed

TYPES = ("yesNo", "singleChoice", "multiChoice", "text", "number")
CHOICE_TYPES = ("singleChoice", "multiChoice")
MAX_QUESTIONS = 10
MAX_CHOICES = 20
MAX_TEXT = 500  # a question's wording, in either language
MAX_CHOICE_TEXT = 200
DEFAULT_MAX_LENGTH = 1000  # a text answer's, when the job sets none
MAX_MAX_LENGTH = 10_000
NUMBER_LIMIT = Decimal(10) ** 9  # bounds and answers lie strictly within ±10^9
ID_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-")
MAX_ID = 40


def _id(value: Any, field: str) -> str:
    text = checks.string(value, field, max_len=MAX_ID)
    if not set(text) <= ID_CHARS:
        raise Invalid(field, "invalid_format", f"{field} has letters, digits, _ and - only.")
    return text


def _text(value: Any, field: str, max_len: int) -> str:
    return checks.string(value, field, max_len=max_len, trim=True)


def _translation(value: Any, field: str, max_len: int) -> str | None:
    return None if value is None else _text(value, field, max_len)


def _number(value: Any, field: str) -> int | float:
    """A JSON number (not a boolean; bodies are read with exact decimals) strictly within
    ±10^9, as JSON keeps it: an integer, or a float."""
    if isinstance(value, bool) or not isinstance(value, int | float | Decimal):
        raise Invalid(field, "invalid_type", f"{field} must be a number.")
    try:
        exact = Decimal(str(value))
    except InvalidOperation:  # pragma: no cover - JSON numbers are finite
        raise Invalid(field, "invalid_type", f"{field} must be a number.") from None
    if not exact.is_finite() or abs(exact) >= NUMBER_LIMIT:
        raise Invalid(field, "out_of_range", f"{field} must lie between -10^9 and 10^9.")
    return int(exact) if exact == exact.to_integral_value() else float(exact)


class _Errors:
    def __init__(self) -> None:
        self.found: list[FieldError] = []

    def take(self, rule: Any, *args: Any) -> Any:
        try:
            return rule(*args)
        except Invalid as e:
            self.found.append(e.error)
            return None

    def fail(self, field: str, code: str, message: str) -> None:
        self.found.append(FieldError(field, code, message))


def validate(value: Any) -> tuple[str | None, list[FieldError]]:
    """The questions as stored (JSON text, None for none) and every rule they break."""
    errors = _Errors()
    if value is None:
        return None, []
    try:
        entries = checks.array(
            value, "questions", least=0, most=MAX_QUESTIONS, noun=("question", "questions")
        )
    except Invalid as e:
        return None, [e.error]
    out: list[dict[str, Any]] = []
    seen: set[str] = set()
    for i, entry in enumerate(entries):
        field = f"questions[{i}]"
        try:
            members = checks.obj(entry, field)
        except Invalid as e:
            errors.found.append(e.error)
            continue
        question = _question(members, field, errors)
        qid = question.get("id")
        if qid is not None and qid in seen:
            errors.fail(f"{field}.id", "duplicate", f"Question id {qid!r} is listed twice.")
        elif qid is not None:
            seen.add(qid)
        out.append(question)
    if errors.found or not out:
        return None, errors.found
    return json.dumps(out, ensure_ascii=False, separators=(",", ":")), []


def _required_member(members: dict[str, Any], name: str, field: str) -> Any:
    if members.get(name) is None:
        raise Invalid(f"{field}.{name}", "required", f"{field}.{name} is required.")
    return members[name]


def _question(members: dict[str, Any], field: str, errors: _Errors) -> dict[str, Any]:
    """One question in its stored (read) shape; its faults added to `errors`."""
    qid = errors.take(lambda: _id(_required_member(members, "id", field), f"{field}.id"))
    kind = errors.take(lambda: _type(_required_member(members, "type", field), f"{field}.type"))
    text = errors.take(
        lambda: _text(_required_member(members, "text", field), f"{field}.text", MAX_TEXT)
    )
    other = errors.take(_translation, members.get("translation"), f"{field}.translation", MAX_TEXT)
    required = errors.take(
        lambda: checks.boolean(members.get("required", False), f"{field}.required")
    )
    question: dict[str, Any] = {
        "id": qid,
        "type": kind,
        "text": text,
        "translation": other,
        "required": bool(required),
    }
    if kind in CHOICE_TYPES:
        question["choices"] = _choices(members.get("choices"), f"{field}.choices", errors)
    elif members.get("choices") is not None and kind is not None:
        errors.fail(f"{field}.choices", "not_applicable", f"A {kind} question has no choices.")
    if kind in ("yesNo", *CHOICE_TYPES):
        question["knockOut"] = _knock_out(members.get("knockOut"), kind, question, field, errors)
    elif members.get("knockOut") not in (None, []) and kind is not None:
        errors.fail(
            f"{field}.knockOut",
            "not_applicable",
            "Only yesNo, singleChoice and multiChoice questions have knock-out answers.",
        )
    if kind == "text":
        question["maxLength"] = errors.take(_max_length, members.get("maxLength"), field)
    if kind == "number":
        low = errors.take(_bound, members.get("min"), f"{field}.min")
        top = errors.take(_bound, members.get("max"), f"{field}.max")
        if low is not None and top is not None and top < low:
            errors.fail(f"{field}.max", "out_of_range", f"{field}.max must not be below min.")
        question.update(min=low, max=top)
    return question


def _type(value: Any, field: str) -> str:
    if not isinstance(value, str):
        raise Invalid(field, "invalid_type", f"{field} must be a string.")
    if value not in TYPES:
        raise Invalid(field, "out_of_range", f"{field} must be one of {', '.join(TYPES)}.")
    return value


def _choices(value: Any, field: str, errors: _Errors) -> list[dict[str, Any]]:
    if value is None:
        errors.fail(field, "required", f"{field} is required in a choice question.")
        return []
    entries = errors.take(
        lambda: checks.array(value, field, least=2, most=MAX_CHOICES, noun=("choice", "choices"))
    )
    found: list[dict[str, Any]] = []
    for j, entry in enumerate(entries or ()):
        at = f"{field}[{j}]"
        try:
            members = checks.obj(entry, at)
        except Invalid as e:
            errors.found.append(e.error)
            continue
        cid = errors.take(lambda m=members, a=at: _id(_required_member(m, "id", a), f"{a}.id"))
        text = errors.take(
            lambda m=members, a=at: _text(
                _required_member(m, "text", a), f"{a}.text", MAX_CHOICE_TEXT
            )
        )
        other = errors.take(
            _translation, members.get("translation"), f"{at}.translation", MAX_CHOICE_TEXT
        )
        if cid is not None and any(c["id"] == cid for c in found):
            errors.fail(f"{at}.id", "duplicate", f"Choice id {cid!r} is listed twice.")
        found.append({"id": cid, "text": text, "translation": other})
    return found


def _knock_out(
    value: Any, kind: str, question: dict[str, Any], field: str, errors: _Errors
) -> list[Any]:
    """The answers that disqualify: booleans for yesNo, choice ids for the others."""
    at = f"{field}.knockOut"
    if value is None:
        return []
    limit = 2 if kind == "yesNo" else MAX_CHOICES
    entries = errors.take(
        lambda: checks.array(value, at, least=0, most=limit, noun=("answer", "answers"))
    )
    ids = [c["id"] for c in question.get("choices", ())]
    found: list[Any] = []
    for j, entry in enumerate(entries or ()):
        here = f"{at}[{j}]"
        if kind == "yesNo":
            if not isinstance(entry, bool):
                errors.fail(here, "invalid_type", f"{here} must be true or false.")
                continue
        elif not isinstance(entry, str):
            errors.fail(here, "invalid_type", f"{here} must be a choice id.")
            continue
        elif entry not in ids:
            errors.fail(here, "unknown_choice", f"{here} names no choice of the question.")
            continue
        if entry in found:
            errors.fail(here, "duplicate", f"{entry!r} is listed twice.")
            continue
        found.append(entry)
    if kind == "singleChoice" and ids and len(found) == len(ids):
        errors.fail(at, "too_many", "Every choice knocks out: leave at least one that does not.")
    return found


def _max_length(value: Any, field: str) -> int:
    if value is None:
        return DEFAULT_MAX_LENGTH
    n = checks.int32(value, f"{field}.maxLength")
    if not 1 <= n <= MAX_MAX_LENGTH:
        raise Invalid(f"{field}.maxLength", "out_of_range", f"{field}.maxLength is 1 to 10000.")
    return n


def _bound(value: Any, field: str) -> int | float | None:
    return None if value is None else _number(value, field)


def listed(stored: str | None) -> list[dict[str, Any]]:
    """The questions in read shape, from their stored text."""
    if not stored:
        return []
    found: list[dict[str, Any]] = json.loads(stored)
    return found


# --- the applicant's answers --------------------------------------------------------------


@dataclass(frozen=True)
class Answered:
    """Answers as stored (JSON text, None when none): each with its question's wording as
    the applicant read it, a snapshot as the job's is (C8); and the first question that
    knocked the application out, if any."""

    stored: str | None
    knocked_out_by: str | None


NONE = Answered(None, None)  # a job without questions, answered nothing


def answer(questions: list[dict[str, Any]], value: Any) -> Answered:
    """Check `answers` ({questionId: value}) against the job's questions; every fault at once
    as C1 entries on `answers.{questionId}`. An answer a question knocks out on is valid: it
    is stored and marked (C21), never refused."""
    if value is None:
        value = {}
    if not isinstance(value, dict):
        raise Invalid("answers", "invalid_type", "answers must be an object.")
    errors = _Errors()
    known = {q["id"] for q in questions}
    for name in value:
        if name not in known:
            errors.fail(
                f"answers.{name}", "unknown_question", f"The job asks no question {name!r}."
            )
    out: list[dict[str, Any]] = []
    knocked: str | None = None
    for q in questions:
        field = f"answers.{q['id']}"
        given = value.get(q["id"])
        if given is None or given == "" or given == []:
            if q["required"]:
                errors.fail(field, "required", f"An answer to {q['text']!r} is required.")
            continue
        checked = errors.take(_ANSWERS[q["type"]], q, given, field)
        if checked is None:
            continue
        entry = {"questionId": q["id"], "question": q["text"], "answer": checked}
        if q["type"] in CHOICE_TYPES:  # the wording chosen, for the copy (C21)
            picked = checked if isinstance(checked, list) else [checked]
            entry["labels"] = [c["text"] for c in q["choices"] if c["id"] in picked]
        out.append(entry)
        if knocked is None and _knocks_out(q, checked):
            knocked = q["id"]
    if errors.found:
        raise ValidationFailed(errors.found, subject="application")
    stored = json.dumps(out, ensure_ascii=False, separators=(",", ":")) if out else None
    return Answered(stored, knocked)


def _yes_no(q: dict[str, Any], value: Any, field: str) -> bool:
    if isinstance(value, str) and value in ("true", "false"):  # a form's radio button
        return value == "true"
    return checks.boolean(value, field)


def _single(q: dict[str, Any], value: Any, field: str) -> str:
    if not isinstance(value, str):
        raise Invalid(field, "invalid_type", f"{field} must be a choice id.")
    if value not in {c["id"] for c in q["choices"]}:
        raise Invalid(field, "unknown_choice", f"{field} names no choice of the question.")
    return value


def _multi(q: dict[str, Any], value: Any, field: str) -> list[str]:
    if isinstance(value, str):
        value = [value]  # a form with one box ticked
    if not isinstance(value, list):
        raise Invalid(field, "invalid_type", f"{field} must be an array of choice ids.")
    ids = [c["id"] for c in q["choices"]]
    picked: set[str] = set()
    for entry in value:
        if not isinstance(entry, str):
            raise Invalid(field, "invalid_type", f"{field} must be an array of choice ids.")
        if entry not in ids:
            raise Invalid(field, "unknown_choice", f"{entry!r} is no choice of the question.")
        if entry in picked:
            raise Invalid(field, "duplicate", f"{entry!r} is listed twice.")
        picked.add(entry)
    return [c for c in ids if c in picked]  # in the question's order


def _free_text(q: dict[str, Any], value: Any, field: str) -> str:
    return checks.string(value, field, max_len=q["maxLength"], trim=True, multiline=True)


def _numeric(q: dict[str, Any], value: Any, field: str) -> int | float:
    if isinstance(value, str):  # a form's number input
        try:
            parsed = Decimal(value.strip())
        except InvalidOperation:
            raise Invalid(field, "invalid_type", f"{field} must be a number.") from None
        if not parsed.is_finite():
            raise Invalid(field, "invalid_type", f"{field} must be a number.")
        value = int(parsed) if parsed == parsed.to_integral_value() else float(parsed)
    number = _number(value, field)
    low, top = q["min"], q["max"]
    if (low is not None and number < low) or (top is not None and number > top):
        span = f"{'-∞' if low is None else low} to {'∞' if top is None else top}"
        raise Invalid(field, "out_of_range", f"{field} must be within {span}.")
    return number


_ANSWERS = {
    "yesNo": _yes_no,
    "singleChoice": _single,
    "multiChoice": _multi,
    "text": _free_text,
    "number": _numeric,
}


def _knocks_out(q: dict[str, Any], checked: Any) -> bool:
    out = q.get("knockOut") or []
    if q["type"] == "multiChoice":
        return any(c in out for c in checked)
    return checked in out


def answers_of(stored: str | None) -> list[dict[str, Any]]:
    """Stored answers in order: questionId, question, answer, and `labels` for a choice."""
    if not stored:
        return []
    found: list[dict[str, Any]] = json.loads(stored)
    return found
