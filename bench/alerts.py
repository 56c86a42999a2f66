"""The alerts bench (C19): a daily digests run (`models.alerts.digests.plan`, no SMTP) over
100,000 confirmed daily alerts on 2,000 distinct searches, against the seeded million.

The seed's open jobs are given openings anchored on a fixed day (`ANCHOR`), whatever day the
bench runs: one in `NEW_EVERY` opened in the day before the run, the others a month before,
so every run asks the same question of the same rows. The alerts (their addresses at
`DOMAIN`) are written afresh each run, watermarked at the anchor, and deleted after with
their digests. The planning is timed and the process's resident memory sampled while it
runs; a second planning, which must queue nothing, is timed too.

Targets: planning 100,000 alerts within `SECONDS` (60 s), the process's peak resident
memory under `PEAK_RSS` (200 MB), every alert whose search has a new job given one digest,
and the second run queueing none.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

from sqlalchemy import TextClause, bindparam, delete, func, insert, select, text
from sqlalchemy.orm import Session, sessionmaker

from bench import report, seed
from bench.memory import Peak
from bench.options import Options
from bench.words import ROLES, SPECIALTIES
from models.alerts import digests
from models.alerts import filters as alert_filters
from models.db import leases
from models.db.engines import make_engine
from models.db.entities import AlertMail, AlertSubscription, UTCDateTime
from models.db.unit_of_work import make_sessionmaker, session_scope
from models.jobs.feeds import Filters
from models.jobs.workplace import PROVINCE_CODES

ALERTS = 100_000
SEARCHES = 2_000
SECONDS = 60.0
PEAK_RSS = 200_000_000
NEW_EVERY = 50  # one open job in this many opened in the last day
ANCHOR = datetime(2026, 1, 1, 12, tzinfo=UTC)  # the alerts' watermark
RUN_AT = ANCHOR + timedelta(days=1)  # the planning's now: a day later, due
DOMAIN = "alerts.bench.invalid"
CHUNK = 5_000  # alerts an INSERT writes
CATEGORIES = range(1, 31)  # the seed's
LAG = 5.0  # CHANGE_FEED_LAG_SECONDS's default


def openings(new_every: int) -> TextClause:
    """The open jobs' openings, anchored; rows already so are left alone (a second run
    rewrites none of the million)."""
    opened = f"CASE WHEN id % {int(new_every)} = 0 THEN :new ELSE :old END"
    return text(
        f"UPDATE jobs SET opened_at = {opened} WHERE status = 'active' AND NOT taken_down"
        f" AND (opened_at IS NULL OR opened_at <> {opened})"
    ).bindparams(bindparam("new", type_=UTCDateTime()), bindparam("old", type_=UTCDateTime()))


def searches(count: int) -> list[str]:
    """`count` distinct stored searches: a word of the seed's titles, a province, a category,
    and pairs of them, as people save them."""
    words = [w.lower() for w in (*ROLES, *SPECIALTIES)]
    made: list[Filters] = [Filters(q=w) for w in words]
    made += [Filters(category=c, province=p) for c in CATEGORIES for p in PROVINCE_CODES]
    made += [Filters(q=w, province=p) for w in words for p in PROVINCE_CODES]
    made += [Filters(q=w, category=c) for w in words for c in CATEGORIES]
    unique = list(dict.fromkeys(alert_filters.to_query(f) for f in made))
    if len(unique) < count:
        raise ValueError(f"only {len(unique)} distinct searches to give")
    return unique[:count]


def _alerts(total: int, stored: list[str]) -> Iterator[list[dict[str, object]]]:
    rows: Iterator[dict[str, object]] = (
        {
            "email": f"a{i}@{DOMAIN}",
            "language": "fr" if i % 4 == 0 else "en",
            "frequency": "daily",
            "filters": stored[i % len(stored)],
            "state": "confirmed",
            "created_at": ANCHOR - timedelta(days=1),
            "confirmed_at": ANCHOR,
            "last_sent_at": ANCHOR,
        }
        for i in range(total)
    )
    while chunk := list(itertools.islice(rows, CHUNK)):
        yield chunk


def prepare(
    factory: sessionmaker[Session], total: int, search_count: int, new_every: int = NEW_EVERY
) -> None:
    """The seed's openings anchored (one in `new_every` new), and `total` confirmed alerts
    over `search_count` searches, watermarked at the anchor."""
    stored = searches(search_count)
    opened = {"new": RUN_AT - timedelta(hours=12), "old": ANCHOR - timedelta(days=30)}
    with session_scope(factory) as session:
        if leases.changed(session, openings(new_every), opened):
            session.execute(text("ANALYZE jobs"))  # the planner's statistics of opened_at
    clean(factory)
    for chunk in _alerts(total, stored):
        with session_scope(factory) as session:
            session.execute(insert(AlertSubscription), chunk)
    with session_scope(factory) as session:  # as autovacuum would have, on a live database
        session.execute(text("ANALYZE alert_subscriptions"))


def clean(factory: sessionmaker[Session]) -> int:
    """The bench's alerts and their digests deleted; how many alerts."""
    with session_scope(factory) as session:
        ours = select(AlertSubscription.id).where(AlertSubscription.email.like(f"%@{DOMAIN}"))
        session.execute(delete(AlertMail).where(AlertMail.subscription_id.in_(ours)))
        gone = session.execute(delete(AlertSubscription).where(AlertSubscription.id.in_(ours)))
        return int(gone.rowcount)  # type: ignore[attr-defined]


@dataclass
class Run:
    alerts: int = 0
    searches: int = 0
    expected: int = 0  # alerts whose search has a new job, counted apart
    queued: int = 0
    seconds: float = 0.0
    peak_rss: int = 0
    rss_before: int = 0
    again_queued: int = 0
    again_seconds: float = 0.0


def _rss() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    return 0


def expected(factory: sessionmaker[Session]) -> int:
    """The alerts that should get a digest: those whose search has a job opened since."""
    with session_scope(factory) as session:
        stored = session.execute(
            select(AlertSubscription.filters, func.count())
            .where(AlertSubscription.email.like(f"%@{DOMAIN}"))
            .group_by(AlertSubscription.filters)
        ).all()
        connection = session.connection()
        until = RUN_AT - timedelta(seconds=LAG)
        return sum(
            int(n)
            for filters, n in stored
            if digests.newest_opening(
                connection, filters, since=ANCHOR, until=until, today=RUN_AT.date()
            )
        )


def measure(
    factory: sessionmaker[Session], total: int, search_count: int, new_every: int = NEW_EVERY
) -> Run:
    """Prepare, then time a planning run and a second one; the bench's alerts deleted after."""
    prepare(factory, total, search_count, new_every)
    try:
        result = Run(alerts=total, expected=expected(factory), rss_before=_rss())
        with Peak(_rss) as peak:
            began = time.perf_counter()
            planned = _plan(factory)
            result.seconds = time.perf_counter() - began
        result.peak_rss, result.queued = peak.highest, planned.queued
        result.searches = planned.searches
        began = time.perf_counter()
        result.again_queued = _plan(factory).queued
        result.again_seconds = time.perf_counter() - began
        return result
    finally:
        clean(factory)


def _plan(factory: sessionmaker[Session]) -> digests.Planned:
    return digests.plan(factory, now=RUN_AT, today=RUN_AT.date(), lag_seconds=LAG)


def run(options: Options) -> bool:
    seeded = seed.ensure(options)
    engine = make_engine(seeded.url)
    try:
        result = measure(make_sessionmaker(engine), ALERTS, SEARCHES)
    finally:
        engine.dispose()
    return show(options, result)


def show(options: Options, r: Run) -> bool:
    mb = 1e6
    print(f"\nalerts: a daily digests run over {r.alerts:,} alerts, {r.searches:,} searches")
    head = ("scenario", "alerts", "searches", "queued", "seconds", "alerts/s", "peak MB")
    body = [
        (
            "digests planned",
            f"{r.alerts:,}",
            f"{r.searches:,}",
            f"{r.queued:,}",
            f"{r.seconds:.1f}",
            f"{r.alerts / r.seconds:,.0f}" if r.seconds else "-",
            f"{r.peak_rss / mb:.1f}",
        ),
        ("planned again", "", "", f"{r.again_queued:,}", f"{r.again_seconds:.1f}", "", ""),
    ]
    print(report.grid(head, body))
    targets = [
        report.Target(f"planning < {SECONDS:.0f} s", f"{r.seconds:.1f} s", r.seconds < SECONDS),
        report.Target(
            f"the process's peak < {PEAK_RSS / mb:.0f} MB resident",
            f"{r.peak_rss / mb:.1f} MB",
            0 < r.peak_rss < PEAK_RSS,
        ),
        report.Target(
            "one digest per alert with a new job",
            f"{r.queued:,} of {r.expected:,}",
            r.queued == r.expected > 0,
        ),
        report.Target("planned again: nothing more", f"{r.again_queued:,}", r.again_queued == 0),
    ]
    print(report.targets(targets))
    report.write_json(options.out_dir / "alerts.json", {"run": r, "targets": targets})
    return all(t.passed for t in targets)
