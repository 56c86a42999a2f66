"""C8: a résumé is judged by its content, never its extension; its filename is made harmless."""

from __future__ import annotations

import io
import random
import struct
import time
import zipfile

import pytest

from models.applications.resumes import (
    DOC,
    DOCX,
    ODT,
    PDF,
    RTF,
    TXT,
    ResumeKind,
    detect,
    safe_filename,
)
from tests.resume_files import (
    DOC_BYTES,
    DOC_MACROS_BYTES,
    DOCM_BYTES,
    DOCM_MAIN,
    DOCUMENT_XML,
    DOCX_BYTES,
    DOCX_MAIN,
    ENDOFCHAIN,
    MSG_BYTES,
    NOSTREAM,
    ODT_BYTES,
    OLE2,
    OLE2_HEADER,
    PPT_BYTES,
    RELS,
    ROOT,
    STORAGE,
    STREAM,
    WORD_ENTRIES,
    WORD_MACRO_ENTRIES,
    XLS_BYTES,
    Entry,
    compound_file,
    content_types,
    fat_entry,
    make_zip,
    ole2,
)

MINIMAL_PDF = (
    b"%PDF-1.4\n1 0 obj<</Type/Catalog/Pages 2 0 R>>endobj\n"
    b"2 0 obj<</Type/Pages/Kids[]/Count 0>>endobj\n"
    b"trailer<</Root 1 0 R>>\n%%EOF\n"
)
DOCX_TYPES = content_types(DOCX_MAIN)
PNG = b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + b"\x00" * 32


@pytest.mark.parametrize(
    ("data", "kind"),
    [
        (MINIMAL_PDF, PDF),
        (DOC_BYTES, DOC),
        (compound_file(WORD_ENTRIES, shift=12), DOC),  # version 4, 4096-byte sectors
        (ole2(["WordDocument"]), DOC),
        (DOCX_BYTES, DOCX),
        (make_zip({"[Content_Types].xml": DOCX_TYPES, "word/document.xml": DOCUMENT_XML}), DOCX),
        (ODT_BYTES, ODT),
        (b"{\\rtf1\\ansi {\\b Curriculum} vitae}", RTF),
        (b"{\\rtf1\\ansi\\ansicpg1252 \xc9lodie C\xf4t\xe9\\par\r\n}", RTF),  # raw 8-bit text
        ("Élodie Côté\nDéveloppeuse\tMontréal\r\n".encode(), TXT),
        ("\ufeffRésumé with a BOM\f".encode(), TXT),
        (b"<html><script>alert(1)</script></html>", TXT),  # served as a text/plain attachment
        (b"{\\rtf1 " + b"a" * 91 + b"\x01\x02", RTF),  # 2 control bytes in 100: the most allowed
        (b"a" * 98 + b"\x01\x02", TXT),
    ],
    ids=[
        "pdf",
        "doc",
        "doc-v4",
        "doc-bare",
        "docx",
        "docx-bare",
        "odt",
        "rtf",
        "rtf-8-bit",
        "txt",
        "txt-bom",
        "html",
        "rtf-2%-controls",
        "txt-2%-controls",
    ],
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
        "Élodie Côté, Montréal".encode("latin-1"),  # only UTF-8 is text
        "Élodie Côté, Montréal".encode("utf-16"),  # with its BOM
        b"mostly\x01\x02\x03\x04\x05 control\x06\x07\x08\x0e\x0f",
        b"{\\rtf1" + b"MZ\x90\x00\x03\x00\x00\x00\x04\x00" * 50,  # an executable behind the prefix
        b"{\\rtf" + make_zip({"readme.md": b"hello"}),
        b"{\\rtf1 " + bytes(range(1, 9)) * 40,  # control characters, no NUL
        b"{\\rtf1\\ansi " + b"Curriculum vitae " * 20 + b"\x00}",  # one NUL: binary
        b"Curriculum vitae " * 20 + b"\x00",
    ],
    ids=[
        "png",
        "exe",
        "zip",
        "ods",
        "bad-zip",
        "empty",
        "blank",
        "nul",
        "not-utf8",
        "latin-1",
        "utf-16",
        "controls",
        "rtf-exe",
        "rtf-zip",
        "rtf-controls",
        "rtf-nul",
        "txt-nul",
    ],
)
def test_other_content_is_refused(data: bytes) -> None:
    assert detect(data) is None


def _difat(data: bytes, *fat_sectors: int) -> bytes:
    """`data` with the header's first DIFAT entries (where its FAT sectors are) replaced."""
    packed = struct.pack(f"<{len(fat_sectors)}I", *fat_sectors)
    return data[:76] + packed + data[76 + len(packed) :]


# An Excel file with an embedded Word object: the WordDocument stream is in a sub-storage.
EMBEDDED_WORD = compound_file(
    [
        ("Root Entry", ROOT, NOSTREAM, NOSTREAM, 1),
        ("Workbook", STREAM, NOSTREAM, 2, NOSTREAM),
        ("MBD0012A3F4", STORAGE, NOSTREAM, NOSTREAM, 3),
        ("WordDocument", STREAM, NOSTREAM, NOSTREAM, NOSTREAM),
    ]
)
# A WordDocument entry in the directory that the root storage's tree does not reach.
UNLINKED_WORD = compound_file(
    [
        ("Root Entry", ROOT, NOSTREAM, NOSTREAM, 1),
        ("Workbook", STREAM, NOSTREAM, NOSTREAM, NOSTREAM),
        ("WordDocument", STREAM, NOSTREAM, NOSTREAM, NOSTREAM),
    ]
)
# The first directory entry is a storage, not the root storage [MS-CFB] requires.
NO_ROOT = compound_file(
    [
        ("Root Entry", STORAGE, NOSTREAM, NOSTREAM, 1),
        ("WordDocument", STREAM, NOSTREAM, NOSTREAM, NOSTREAM),
    ]
)
WORD_STORAGE = compound_file(
    [
        ("Root Entry", ROOT, NOSTREAM, NOSTREAM, 1),
        ("WordDocument", STORAGE, NOSTREAM, NOSTREAM, NOSTREAM),
    ]
)


@pytest.mark.parametrize(
    "data",
    [
        OLE2_HEADER,
        XLS_BYTES,
        PPT_BYTES,
        MSG_BYTES,
        EMBEDDED_WORD,
        UNLINKED_WORD,
        WORD_STORAGE,
        DOC_BYTES[:1536],  # cut before the directory sector holding WordDocument
        fat_entry(DOC_BYTES, 1, ENDOFCHAIN),  # the directory chain ends before it
        OLE2,  # the signature alone
        DOC_BYTES[:511],  # a header cut short
        _difat(DOC_BYTES, len(DOC_BYTES) // 512 - 1),  # the FAT "sector" is past the end
        DOC_BYTES[:1024],  # the header and FAT, the directory cut off
        NO_ROOT,
    ],
    ids=[
        "header",
        "xls",
        "ppt",
        "msg",
        "embedded",
        "unlinked",
        "storage",
        "cut",
        "short-chain",
        "signature",
        "short-header",
        "fat-past-end",
        "no-directory",
        "no-root",
    ],
)
def test_a_compound_file_without_a_word_document_stream_is_not_doc(data: bytes) -> None:
    # C8: DOC is a Word 97-2003 document, not any OLE2 file (Excel, PowerPoint, Outlook…).
    assert detect(data) is None


# A Word document whose directory runs past sector 127, so its chain needs the second FAT
# sector: 598 unused entries come before WordDocument, the root's only child.
BIG_DIRECTORY = compound_file(
    [("Root Entry", ROOT, NOSTREAM, NOSTREAM, 599)]
    + [("", 0, NOSTREAM, NOSTREAM, NOSTREAM)] * 598
    + [("WordDocument", STREAM, NOSTREAM, NOSTREAM, NOSTREAM)]
)


@pytest.mark.parametrize(
    "data",
    [
        # The one FAT sector copied to a new last sector, which the header names.
        _difat(DOC_BYTES, len(DOC_BYTES) // 512 - 1) + DOC_BYTES[512:1024],
        BIG_DIRECTORY,
        # The same, its two FAT sectors stored in the other order.
        _difat(BIG_DIRECTORY, 1, 0)[:512]
        + BIG_DIRECTORY[1024:1536]
        + BIG_DIRECTORY[512:1024]
        + BIG_DIRECTORY[1536:],
    ],
    ids=["fat-at-the-end", "two-fat-sectors", "fat-sectors-reordered"],
)
def test_a_word_document_is_doc_wherever_its_fat_sectors_are(data: bytes) -> None:
    # Word writes the FAT where it likes; the header's DIFAT says where.
    assert struct.unpack_from("<I", data, 44)[0] in (1, 2)  # FAT sectors
    assert detect(data) == DOC


TEMPLATE_MACROS = "application/vnd.ms-word.template.macroEnabledTemplate.main+xml"


@pytest.mark.parametrize(
    "members",
    [
        {"word/document.xml": DOCUMENT_XML},  # no [Content_Types].xml
        {"[Content_Types].xml": b"<Types/>", "word/document.xml": DOCUMENT_XML},
        {"[Content_Types].xml": content_types(TEMPLATE_MACROS), "word/document.xml": DOCUMENT_XML},
        {  # declared a plain DOCX, but carrying a VBA project
            "[Content_Types].xml": content_types(DOCX_MAIN),
            "_rels/.rels": RELS,
            "word/document.xml": DOCUMENT_XML,
            "word/vbaProject.bin": OLE2,
        },
        {  # declared a plain DOCX, but with a macro-enabled part too
            "[Content_Types].xml": content_types(DOCX_MAIN, ("xmlm", DOCM_MAIN)),
            "_rels/.rels": RELS,
            "word/document.xml": DOCUMENT_XML,
        },
    ],
    ids=["no-content-types", "undeclared", "dotm", "vba-project", "macro-enabled-part"],
)
def test_macro_enabled_or_undeclared_word_zips_are_not_docx(members: dict[str, bytes]) -> None:
    assert detect(make_zip(members)) is None


def test_docm_is_not_docx() -> None:
    # C8: a macro-enabled Word document (DOCM) renamed cv.docx is refused.
    assert detect(DOCM_BYTES) is None


@pytest.mark.parametrize(
    "extra",
    [
        {"Basic/script-lc.xml": b"<library:libraries/>", "Basic/Standard/Module1.xml": b"x"},
        {"Scripts/python/cv.py": b"import os"},
    ],
    ids=["basic", "scripts"],
)
def test_an_odt_carrying_macros_is_refused(extra: dict[str, bytes]) -> None:
    mimetype = {"mimetype": b"application/vnd.oasis.opendocument.text"}
    assert detect(make_zip(mimetype | {"content.xml": b"<x/>"})) == ODT
    assert detect(make_zip(mimetype | {"content.xml": b"<x/>"} | extra)) is None


@pytest.mark.parametrize(
    "mimetype", [b"application/vnd.oasis.opendocument.text-template", b"application/zip"]
)
def test_other_odf_types_are_not_odt(mimetype: bytes) -> None:
    assert detect(make_zip({"mimetype": mimetype, "content.xml": b"<x/>"})) is None


def test_zip_bombs_are_refused_without_inflating_them() -> None:
    bomb = b"\x00" * (64 * 1024 * 1024)  # a few dozen KiB deflated
    started = time.monotonic()
    assert detect(make_zip({"mimetype": bomb})) is None
    assert detect(make_zip({"[Content_Types].xml": bomb, "word/document.xml": b"<x/>"})) is None
    assert time.monotonic() - started < 5


@pytest.mark.parametrize("method", [zipfile.ZIP_BZIP2, zipfile.ZIP_LZMA], ids=["bzip2", "lzma"])
def test_members_compressed_other_than_by_deflate_are_not_read(method: int) -> None:
    # zipfile would inflate such a member whole before any read limit applies.
    for data in (DOCX_BYTES, ODT_BYTES):
        with zipfile.ZipFile(io.BytesIO(data)) as source:
            members = {name: source.read(name) for name in source.namelist()}
        assert detect(make_zip(members, method)) is None


# --- Word 97-2003 documents carrying macros (C8: refused, as DOCM is) -----------------------


def renamed(entries: list[Entry], old: str, new: str, kind: int | None = None) -> list[Entry]:
    """`entries` with the entry named `old` named `new` (and of object type `kind`)."""
    return [
        (new, entry[1] if kind is None else kind, *entry[2:]) if entry[0] == old else entry
        for entry in entries
    ]


MACROS_ID = [entry[0] for entry in WORD_MACRO_ENTRIES].index("Macros")


def with_entry_field(data: bytes, stream_id: int, at: int, value: bytes) -> bytes:
    """`data` (version 3, its directory after its FAT) with bytes `at` of an entry replaced."""
    fats = struct.unpack_from("<I", data, 44)[0]
    offset = 512 * (1 + fats) + 128 * stream_id + at
    return data[:offset] + value + data[offset + len(value) :]


# A Word document embedding another that carries macros, in its ObjectPool storage.
EMBEDDED_MACROS_ENTRIES: list[Entry] = [
    ("Root Entry", ROOT, NOSTREAM, NOSTREAM, 1),
    ("WordDocument", STREAM, NOSTREAM, 2, NOSTREAM),
    ("ObjectPool", STORAGE, NOSTREAM, NOSTREAM, 3),
    ("_1234567890", STORAGE, NOSTREAM, NOSTREAM, 4),
    ("WordDocument", STREAM, NOSTREAM, 5, NOSTREAM),
    ("Macros", STORAGE, NOSTREAM, NOSTREAM, NOSTREAM),
]
EMBEDDED_MACROS = compound_file(EMBEDDED_MACROS_ENTRIES)


@pytest.mark.parametrize(
    "data",
    [
        DOC_MACROS_BYTES,
        compound_file(WORD_MACRO_ENTRIES, shift=12),
        compound_file(renamed(WORD_MACRO_ENTRIES, "Macros", "_VBA_PROJECT_CUR")),
        compound_file(renamed(WORD_MACRO_ENTRIES, "Macros", "MACROS")),
        compound_file(renamed(WORD_MACRO_ENTRIES, "Macros", "Macros", STREAM)),
        with_entry_field(DOC_MACROS_BYTES, MACROS_ID, 64, b"\x00\x00"),  # a name length of 0
        EMBEDDED_MACROS,
    ],
    ids=["macros", "v4", "vba-project-cur", "upper-case", "stream", "no-name-length", "embedded"],
)
def test_a_word_document_carrying_macros_is_refused(data: bytes) -> None:
    assert detect(data) is None


@pytest.mark.parametrize(
    "data",
    [
        compound_file(renamed(WORD_MACRO_ENTRIES, "Macros", "Macros2")),
        with_entry_field(DOC_MACROS_BYTES, MACROS_ID, 66, b"\x00"),  # its entry now unused
        compound_file(renamed(EMBEDDED_MACROS_ENTRIES, "Macros", "Data")),
    ],
    ids=["other-name", "unused-entry", "embedded-without-macros"],
)
def test_a_word_document_with_storages_of_other_names_is_doc(data: bytes) -> None:
    assert detect(data) == DOC


def test_no_truncation_or_corruption_of_a_macro_document_is_doc_or_raises() -> None:
    # Macros and WordDocument share a directory sector: a cut keeps both, or neither.
    for end in range(len(DOC_MACROS_BYTES) + 1):
        assert detect(DOC_MACROS_BYTES[:end]) is None
    rng = random.Random(97)
    for _ in range(3000):
        corrupt = bytearray(DOC_MACROS_BYTES)
        for _ in range(rng.randint(1, 8)):
            corrupt[rng.randrange(len(corrupt))] = rng.choice(
                [0, 1, 0xFE, 0xFF, rng.randrange(256)]
            )
        assert detect(bytes(corrupt)) in (DOC, None)


# --- Hostile compound files: broken or cyclic, never an exception, always bounded work ----


def test_every_truncation_and_many_corruptions_answer_without_raising() -> None:
    for data in (DOC_BYTES, compound_file(WORD_ENTRIES, shift=12), DOCX_BYTES, ODT_BYTES):
        for end in range(len(data)):
            detect(data[:end])
    rng = random.Random(8)
    for _ in range(3000):
        corrupt = bytearray(DOC_BYTES)
        for _ in range(rng.randint(1, 8)):
            corrupt[rng.randrange(len(corrupt))] = rng.choice(
                [0, 1, 0xFE, 0xFF, rng.randrange(256)]
            )
        assert detect(bytes(corrupt)) in (DOC, None)


def test_cycles_in_chains_and_trees_end() -> None:
    looped_chain = fat_entry(DOC_BYTES, 2, 1)  # the directory's last sector points to its first
    assert detect(looped_chain) == DOC
    looped_tree = compound_file(
        [
            ("Root Entry", ROOT, NOSTREAM, NOSTREAM, 1),
            ("Workbook", STREAM, 1, 2, 0),
            ("Book", STREAM, 2, 1, 1),
        ]
    )
    assert detect(looped_tree) is None
    assert detect(fat_entry(looped_tree, 1, 1)) is None


def test_a_huge_directory_is_walked_in_bounded_time() -> None:
    # About 5 MiB of directory (40,000 entries, 80 FAT sectors): siblings in one long chain whose
    # end points back to its start, and the directory chain looping back to its first sector.
    count = 40_000
    entries = [("Root Entry", ROOT, NOSTREAM, NOSTREAM, 1)]
    entries += [("Workbook", STREAM, NOSTREAM, i % (count - 1) + 1, i) for i in range(1, count)]
    data = compound_file(entries)
    fats = struct.unpack_from("<I", data, 44)[0]
    data = fat_entry(data, fats + count // 4 - 1, fats)
    assert len(data) <= 5 * 1024 * 1024
    started = time.monotonic()
    assert detect(data) is None
    assert time.monotonic() - started < 2


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
