"""Job representations kept per web process, served only while the job is unchanged.

GET one job is the call employers' systems repeat most. Building its JSON takes the ORM a
few queries' worth of work; checking that a kept copy is still right costs nothing more than
the key's own statement, which also reads the job's version (`models.employers.authenticate`),
because every write raises that version. A copy
is kept under the version it was made from and the employer name it shows, and is served
only while both still hold, so a change made through any process is seen at once. The
public job page (C8, C13) is kept the same way, by job, language and address.
"""

from __future__ import annotations

import hashlib
import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable
from dataclasses import dataclass
from typing import Generic, TypeVar

Key = TypeVar("Key", bound=Hashable)

# What an entry holds beyond its body: the Entry, its ETag, the key, the map's node (measured:
# docs/benchmarks.md).
OVERHEAD = 256


@dataclass(frozen=True, slots=True)
class Entry:
    version: int
    employer_name: str
    body: bytes
    etag: str  # a strong validator of `body`


class Representations(Generic[Key]):
    """A least-recently-used map of job (a job id, or a job's page) to Entry, bounded by the
    bytes the entries take."""

    def __init__(self, max_bytes: int) -> None:
        self.max_bytes = max_bytes
        self.max_entry = max_bytes // 16  # a few huge descriptions cannot evict all the rest
        self._entries: OrderedDict[Key, Entry] = OrderedDict()
        self._bytes = 0
        self._lock = threading.Lock()  # gunicorn's sync workers have one thread; others may not

    def get(self, job_id: Key, version: int, employer_name: str) -> Entry | None:
        with self._lock:
            entry = self._entries.get(job_id)
            if entry is None:
                return None
            if entry.version != version or entry.employer_name != employer_name:
                self._drop(job_id)
                return None
            self._entries.move_to_end(job_id)
            return entry

    def put(
        self, job_id: Key, version: int, employer_name: str, body: bytes, tag: str | None = None
    ) -> Entry:
        """Keep `body`, with its ETag: `tag` when given (a job's, `models.jobs.digest.etag`),
        else the body's hash (a page's)."""
        entry = Entry(version, employer_name, body, tag if tag is not None else etag(body))
        if _size(entry) > self.max_entry:
            return entry
        with self._lock:
            self._drop(job_id)
            self._entries[job_id] = entry
            self._bytes += _size(entry)
            while self._bytes > self.max_bytes:
                self._drop(next(iter(self._entries)))
        return entry

    def holds(self, job_id: Key) -> bool:
        """Whether a copy of the job is kept, of whatever version."""
        return job_id in self._entries

    def __len__(self) -> int:
        return len(self._entries)

    @property
    def size(self) -> int:
        """The bytes the entries take."""
        return self._bytes

    def _drop(self, job_id: Key) -> None:
        entry = self._entries.pop(job_id, None)
        if entry is not None:
            self._bytes -= _size(entry)


def etag(body: bytes) -> str:
    """A strong validator of a page's bytes. A job's is derived from what is stored instead
    (`models.jobs.digest.etag`), so the digest of C24 needs no job's JSON."""
    return '"' + hashlib.blake2b(body, digest_size=16).hexdigest() + '"'


def _size(entry: Entry) -> int:
    return len(entry.body) + OVERHEAD


class Recent:
    """Pages kept for a few seconds by their address (the public search, C17), bounded by
    the bytes they take: a page shown to everyone that may be as old as its Cache-Control
    says, so the same search asked again within `seconds` is not read and rendered again."""

    def __init__(self, max_bytes: int, seconds: float, clock: Callable[[], float]) -> None:
        self.max_bytes, self.seconds, self._clock = max_bytes, seconds, clock
        self._entries: OrderedDict[str, tuple[float, bytes]] = OrderedDict()
        self._bytes = 0
        self._lock = threading.Lock()

    def get(self, address: str) -> bytes | None:
        with self._lock:
            found = self._entries.get(address)
            if found is None:
                return None
            if found[0] <= self._clock():
                self._drop(address)
                return None
            return found[1]

    def put(self, address: str, body: bytes) -> None:
        if self.seconds <= 0 or len(body) + OVERHEAD > self.max_bytes // 16:
            return
        with self._lock:
            self._drop(address)
            self._entries[address] = (self._clock() + self.seconds, body)
            self._bytes += len(body) + OVERHEAD
            while self._bytes > self.max_bytes:
                self._drop(next(iter(self._entries)))

    def _drop(self, address: str) -> None:
        found = self._entries.pop(address, None)
        if found is not None:
            self._bytes -= len(found[1]) + OVERHEAD
