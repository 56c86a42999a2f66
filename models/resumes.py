"""Résumé rules of C8: the type is judged by the content, never by the filename."""

from __future__ import annotations

import io
import re
import unicodedata
import zipfile
import zlib
from dataclasses import dataclass

MAX_RESUME_BYTES = 5 * 1024 * 1024

_OLE2 = b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1"
_ZIP = b"PK\x03\x04"
_ODT_MIMETYPE = b"application/vnd.oasis.opendocument.text"
_CONTROL = re.compile(r"[\x00-\x08\x0b\x0e-\x1f\x7f-\x9f]")  # all Cc but \t \n \f \r
_MAX_CONTROL_RATIO = 0.02
_MAX_NAME = 100
_ZIP_ERRORS = (zipfile.BadZipFile, zlib.error, OSError, EOFError, RuntimeError, ValueError)


@dataclass(frozen=True)
class ResumeKind:
    """A résumé type allowed by C8: its canonical extension and content type."""

    extension: str
    content_type: str


PDF = ResumeKind("pdf", "application/pdf")
DOC = ResumeKind("doc", "application/msword")
DOCX = ResumeKind("docx", "application/vnd.openxmlformats-officedocument.wordprocessingml.document")
ODT = ResumeKind("odt", "application/vnd.oasis.opendocument.text")
RTF = ResumeKind("rtf", "application/rtf")
TXT = ResumeKind("txt", "text/plain")


def detect(data: bytes) -> ResumeKind | None:
    """The C8 type of `data` (PDF, DOC, DOCX, ODT, RTF or TXT), or None when not allowed."""
    if data.startswith(b"%PDF-"):
        return PDF
    if data.startswith(_OLE2):
        return DOC
    if data.startswith(b"{\\rtf"):
        return RTF
    if data.startswith(_ZIP):
        return _zip_kind(data)
    return TXT if _is_text(data) else None


def _zip_kind(data: bytes) -> ResumeKind | None:
    """DOCX or ODT by the archive's members; anything else (or a broken zip) is None."""
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as archive:
            names = set(archive.namelist())
            if "word/document.xml" in names:
                return DOCX
            if "mimetype" in names and archive.getinfo("mimetype").file_size < 100:
                return ODT if archive.read("mimetype").strip() == _ODT_MIMETYPE else None
    except _ZIP_ERRORS:
        return None
    return None


def _is_text(data: bytes) -> bool:
    """UTF-8 (BOM allowed), no NUL, not blank, and almost no control characters."""
    if b"\x00" in data:
        return False
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError:
        return False
    if not text.strip():
        return False
    return len(_CONTROL.findall(text)) <= len(text) * _MAX_CONTROL_RATIO


def safe_filename(name: str | None, kind: ResumeKind) -> str:
    """A harmless base name for the résumé, ending in the detected extension (C8)."""
    base = re.split(r"[\\/]", name or "")[-1]
    plain = "".join(
        ch for ch in unicodedata.normalize("NFKD", base) if not unicodedata.combining(ch)
    )
    cleaned = re.sub(r"[^A-Za-z0-9._ -]+", "_", plain)
    cleaned = re.sub(r"([_ .])\1+", r"\1", cleaned)
    stem = re.sub(r"\.[A-Za-z0-9]{1,4}$", "", cleaned)  # a wrong or the right extension
    stem = stem.strip(" .")[: _MAX_NAME - len(kind.extension) - 1].rstrip(" .")
    if not re.search(r"[A-Za-z0-9]", stem):
        stem = "resume"
    return f"{stem}.{kind.extension}"
