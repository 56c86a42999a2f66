"""C8: a résumé is judged by its content, never its extension; its filename is made harmless."""

from __future__ import annotations

import io
import zipfile

import pytest

from models.resumes import DOC, DOCX, ODT, PDF, RTF, TXT, ResumeKind, detect, safe_filename

MINIMAL_PDF = (
    b"%PDF-1.4\n1 0 obj<</Type/Catalog/Pages 2 0 R>>endobj\n"
    b"2 0 obj<</Type/Pages/Kids[]/Count 0>>endobj\n"
    b"trailer<</Root 1 0 R>>\n%%EOF\n"
)
OLE2_HEADER = b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1" + b"\x00" * 504
PNG = b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + b"\x00" * 32


def make_zip(members: dict[str, bytes]) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, content in members.items():
            archive.writestr(name, content)
    return buffer.getvalue()


DOCX_BYTES = make_zip(
    {
        "[Content_Types].xml": b"<Types/>",
        "word/document.xml": b"<w:document><w:body><w:p>CV</w:p></w:body></w:document>",
    }
)
ODT_BYTES = make_zip(
    {
        "mimetype": b"application/vnd.oasis.opendocument.text",
        "content.xml": b"<office:document-content/>",
    }
)


@pytest.mark.parametrize(
    ("data", "kind"),
    [
        (MINIMAL_PDF, PDF),
        (OLE2_HEADER, DOC),
        (DOCX_BYTES, DOCX),
        (ODT_BYTES, ODT),
        (b"{\\rtf1\\ansi {\\b Curriculum} vitae}", RTF),
        ("Élodie Côté\nDéveloppeuse\tMontréal\r\n".encode(), TXT),
        ("\ufeffRésumé with a BOM\f".encode(), TXT),
    ],
    ids=["pdf", "doc", "docx", "odt", "rtf", "txt", "txt-bom"],
)
def test_allowed_types_are_detected(data: bytes, kind: ResumeKind) -> None:
    assert detect(data) == kind


@pytest.mark.parametrize(
    "data",
    [
        PNG,  # a PNG renamed cv.pdf is still a PNG
        b"MZ\x90\x00\x03\x00\x00\x00\x04\x00",  # a Windows executable
        make_zip({"readme.md": b"hello"}),  # a zip that is neither DOCX nor ODT
        make_zip({"mimetype": b"application/vnd.oasis.opendocument.spreadsheet"}),
        b"PK\x03\x04 not really a zip",
        b"",
        b"   \n\t ",
        b"text with a NUL\x00 byte",
        b"\xc3\x28 invalid utf-8",
        b"mostly\x01\x02\x03\x04\x05 control\x06\x07\x08\x0e\x0f",
    ],
    ids=["png", "exe", "zip", "ods", "bad-zip", "empty", "blank", "nul", "not-utf8", "controls"],
)
def test_other_content_is_refused(data: bytes) -> None:
    assert detect(data) is None


@pytest.mark.parametrize(
    ("name", "kind", "expected"),
    [
        ("cv.exe", PDF, "cv.pdf"),  # a wrong extension is replaced
        ("CV", DOCX, "CV.docx"),  # a missing one is added
        ("cv.PDF", PDF, "cv.pdf"),
        ("../../etc/passwd", TXT, "passwd.txt"),
        ("C:\\Users\\élodie\\Mon CV.doc", DOC, "Mon CV.doc"),
        ("Élodie Côté — CV.rtf", RTF, "Elodie Cote _ CV.rtf"),
        ("..hidden.pdf", PDF, "hidden.pdf"),
        ("a<>:|?*b.odt", ODT, "a_b.odt"),
        ("Jean.Dupont.CV.pdf", PDF, "Jean.Dupont.CV.pdf"),
        (None, PDF, "resume.pdf"),
        ("", TXT, "resume.txt"),
        ("简历.pdf", PDF, "resume.pdf"),
        ("dir/", PDF, "resume.pdf"),
    ],
)
def test_safe_filename(name: str | None, kind: ResumeKind, expected: str) -> None:
    assert safe_filename(name, kind) == expected


def test_safe_filename_is_at_most_100_characters() -> None:
    name = safe_filename("x" * 300 + ".docx", DOCX)
    assert len(name) == 100
    assert name.endswith("x.docx")
