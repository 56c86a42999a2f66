"""C8 Applications over the API: bad input, every error in the C1 shape: the length limits, the
multipart body and its parts, charsets, which error outranks which, the honeypot."""

from __future__ import annotations

from typing import Any

import pytest

from api import forms
from tests.api.applying import (
    API,
    PDF,
    PNG,
    Enqueued,
    MiB,
    applicant,
    apply,
    b64,
    listed,
    multipart,
    received,
)
from tests.api.applying import app as app
from tests.api.applying import enqueued as enqueued
from tests.api.applying import job as job
from tests.conftest import Api
from tests.factories import create_job, entries, problem
from tests.resume_files import DOC_MACROS_BYTES, DOCM_BYTES, XLS_BYTES

# --- Bad input (C8, C1) ----------------------------------------------------------------------

BAD_INPUT = {
    "missing name": ({"name": ...}, [("name", "required")]),
    "blank name": ({"name": "   "}, [("name", "required")]),
    "name too long": ({"name": "x" * 101}, [("name", "too_long")]),
    "name not a string": ({"name": 7}, [("name", "invalid_type")]),
    "missing email": ({"email": ...}, [("email", "required")]),
    "bad email": ({"email": "elodie.example.org"}, [("email", "invalid_format")]),
    "email holding an encoded word": (  # RFC 5322 allows it; mail software would decode it
        {"email": "=?utf-8?q?=0D=0Ax?=@example.org"},
        [("email", "invalid_format")],
    ),
    "bad phone": ({"phone": "call me maybe"}, [("phone", "invalid_format")]),
    "phone too long": ({"phone": "1" * 31}, [("phone", "too_long")]),
    "phone without a digit": ({"phone": "+ (-) ."}, [("phone", "invalid_format")]),
    "cover letter too long": ({"coverLetter": "x" * 10_001}, [("coverLetter", "too_long")]),
    "resume over 5 MiB": (
        {"resume": {"filename": "cv.txt", "content": b64(b"a" * (5 * MiB + 1))}},
        [("resume", "file_too_large")],
    ),
    "PNG named cv.pdf": (
        {"resume": {"filename": "cv.pdf", "content": b64(PNG)}},
        [("resume", "file_type_not_allowed")],
    ),
    "bad base64": (
        {"resume": {"filename": "cv.pdf", "content": "not base64 at all!"}},
        [("resume.content", "invalid_format")],
    ),
    "resume without content": (
        {"resume": {"filename": "cv.pdf"}},
        [("resume.content", "required")],
    ),
    "resume not an object": ({"resume": "cv.pdf"}, [("resume", "invalid_type")]),
    "resume filename not a string": (
        {"resume": {"filename": 7, "content": b64(PDF)}},
        [("resume.filename", "invalid_type")],
    ),
    "resume filename too long": (
        {"resume": {"filename": "c" * 252 + ".pdf", "content": b64(PDF)}},
        [("resume.filename", "too_long")],
    ),
    "several at once": (
        {
            "name": ...,
            "email": "x@",
            "phone": "abc",
            "coverLetter": "x" * 10_001,
            "resume": {"filename": "cv.pdf", "content": b64(PNG)},
        },
        [
            ("name", "required"),
            ("email", "invalid_format"),
            ("phone", "invalid_format"),
            ("coverLetter", "too_long"),
            ("resume", "file_type_not_allowed"),
        ],
    ),
}


def test_values_at_the_length_limits_are_accepted(
    api: Api, employer: Any, job: dict[str, Any]
) -> None:
    """C8: name 1 to 100, an address of 254 (the longest a mailbox has), a phone of 30 and a
    cover letter of 10,000 characters: the limits themselves are taken as sent."""
    email = "e" * 64 + "@" + ".".join(["d" * 61] * 3) + ".org"
    assert len(email) == 254
    letter = "x" * 10_000
    phone = "+1 (514) 555-0199 " + "1" * 12
    assert len(phone) == 30
    body = applicant(name="N" * 100, email=email, coverLetter=letter, phone=phone)
    app_id = received(apply(api, job["id"], body))
    shown = api.get(f"{API}/applications/{app_id}", key=employer.key).json
    assert (shown["name"], shown["email"]) == ("N" * 100, email)
    assert (shown["coverLetter"], shown["phone"]) == (letter, phone)
    received(apply(api, job["id"], applicant(name="N")))


def test_a_json_resume_filename_of_255_characters_is_accepted(
    api: Api, employer: Any, job: dict[str, Any]
) -> None:
    """C8: the JSON résumé's filename may be 255 characters (256 is too_long, above)."""
    resume = {"filename": "c" * 251 + ".pdf", "content": b64(PDF)}
    app_id = received(apply(api, job["id"], applicant(resume=resume)))
    shown = api.get(f"{API}/applications/{app_id}", key=employer.key).json
    assert shown["resume"]["filename"].endswith(".pdf")
    assert shown["resume"]["contentType"] == "application/pdf"


@pytest.mark.parametrize("case", BAD_INPUT.values(), ids=BAD_INPUT.keys())
def test_bad_input_is_422_listing_every_broken_rule(
    api: Api, employer: Any, job: dict[str, Any], enqueued: Enqueued, case: Any
) -> None:
    overrides, expected = case
    result = apply(api, job["id"], applicant(**overrides))
    assert entries(result) == expected
    assert result.json["detail"] == (
        f"The application has {len(expected)} invalid field{'s' if len(expected) > 1 else ''}."
    )
    # Nothing is stored, nothing enqueued.
    assert listed(api, employer)["data"] == [] and enqueued == []


MULTIPART_FILES = {
    "PNG named cv.pdf": (("cv.pdf", "application/pdf", PNG), "file_type_not_allowed"),
    "over 5 MiB": (("cv.txt", "text/plain", b"a" * (5 * MiB + 1)), "file_too_large"),
    "Excel workbook named cv.doc": (
        ("cv.doc", "application/msword", XLS_BYTES),
        "file_type_not_allowed",
    ),
    "DOCM named cv.docx": (
        ("cv.docx", "application/octet-stream", DOCM_BYTES),
        "file_type_not_allowed",
    ),
    "Word 97 with macros named cv.doc": (
        ("cv.doc", "application/msword", DOC_MACROS_BYTES),
        "file_type_not_allowed",
    ),
}


@pytest.mark.parametrize("case", MULTIPART_FILES.values(), ids=MULTIPART_FILES.keys())
def test_bad_multipart_resume_is_422(api: Api, job: dict[str, Any], case: Any) -> None:
    upload, code = case
    ctype, body = multipart({"name": "Ann", "email": "ann@example.org"}, {"resume": upload})
    assert entries(apply(api, job["id"], body=body, content_type=ctype)) == [("resume", code)]


def test_url_routed_job_is_409_naming_the_url(api: Api, employer: Any) -> None:
    url = "https://maple.test/careers/baker"
    job = create_job(
        api,
        employer,
        status="active",
        applicantRoutingType={"id": 2},
        applicationUrl=url,
        applicationEmail=...,
    )
    body = problem(apply(api, job["id"]), 409, "apply_via_url")
    assert url in body["detail"]


@pytest.mark.parametrize("status", ["draft", "archived"])
def test_a_job_not_active_is_404(api: Api, employer: Any, status: str) -> None:
    job = create_job(api, employer, status=status)
    problem(apply(api, job["id"]), 404, "not_found")


@pytest.mark.parametrize("job_id", ["999999", "2147483648", "abc"])
def test_an_unknown_job_is_404(api: Api, job_id: str) -> None:
    problem(api.post(f"{API}/jobs/{job_id}/applications", json=applicant()), 404, "not_found")


def test_a_deleted_job_is_404(api: Api, employer: Any, job: dict[str, Any]) -> None:
    assert api.delete(f"{API}/jobs/{job['id']}", key=employer.key).status_code == 204
    problem(apply(api, job["id"]), 404, "not_found")


def test_a_body_over_10_mib_is_413(api: Api, job: dict[str, Any]) -> None:
    body = b'{"name": "' + b"x" * (10 * MiB) + b'"}'
    result = apply(api, job["id"], body=body, content_type="application/json")
    problem(result, 413, "payload_too_large")


def test_413_outranks_the_other_errors(api: Api) -> None:
    # C1 order: 413 before 415 and 404.
    result = api.post(
        f"{API}/jobs/999999/applications", body=b"x" * (10 * MiB + 1), content_type="text/plain"
    )
    problem(result, 413, "payload_too_large")


def test_text_plain_is_415(api: Api, job: dict[str, Any]) -> None:
    result = apply(api, job["id"], body="name=Ann", content_type="text/plain")
    problem(result, 415, "unsupported_media_type")


def test_json_with_a_charset_is_accepted(api: Api, job: dict[str, Any]) -> None:
    body = b'{"name": "Ann", "email": "ann@example.org"}'
    received(apply(api, job["id"], body=body, content_type="application/json; charset=utf-8"))


@pytest.mark.parametrize("body", [b'{"name": "Ann",', b"[1, 2]", b"\xff\xfe", b""])
def test_malformed_json_is_400(api: Api, job: dict[str, Any], body: bytes) -> None:
    result = apply(api, job["id"], body=body, content_type="application/json")
    problem(result, 400, "malformed_json")


def test_malformed_multipart_is_400(api: Api, job: dict[str, Any]) -> None:
    result = apply(api, job["id"], body=b"no parts here", content_type="multipart/form-data")
    problem(result, 400, "malformed_json")


def many_parts(count: int) -> tuple[str, bytes]:
    """A valid name and email, after empty parts of another field: `count` parts in all."""
    ctype, body = multipart({"name": "Ann", "email": "ann@example.org"}, boundary="B")
    return ctype, b"--B\r\nContent-Disposition: form-data; name=x\r\n\r\n\r\n" * (count - 2) + body


def test_a_body_of_200_000_parts_is_400(api: Api, job: dict[str, Any]) -> None:
    # C1/C8: the form holds a handful of fields; the parser stops at the part over the count.
    ctype, body = many_parts(200_000)
    result = apply(api, job["id"], body=body, content_type=ctype)
    body_json = problem(result, 400, "malformed_json")
    assert f"at most {forms.MAX_PARTS} parts" in body_json["detail"]


def test_a_body_of_as_many_parts_as_allowed_is_read(
    api: Api, employer: Any, job: dict[str, Any]
) -> None:
    ctype, body = many_parts(forms.MAX_PARTS)
    received(apply(api, job["id"], body=body, content_type=ctype))
    ctype, body = many_parts(forms.MAX_PARTS + 1)
    problem(apply(api, job["id"], body=body, content_type=ctype), 400, "malformed_json")
    assert [a["name"] for a in listed(api, employer)["data"]] == ["Ann"]


@pytest.mark.parametrize("value", [b"", b"Ann"], ids=["empty", "Ann"])
def test_a_part_without_headers_is_400(
    api: Api, employer: Any, job: dict[str, Any], value: bytes
) -> None:
    # RFC 7578 section 4.2: every part names its field in a header. Read as falcon reads it,
    # such a part would take the next part's headers for its own (C1, C8).
    ctype, body = multipart({"name": "Ann", "email": "ann@example.org"}, boundary="B")
    body = b"--B\r\n\r\n" + value + b"\r\n" + body
    detail = problem(apply(api, job["id"], body=body, content_type=ctype), 400, "malformed_json")
    assert "a part has no headers" in detail["detail"]
    assert listed(api, employer)["data"] == []


def test_a_part_that_names_no_field_is_not_read(
    api: Api, employer: Any, job: dict[str, Any]
) -> None:
    ctype, body = multipart({"name": "Ann", "email": "ann@example.org"}, boundary="B")
    nameless = b"--B\r\nContent-Disposition: form-data\r\n\r\nBo\r\n"
    received(apply(api, job["id"], body=nameless + body, content_type=ctype))
    assert [a["name"] for a in listed(api, employer)["data"]] == ["Ann"]


@pytest.mark.parametrize(
    "disposition",
    [
        b'form-data; name="name"' + b"; x=y" * 400_000,  # 2 MB of parameters
        b'form-data; name="name" ' + b"(" * 3000 + b")" * 3000,  # comments 3,000 deep
    ],
    ids=["parameters", "nested-comments"],
)
def test_a_part_header_longer_than_a_form_sends_is_400(
    api: Api, employer: Any, job: dict[str, Any], disposition: bytes
) -> None:
    """C1/C8: the email parser this service once used read such a header slowly enough to hold a
    worker past gunicorn's timeout (docs/benchmarks.md) or gave up in a RecursionError (a 500);
    nothing is stored."""
    ctype, body = with_name_part(None, b"Ann", disposition)
    problem(apply(api, job["id"], body=body, content_type=ctype), 400, "malformed_json")
    assert listed(api, employer)["data"] == []


def test_part_headers_up_to_the_limit_are_read(
    api: Api, employer: Any, job: dict[str, Any]
) -> None:
    filename = "Élodie Côté — curriculum vitæ, version française, novembre 2026 " * 2 + ".pdf"
    document = {"name": "Ann", "email": "ann@example.org"}
    ctype, body = multipart(document, {"resume": (filename, "application/pdf", PDF)})
    received(apply(api, job["id"], body=body, content_type=ctype))
    [shown] = listed(api, employer)["data"]
    assert shown["resume"]["filename"].startswith("Elodie Cote")  # sanitised (C8)


def test_the_longest_part_header_a_browser_sends_is_read(
    api: Api, employer: Any, job: dict[str, Any]
) -> None:
    # A filename of 255 four-byte characters (the most a file system names), as a type
    # longer than any a browser names for a résumé.
    filename = "𝓒" * 251 + ".pdf"
    docx = "application/vnd.openxmlformats-officedocument.wordprocessingml.document"
    document = {"name": "Ann", "email": "ann@example.org"}
    ctype, body = multipart(document, {"resume": (filename, docx * 2, PDF)})
    received(apply(api, job["id"], body=body, content_type=ctype))
    [shown] = listed(api, employer)["data"]
    assert shown["resume"]["contentType"] == "application/pdf"


def test_part_headers_of_the_limit_are_read_and_a_byte_more_is_400(
    api: Api, employer: Any, job: dict[str, Any]
) -> None:
    def padded(size: int) -> bytes:
        """A Content-Disposition making the part's headers `size` bytes."""
        head = b'form-data; name="name"; x=""'
        return head[:-1] + b"a" * (size - len(b"Content-Disposition: ") - len(head)) + b'"'

    ctype, body = with_name_part(None, b"Ann", padded(forms.MAX_PART_HEADERS))
    received(apply(api, job["id"], body=body, content_type=ctype))
    ctype, body = with_name_part(None, b"Ann", padded(forms.MAX_PART_HEADERS + 1))
    problem(apply(api, job["id"], body=body, content_type=ctype), 400, "malformed_json")
    assert len(listed(api, employer)["data"]) == 1


def with_name_part(
    content_type: str | None, value: bytes, disposition: bytes = b'form-data; name="name"'
) -> tuple[str, bytes]:
    """A multipart body whose `name` part is `value`, with its own Content-Type if given."""
    ctype, body = multipart({"email": "ann@example.org"}, boundary="B")
    head = b"--B\r\nContent-Disposition: " + disposition + b"\r\n"
    if content_type is not None:
        head += f"Content-Type: {content_type}\r\n".encode()
    return ctype, head + b"\r\n" + value + b"\r\n" + body


NOT_TEXT = {
    "unknown charset": ("text/plain; charset=x-bogus", b"Ann"),
    "unknown charset, RFC 2231": ("text/plain; charset*=utf-8''x-bogus", b"Ann"),
    "a NUL in the charset": ("text/plain; charset*=utf-8''utf%008", b"Ann"),
    "rot13": ("text/plain; charset=rot13", b"Ann"),
    "base64": ("text/plain; charset=base64", b"QW5u"),
    "hex": ("text/plain; charset=hex", b"416e6e"),
    "bytes idna refuses": ("text/plain; charset=idna", b"Ad\xff\xfea"),
    "not UTF-8, no charset": (None, b"Ad\xff\xfea"),
    "not UTF-8, charset utf-8": ("text/plain; charset=utf-8", b"Ad\xff\xfea"),
    "overlong UTF-8": (None, b"A\xc0\x80"),
    "a lone surrogate in UTF-7": ("text/plain; charset=utf-7", b"A+2AA-"),
}


@pytest.mark.parametrize("case", NOT_TEXT.values(), ids=NOT_TEXT.keys())
def test_a_field_that_is_not_text_in_its_charset_is_400_naming_it(
    api: Api, employer: Any, job: dict[str, Any], case: tuple[str | None, bytes]
) -> None:
    # C1/C8: never a 500 (LookupError, UnicodeError) nor U+FFFD stored for the bytes sent.
    ctype, body = with_name_part(*case)
    result = apply(api, job["id"], body=body, content_type=ctype)
    assert "'name'" in problem(result, 400, "malformed_json")["detail"]
    assert listed(api, employer)["data"] == []


def test_a_field_is_read_in_the_charset_it_names_utf_8_by_default(
    api: Api, employer: Any, job: dict[str, Any]
) -> None:
    for content_type, value in [
        (None, "Élodie\ufffd".encode()),
        ("text/plain; charset=ISO-8859-1", "Élodie".encode("latin-1")),
        ("text/plain; charset=idna", b"xn--lodie-9ra"),
    ]:
        ctype, body = with_name_part(content_type, value)
        received(apply(api, job["id"], body=body, content_type=ctype))
    names = [a["name"] for a in listed(api, employer)["data"]]
    assert names == ["élodie", "Élodie", "Élodie\ufffd"]


def test_400_outranks_404(api: Api) -> None:
    result = api.post(f"{API}/jobs/999999/applications", body=b"{", content_type="application/json")
    problem(result, 400, "malformed_json")


def test_404_outranks_422(api: Api) -> None:
    result = api.post(f"{API}/jobs/999999/applications", json={"name": ""})
    problem(result, 404, "not_found")


def test_the_honeypot_is_told_it_succeeded_and_nothing_is_kept(
    api: Api, employer: Any, job: dict[str, Any], enqueued: Enqueued
) -> None:
    # C8: `website` filled: the normal success, nothing stored or sent.
    received(apply(api, job["id"], applicant(website="http://spam.example")))
    ctype, body = multipart({"name": "Bot", "email": "bot@example.org", "website": "x"})
    received(apply(api, job["id"], body=body, content_type=ctype))
    assert listed(api, employer)["data"] == []
    assert enqueued == []


def test_an_empty_honeypot_is_no_honeypot(api: Api, employer: Any, job: dict[str, Any]) -> None:
    app_id = received(apply(api, job["id"], applicant(website="")))
    assert [a["id"] for a in listed(api, employer)["data"]] == [app_id]
