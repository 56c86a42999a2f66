"""Minimal real résumé files, and look-alikes of other types, built in memory (C8)."""

from __future__ import annotations

import io
import struct
import zipfile

OLE2 = b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1"
OLE2_HEADER = OLE2 + b"\x00" * 504  # the signature, then a header of zeros: no valid file
NOSTREAM = FREESECT = 0xFFFFFFFF
ENDOFCHAIN = 0xFFFFFFFE
FATSECT = 0xFFFFFFFD
STORAGE, STREAM, ROOT = 1, 2, 5

# A directory entry: name, object type, left sibling, right sibling, child (stream ids).
Entry = tuple[str, int, int, int, int]


def compound_file(entries: list[Entry], *, shift: int = 9) -> bytes:
    """An [MS-CFB] compound file (version 3, or 4 with `shift=12`) holding `entries`.

    The FAT comes first, then the directory; every stream is empty, which the format allows, so
    no stream data and no mini stream are needed.
    """
    size = 1 << shift
    per_sector = size // 128
    directory = b"".join(_entry(*entry) for entry in entries)
    directory += _entry("", 0, NOSTREAM, NOSTREAM, NOSTREAM) * (-len(entries) % per_sector)
    sectors = len(directory) // size
    fats = -(-sectors // (size // 4 - 1))  # FAT sectors mapping themselves and the directory
    assert fats <= 109, "more FAT sectors than the header's DIFAT holds"
    fat = [FATSECT] * fats + [*range(fats + 1, fats + sectors), ENDOFCHAIN]
    fat += [FREESECT] * (fats * size // 4 - len(fat))
    header = struct.pack(
        "<8s16sHHHHH6sIIIIIIIII",
        OLE2,
        b"",
        0x3E,
        3 if shift == 9 else 4,
        0xFFFE,
        shift,
        6,  # mini sector shift
        b"",
        0 if shift == 9 else sectors,  # directory sectors (version 4 only)
        fats,
        fats,  # first directory sector
        0,
        4096,  # mini stream cutoff
        ENDOFCHAIN,  # no mini FAT
        0,
        ENDOFCHAIN,  # no DIFAT sector
        0,
    ) + struct.pack("<109I", *range(fats), *[FREESECT] * (109 - fats))
    return header.ljust(size, b"\x00") + struct.pack(f"<{len(fat)}I", *fat) + directory


def fat_entry(data: bytes, sector: int, value: int) -> bytes:
    """`data` (version 3) with the FAT entry of `sector` set to `value` (the FAT starts at
    sector 0)."""
    offset = 512 + 4 * sector
    return data[:offset] + struct.pack("<I", value) + data[offset + 4 :]


def _entry(name: str, kind: int, left: int, right: int, child: int) -> bytes:
    encoded = (name + "\x00").encode("utf-16-le") if kind else b""
    return struct.pack(
        "<64sHBBIII16sI16sIQ",
        encoded,
        len(encoded),
        kind,
        1,  # black
        left,
        right,
        child,
        b"",
        0,
        b"",
        ENDOFCHAIN,  # an empty stream has no sector
        0,
    )


def ole2(streams: list[str]) -> bytes:
    """A compound file whose root storage holds the empty `streams`, siblings in a chain."""
    entries: list[Entry] = [("Root Entry", ROOT, NOSTREAM, NOSTREAM, 1 if streams else NOSTREAM)]
    for i, name in enumerate(streams, start=1):
        entries.append((name, STREAM, NOSTREAM, i + 1 if i < len(streams) else NOSTREAM, NOSTREAM))
    return compound_file(entries)


# A Word 97-2003 document's root storage, as a red-black tree with WordDocument three deep.
WORD_ENTRIES: list[Entry] = [
    ("Root Entry", ROOT, NOSTREAM, NOSTREAM, 1),
    ("\x01CompObj", STREAM, 2, 3, NOSTREAM),
    ("1Table", STREAM, NOSTREAM, NOSTREAM, NOSTREAM),
    ("\x05SummaryInformation", STREAM, 4, 5, NOSTREAM),
    ("WordDocument", STREAM, NOSTREAM, NOSTREAM, NOSTREAM),
    ("\x05DocumentSummaryInformation", STREAM, NOSTREAM, NOSTREAM, NOSTREAM),
]
DOC_BYTES = compound_file(WORD_ENTRIES)
# The same document carrying a VBA project, as Word 97 keeps one: a `Macros` storage beside
# WordDocument (both in the directory's second sector) holding the project's streams and its
# `VBA` storage.
WORD_MACRO_ENTRIES: list[Entry] = [
    *WORD_ENTRIES[:5],
    ("\x05DocumentSummaryInformation", STREAM, NOSTREAM, 6, NOSTREAM),
    ("Macros", STORAGE, NOSTREAM, NOSTREAM, 7),
    ("PROJECT", STREAM, NOSTREAM, 8, NOSTREAM),
    ("VBA", STORAGE, NOSTREAM, 9, 10),
    ("PROJECTwm", STREAM, NOSTREAM, NOSTREAM, NOSTREAM),
    ("dir", STREAM, NOSTREAM, 11, NOSTREAM),
    ("ThisDocument", STREAM, NOSTREAM, 12, NOSTREAM),
    ("_VBA_PROJECT", STREAM, NOSTREAM, NOSTREAM, NOSTREAM),
]
DOC_MACROS_BYTES = compound_file(WORD_MACRO_ENTRIES)
XLS_BYTES = ole2(["Workbook", "\x05SummaryInformation"])
PPT_BYTES = ole2(["Current User", "PowerPoint Document"])
MSG_BYTES = ole2(["__nameid_version1.0", "__properties_version1.0", "__substg1.0_0037001F"])


def make_zip(members: dict[str, bytes], method: int = zipfile.ZIP_DEFLATED) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", method) as archive:
        for name, content in members.items():
            archive.writestr(name, content)
    return buffer.getvalue()


def content_types(main: str, *defaults: tuple[str, str]) -> bytes:
    """An OPC [Content_Types].xml naming `main` the type of /word/document.xml."""
    pairs = [("rels", "application/vnd.openxmlformats-package.relationships+xml"), *defaults]
    return (
        '<?xml version="1.0" encoding="UTF-8" standalone="yes"?>\n'
        '<Types xmlns="http://schemas.openxmlformats.org/package/2006/content-types">'
        + "".join(f'<Default Extension="{ext}" ContentType="{ct}"/>' for ext, ct in pairs)
        + f'<Override PartName="/word/document.xml" ContentType="{main}"/></Types>'
    ).encode()


DOCX_MAIN = "application/vnd.openxmlformats-officedocument.wordprocessingml.document.main+xml"
DOCM_MAIN = "application/vnd.ms-word.document.macroEnabled.main+xml"
DOCUMENT_XML = b"<w:document><w:body><w:p>CV</w:p></w:body></w:document>"
RELS = (
    b'<Relationships xmlns="http://schemas.openxmlformats.org/package/2006/relationships">'
    b'<Relationship Id="rId1" Target="word/document.xml" Type="http://schemas.openxmlformats.org'
    b'/officeDocument/2006/relationships/officeDocument"/></Relationships>'
)
DOCX_BYTES = make_zip(
    {
        "[Content_Types].xml": content_types(DOCX_MAIN),
        "_rels/.rels": RELS,
        "word/document.xml": DOCUMENT_XML,
    }
)
DOCM_BYTES = make_zip(
    {
        "[Content_Types].xml": content_types(
            DOCM_MAIN, ("bin", "application/vnd.ms-office.vbaProject")
        ),
        "_rels/.rels": RELS,
        "word/document.xml": DOCUMENT_XML,
        "word/vbaProject.bin": OLE2_HEADER,
    }
)
ODT_BYTES = make_zip(
    {
        "mimetype": b"application/vnd.oasis.opendocument.text",
        "content.xml": b"<office:document-content/>",
    }
)
