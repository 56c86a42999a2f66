"""Domain errors. The API maps each to an HTTP problem (C1) in one place: api/errors.py."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class FieldError:
    """One violated rule, reported on the field the client must fix (C1)."""

    field: str
    code: str
    message: str
    suggestions: list[str] | None = None

    def as_dict(self) -> dict[str, object]:
        out: dict[str, object] = {"field": self.field, "code": self.code, "message": self.message}
        if self.suggestions is not None:
            out["suggestions"] = self.suggestions
        return out


class DomainError(Exception):
    """Base of the errors a client can cause; `code` is the C1 machine-readable code."""

    code = "domain_error"

    def __init__(self, detail: str) -> None:
        super().__init__(detail)
        self.detail = detail


class NotFound(DomainError):
    code = "not_found"


class DuplicateReferenceId(DomainError):
    code = "duplicate_reference_id"


class PreconditionFailed(DomainError):
    """An If-Match or If-None-Match that does not hold on a job write (C10); `etag` is the
    job's current one, None when there is no job."""

    code = "precondition_failed"

    def __init__(self, detail: str, etag: str | None = None) -> None:
        super().__init__(detail)
        self.etag = etag


class JobTakenDown(DomainError):
    """A write would make active again a job taken down after a report (C13)."""

    code = "job_taken_down"


class JobGone(DomainError):
    """The job was taken down after a report: its public endpoints answer 410 (C13)."""

    code = "gone"


class ApplyViaUrl(DomainError):
    """An application sent to a job whose applicants go to the employer's own site (C8)."""

    code = "apply_via_url"

    def __init__(self, url: str) -> None:
        super().__init__(f"This job takes applications at {url}")
        self.url = url


class WebhookDisabled(DomainError):
    """A test of an endpoint that is disabled (C12)."""

    code = "webhook_disabled"


class DeliveryNotFailed(DomainError):
    """A retry of a webhook delivery that has not failed (C12)."""

    code = "delivery_not_failed"


@dataclass
class ValidationFailed(DomainError):
    """The body is well-formed but breaks rules; lists every broken rule (C1, C4)."""

    errors: list[FieldError] = field(default_factory=list)
    subject: str = "request"
    code = "validation_failed"

    def __post_init__(self) -> None:
        n = len(self.errors)
        self.detail = f"The {self.subject} has {n} invalid field{'s' if n != 1 else ''}."
        Exception.__init__(self, self.detail)


class InsufficientScope(DomainError):
    """The key lacks a scope it would need, or would grant (C23): 403."""

    code = "insufficient_scope"

    def __init__(self, scope: str, detail: str) -> None:
        super().__init__(detail)
        self.scope = scope
