"""Résumé rules of C8: the type is judged by the content, never by the filename.

- PDF: starts with `%PDF-`.
- RTF: starts with `{\\rtf` and is text (see `_is_rtf`): an executable or a zip behind the
  prefix is refused.
- DOC: a Word 97-2003 document, an OLE2 compound file ([MS-CFB]) whose root storage holds a
  `WordDocument` stream; other compound files (Excel, PowerPoint, Outlook messages…) are refused,
  and so is one whose directory holds a VBA project (`Macros` or `_VBA_PROJECT_CUR`), as DOCM is.
- DOCX: a zip with `word/document.xml`, whose `[Content_Types].xml` declares the WordprocessingML
  document type and nothing macro-enabled, and with no `vbaProject.bin` (so no DOCM or DOTM).
- ODT: a zip whose `mimetype` is exactly the ODF text type (not a template, sheet or other ODF
  type), without macros (no `Basic/` or `Scripts/` folder).
- TXT: anything else that is UTF-8 text (see `_is_text`); other encodings are refused.

Hostile input costs bounded work and answers None, never an exception.
"""

from __future__ import annotations

import io
import re
import struct
import unicodedata
import zipfile
import zlib
from dataclasses import dataclass

MAX_RESUME_BYTES = 5 * 1024 * 1024

_OLE2 = b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1"
_WORD_STREAM = "WordDocument\x00".encode("utf-16-le")  # a directory entry's name, with its NUL
_CFB_STORAGE, _CFB_STREAM, _CFB_ROOT = 1, 2, 5  # directory entry object types
# Where Word (Macros) and the other Office programs (_VBA_PROJECT_CUR) keep a VBA project;
# [MS-CFB] compares names without case, so any case names the same storage.
_VBA_STORAGES = {"MACROS", "_VBA_PROJECT_CUR"}
_ZIP = b"PK\x03\x04"
_ODT_MIMETYPE = b"application/vnd.oasis.opendocument.text"
_DOCX_MAIN = b"application/vnd.openxmlformats-officedocument.wordprocessingml.document.main+xml"
_MAX_CONTENT_TYPES = 1024 * 1024
_CONTROL = re.compile(r"[\x00-\x08\x0b\x0e-\x1f\x7f-\x9f]")  # all Cc but \t \n \f \r
_CONTROL_BYTES = re.compile(rb"[\x00-\x08\x0b\x0e-\x1f\x7f]")  # the same, in 7-bit bytes
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
        return DOC if _is_word_document(data) else None
    if data.startswith(b"{\\rtf"):
        return RTF if _is_rtf(data) else None
    if data.startswith(_ZIP):
        return _zip_kind(data)
    return TXT if _is_text(data) else None


def _is_word_document(data: bytes) -> bool:  # noqa: C901 (one walk of a compound file, its bounds checked)
    """A compound file whose root storage has a `WordDocument` stream among its children, and
    with no entry of a VBA project anywhere in its directory (an embedded object's included).

    Reads the header, follows the directory's sector chain through the FAT, then walks the root
    storage's tree of children (left and right siblings), then reads every entry's name once.
    Each sector and tree entry is visited at most once and every number is checked against the
    file, so a broken or cyclic file costs work bounded by its size and answers False. Only the
    header's 109 FAT sectors are used: they map at least 7 MiB, more than a résumé may weigh.
    """
    if len(data) < 512:
        return False
    major, byte_order, shift = struct.unpack_from("<3H", data, 26)
    if byte_order != 0xFFFE or (major, shift) not in {(3, 9), (4, 12)}:
        return False
    size: int = 1 << shift
    count = len(data) // size - 1  # whole sectors after the header
    fat_sectors: tuple[int, ...] = struct.unpack_from("<109I", data, 76)  # the header's DIFAT

    def next_sector(sector: int) -> int:
        """The FAT's next sector after `sector`, or `count` (none) when it cannot be read."""
        index, slot = divmod(sector, size // 4)
        where = fat_sectors[index] if index < len(fat_sectors) else count
        if where >= count:
            return count
        return int(struct.unpack_from("<I", data, (where + 1) * size + 4 * slot)[0])

    chain: list[int] = []  # the directory's sectors, in order
    seen: set[int] = set()
    sector = int(struct.unpack_from("<I", data, 48)[0])
    while sector < count and sector not in seen:
        seen.add(sector)
        chain.append(sector)
        sector = next_sector(sector)

    per_sector = size // 128
    entries = len(chain) * per_sector

    def offset_of(stream_id: int) -> int:
        sector, slot = divmod(stream_id, per_sector)
        return (chain[sector] + 1) * size + slot * 128

    def entry(stream_id: int) -> tuple[bytes, int, int, int, int]:
        """Name (its declared length), object type, left sibling, right sibling and child."""
        offset = offset_of(stream_id)
        name_length, kind = struct.unpack_from("<HB", data, offset + 64)
        left, right, child = struct.unpack_from("<3I", data, offset + 68)
        return data[offset : offset + min(name_length, 64)], kind, left, right, child

    if not chain:
        return False
    _, kind, _, _, child = entry(0)
    if kind != _CFB_ROOT:
        return False
    todo, visited = [child], set()
    while todo:
        stream_id = todo.pop()
        if stream_id >= entries or stream_id in visited:
            continue
        visited.add(stream_id)
        name, kind, left, right, _ = entry(stream_id)
        if kind == _CFB_STREAM and name == _WORD_STREAM:
            return not any(_is_vba(data, offset_of(i)) for i in range(entries))
        todo += (left, right)
    return False


def _is_vba(data: bytes, offset: int) -> bool:
    """Whether the directory entry at `offset` is a VBA project's storage (or a stream of its
    name). Its name is read up to its NUL, whatever length the entry declares."""
    if data[offset + 66] not in (_CFB_STORAGE, _CFB_STREAM):
        return False
    name = data[offset : offset + 64].decode("utf-16-le", "replace").split("\x00", 1)[0]
    return name.upper() in _VBA_STORAGES


def _zip_kind(data: bytes) -> ResumeKind | None:
    """DOCX or ODT by the archive's members; anything else (or a broken zip) is None."""
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as archive:
            names = set(archive.namelist())
            lowered = [name.lower() for name in names]
            if "word/document.xml" in names:
                types = _member(archive, "[Content_Types].xml", _MAX_CONTENT_TYPES)
                plain = (
                    _DOCX_MAIN in types
                    and b"macroenabled" not in types.lower()
                    and not any(name.rsplit("/", 1)[-1] == "vbaproject.bin" for name in lowered)
                )
                return DOCX if plain else None
            if "mimetype" in names:
                macros = any(name.startswith(("basic/", "scripts/")) for name in lowered)
                mimetype = _member(archive, "mimetype", 100).strip()
                return ODT if mimetype == _ODT_MIMETYPE and not macros else None
    except _ZIP_ERRORS:
        return None
    return None


def _member(archive: zipfile.ZipFile, name: str, limit: int) -> bytes:
    """The member's content, or b"" when it is missing, inflates past `limit` bytes, or is
    neither stored nor deflated (OOXML and ODF use nothing else; zipfile would inflate a bzip2
    or LZMA member whole, however large, before the limit applies)."""
    try:
        info = archive.getinfo(name)
    except KeyError:
        return b""
    if info.compress_type not in (zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED):
        return b""
    with archive.open(info) as member:
        content = member.read(limit + 1)
    return content if len(content) <= limit else b""


def _is_text(data: bytes) -> bool:
    """UTF-8 (BOM allowed), no NUL, not blank, and almost no control characters.

    Only UTF-8: any bytes decode as Latin-1 or Windows-1252, so such text cannot be told from
    binary, and UTF-16 (even with a BOM) is refused to keep one rule. Any text is accepted,
    markup or script included: it is only ever served as a text/plain attachment.
    """
    if b"\x00" in data:
        return False
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError:
        return False
    if not text.strip():
        return False
    return len(_CONTROL.findall(text)) <= len(text) * _MAX_CONTROL_RATIO


def _is_rtf(data: bytes) -> bool:
    """No NUL and almost no control characters, as for TXT, counted on the bytes: RTF is 7-bit
    text, though writers also put 8-bit text of the document's code page in it. Pictures and
    objects are written in hex; raw bytes after `\\bin`, which no résumé writer uses, are
    refused with the executables and archives that would otherwise pass as RTF."""
    if b"\x00" in data:
        return False
    return len(_CONTROL_BYTES.findall(data)) <= len(data) * _MAX_CONTROL_RATIO


def charset(content_type: str) -> str | None:
    """The charset a stored résumé of this type is in, where its type needs one said: TXT is
    UTF-8 only, and text/plain without a charset is US-ASCII (RFC 2046), read as such by
    browsers and mail programs."""
    return "utf-8" if content_type == TXT.content_type else None


def served_type(content_type: str) -> str:
    """The Content-Type a stored résumé is served (and attached) with."""
    named = charset(content_type)
    return f"{content_type}; charset={named}" if named else content_type


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
