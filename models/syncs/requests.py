"""What a sync request must be (C11): its outer shape checked by the API before anything
is stored; each item is checked in full later, when a worker applies it."""

from __future__ import annotations

import json
from dataclasses import dataclass
from decimal import Decimal
from typing import Any, cast

import orjson

from models.core import checks
from models.core.errors import FieldError, ValidationFailed

MODES = ("upsert", "snapshot")


PER_REQUEST = 10_000  # items in one request (C11)


MAX_REFERENCE = 50


@dataclass(frozen=True)
class SyncRequest:
    """What a request to start (or add to) a run says, its items as JSON text in order."""

    mode: str
    open: bool
    allow_empty: bool
    dry_run: bool
    items: list[tuple[str, Any]]  # (referenceId, the item: a dict, or its JSON text)


def _optional_bool(body: dict[str, Any], name: str, errors: list[FieldError]) -> bool:
    value = body.get(name)
    if value is None:
        return False
    if not isinstance(value, bool):
        errors.append(FieldError(name, "invalid_type", f"{name} must be true or false."))
        return False
    return value


def _decimal(value: Any) -> Any:
    """Numbers were read as Decimal (C4): written back as the same literal."""
    if isinstance(value, Decimal):
        return orjson.Fragment(str(value))
    raise TypeError


def item_text(item: dict[str, Any]) -> str:
    """An item as JSON text that reads back (`read_item`) to the same values. (As a str: the
    bytes orjson answers keep the whole buffer it wrote them in.)"""
    try:
        return orjson.dumps(item, default=_decimal).decode()
    except orjson.JSONEncodeError:  # an integer beyond 64 bits, which orjson cannot write
        return orjson.dumps(_big_ints(item), default=_decimal).decode()


def _big_ints(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _big_ints(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_big_ints(v) for v in value]
    if isinstance(value, int) and not isinstance(value, bool):
        return orjson.Fragment(str(value))
    return value


@dataclass(frozen=True, slots=True)
class Packed:
    """An item as the request's parse keeps it (api.body.parse_json_streamed): its
    referenceId as sent, and its JSON text; its values are not kept (a 50 MiB body)."""

    reference: Any
    text: str


def pack(value: Any) -> Any:
    """An element of `jobs`, packed when it is an item; anything else is kept only by type
    (its one use is the error naming it)."""
    if isinstance(value, dict):
        return Packed(value.get("referenceId"), item_text(value))
    return [] if isinstance(value, list) else value


def read_item(text: str) -> dict[str, Any]:
    value: dict[str, Any] = json.loads(text, parse_float=Decimal)
    return value


def _checked_items(jobs_value: Any, prefix: str, errors: list[FieldError]) -> list[tuple[str, Any]]:
    """The items with their referenceIds, or errors on them (C11); `jobs` is a list."""
    seen: set[str] = set()
    items: list[tuple[str, Any]] = []
    for i, item in enumerate(jobs_value):
        where = f"{prefix}[{i}]"
        if isinstance(item, Packed):
            ref, item = item.reference, item.text
        elif isinstance(item, dict):
            ref = item.get("referenceId")
        else:
            errors.append(FieldError(where, "invalid_type", "Each job must be a JSON object."))
            continue
        field = f"{where}.referenceId"
        if ref is None:
            errors.append(FieldError(field, "required", "Each job needs a referenceId."))
        elif not isinstance(ref, str):
            errors.append(FieldError(field, "invalid_type", "referenceId must be a string."))
        elif ref == "":
            errors.append(FieldError(field, "too_short", "referenceId must not be empty."))
        elif len(ref) > MAX_REFERENCE:
            errors.append(
                FieldError(field, "too_long", f"referenceId is at most {MAX_REFERENCE} characters.")
            )
        elif checks.CONTROL.search(ref):
            errors.append(FieldError(field, "invalid_format", checks.control_message(field)))
        elif ref in seen:
            errors.append(
                FieldError(field, "duplicate", f"referenceId {ref!r} is already in this run.")
            )
        else:
            seen.add(ref)
            items.append((ref, item))
    return items


def _jobs_list(body: dict[str, Any], errors: list[FieldError], *, optional: bool) -> list[Any]:
    value = body.get("jobs")
    if value is None:
        if not optional:
            errors.append(FieldError("jobs", "required", "jobs is required (a list of jobs)."))
        return []
    if not isinstance(value, list):
        errors.append(FieldError("jobs", "invalid_type", "jobs must be a list of job objects."))
        return []
    if len(value) > PER_REQUEST:
        errors.append(
            FieldError("jobs", "too_many", f"At most {PER_REQUEST:,} jobs in one request.")
        )
        return []
    return value


def too_few() -> ValidationFailed:
    return ValidationFailed(
        [
            FieldError(
                "jobs",
                "too_few",
                'A run needs at least one job; a snapshot may be empty with "allowEmpty": true.',
            )
        ],
        subject="sync run",
    )


def check_request(body: dict[str, Any], *, dry_run: bool) -> SyncRequest:
    """The outer shape of POST /syncs (C11), every violation listed; `dry_run` is the query's."""
    errors: list[FieldError] = []
    mode = body.get("mode")
    if mode is None:
        errors.append(FieldError("mode", "required", "mode is required: upsert or snapshot."))
    elif not isinstance(mode, str):
        errors.append(FieldError("mode", "invalid_type", "mode must be a string."))
    elif mode not in MODES:
        errors.append(FieldError("mode", "out_of_range", "mode must be upsert or snapshot."))
    is_open = _optional_bool(body, "open", errors)
    allow_empty = _optional_bool(body, "allowEmpty", errors)
    dry = _optional_bool(body, "dryRun", errors) or dry_run
    raw = _jobs_list(body, errors, optional=is_open)
    items = _checked_items(raw, "jobs", errors)
    if errors:
        raise ValidationFailed(errors, subject="sync run")
    if not raw and not is_open and not (mode == "snapshot" and allow_empty):
        raise too_few()
    return SyncRequest(cast(str, mode), is_open, allow_empty, dry, items)


def added(body: dict[str, Any]) -> list[tuple[str, Any]]:
    """The items of POST /syncs/{id}/jobs, checked within the request (C11)."""
    errors: list[FieldError] = []
    items = _checked_items(_jobs_list(body, errors, optional=False), "jobs", errors)
    if errors:
        raise ValidationFailed(errors, subject="sync run")
    return items
