"""C6 `q` through the search index of migration 0003: on PostgreSQL a search asks the index
for the rows of the employer's holding every gram of `q`, then LIKE decides. It must find
exactly what a substring test finds, and the index must really serve it."""

from __future__ import annotations

from datetime import date, timedelta
from typing import Any

import pytest
from alembic import command
from sqlalchemy import Engine, event, insert, text
from sqlalchemy.orm import Session

from models import employers
from models.core.dates import utcnow
from models.db.entities import Job
from models.db.migrate import alembic_config, upgrade
from models.jobs import listing as job_listing
from models.jobs import search as job_search
from models.jobs import tallies
from tests.services import scratch_postgres

TITLES = [
    "Senior Baker",
    "BAKERY-7 lead",
    "Crème brûlée chef",
    "CRÈME pâtissier",
    "Straße cleaner",
    "100% remote",
    "night_shift",
    "Cuisinier à Montre\u0301al",  # a decomposed é, as some systems send it
    "ＣＯＯＫ de nuit",  # full-width letters
    "1:abc code",  # the index keys are "employer:gram"; a title may look like one
    "11:abc code",
    "abcabcabc",
    "a b c",
    "Zephyr driver",
    "zephyr",
    "x",
    "",
]
QUERIES = [
    "bak", "baker", "BAKERY", "ery-7", "crème", "CRÈ", "ème b", "strasse", "straße", "ße c",
    "0%", "%", "t_s", "_", "1:a", ":abc", "1:abc", "11:", "abcabc", "bca", "cab", "a b",
    "zephyr", "ZEPH", "phy", "hyr d", "x", "xyz", "ab", "7", "r", "de", "senior baker",
    "montréal", "MONTRE\u0301AL", "al", "cook", "ｃｏｏｋ", "k de",
]  # fmt: skip


def _add_jobs(session: Session, employer_id: int, titles: list[str], prefix: str = "R") -> None:
    today = date(2026, 11, 22)
    session.execute(
        insert(Job),
        [
            {
                "employer_id": employer_id,
                "reference_id": f"{prefix}{i}",
                "title": title or "-",
                "search_text": job_search.search_text(title or "-", f"{prefix}{i}"),
                "publish_date": today - timedelta(days=i),
                "close_date": today + timedelta(days=30),
                "status": "active",
                "position_type_id": 1,
                "description": "<p>work</p>",
                "routing_type": 1,
                "application_email": "jobs@example.com",
                "updated_at": utcnow(),
            }
            for i, title in enumerate(titles)
        ],
    )


def _total(session: Session, employer: Any, q: str, page: int = 1) -> int:
    conn = session.connection()
    return job_listing.listing(conn, employer.id, q=q, status=None, page=page, page_size=2).total


@pytest.fixture
def two_employers(session: Session) -> tuple[Any, Any]:
    """One employer's jobs with TITLES, another's with the same titles (never to be found)."""
    ours = employers.create_employer(session, "Ours")
    theirs = employers.create_employer(session, "Theirs")
    _add_jobs(session, ours.id, TITLES)
    _add_jobs(session, theirs.id, TITLES + TITLES)
    session.flush()
    return ours, theirs


@pytest.mark.parametrize("q", QUERIES)
def test_a_search_finds_exactly_the_jobs_holding_q(
    session: Session, two_employers: tuple[Any, Any], q: str
) -> None:
    ours, _ = two_employers
    expected = sum(
        job_search.fold_for_search(q) in job_search.search_text(t or "-", f"R{i}")
        for i, t in enumerate(TITLES)
    )
    assert _total(session, ours, q) == expected
    past_the_last = expected // 2 + 2
    assert _total(session, ours, q, page=past_the_last) == expected  # no row carries it there


@pytest.mark.parametrize(
    ("q", "found"),
    [
        ("montréal", ["Cuisinier à Montre\u0301al"]),  # composed finds decomposed
        ("Montre\u0301al", ["Cuisinier à Montre\u0301al"]),
        ("ｃｏｏｋ", ["ＣＯＯＫ de nuit"]),  # full-width finds full-width, as any case
        ("cook d", ["ＣＯＯＫ de nuit"]),  # and plain letters find full-width ones
        ("crème brû", ["Crème brûlée chef"]),
        ("STRASSE", ["Straße cleaner"]),
    ],
)
def test_q_matches_what_unicode_holds_equivalent(
    session: Session, two_employers: tuple[Any, Any], q: str, found: list[str]
) -> None:
    """C6: q is case-insensitive; the same letters in another Unicode form are the same q."""
    ours, _ = two_employers
    page = job_listing.listing(
        session.connection(), ours.id, q=q, status=None, page=1, page_size=50
    )
    assert [j.title for j in page.jobs] == found  # the title as stored, not folded


def test_migration_0004_folds_the_search_text_of_existing_jobs(session: Session) -> None:
    """Jobs stored before models.jobs.search.fold_for_search carry a text only casefolded:
    the migration brings it to the folded form, so the searches above find them too."""
    employer = employers.create_employer(session, "Older")
    _add_jobs(session, employer.id, ["Cuisinier à Montre\u0301al", "ＣＯＯＫ", "Plain cook"])
    session.execute(
        text("UPDATE jobs SET search_text = :old WHERE employer_id = :e AND reference_id = :r"),
        [
            {"old": "cuisinier à montre\u0301al\x1fr0", "e": employer.id, "r": "R0"},
            {"old": "ｃｏｏｋ\x1fr1", "e": employer.id, "r": "R1"},
        ],
    )
    assert _total(session, employer, "montréal") == 0
    connection = session.connection()
    cfg = alembic_config(connection.engine)
    cfg.attributes["connection"] = connection  # inside the test's transaction, rolled back
    connection.execute(text("UPDATE alembic_version SET version_num = '0003'"))
    command.upgrade(cfg, "0004")
    assert _total(session, employer, "montréal") == 1
    assert _total(session, employer, "cook") == 2
    stored = session.execute(
        text("SELECT search_text FROM jobs WHERE employer_id = :e ORDER BY reference_id"),
        {"e": employer.id},
    ).scalars()
    assert list(stored) == [
        "cuisinier à montréal\x1fr0",
        "cook\x1fr1",
        "plain cook\x1fr2",
    ]


def test_migration_0003_goes_down_to_the_trigram_index_and_back_up() -> None:
    with scratch_postgres() as url:
        engine = _migrated(url)
        cfg = alembic_config(engine)
        with engine.begin() as connection:
            cfg.attributes["connection"] = connection
            command.downgrade(cfg, "0002")
        assert _indexes(engine) >= {"ix_jobs_employer_search_trgm"}
        assert "ix_jobs_search_grams" not in _indexes(engine)
        with engine.begin() as connection:
            cfg.attributes["connection"] = connection
            command.upgrade(cfg, "head")
        assert "ix_jobs_search_grams" in _indexes(engine)
        assert "ix_jobs_employer_search_trgm" not in _indexes(engine)
        engine.dispose()


def _migrated(url: str) -> Engine:
    from models.db.engines import make_engine

    engine = make_engine(url)
    upgrade(engine)
    return engine


def _indexes(engine: Engine) -> set[str]:
    with engine.connect() as conn:
        rows = conn.execute(text("SELECT indexname FROM pg_indexes WHERE tablename = 'jobs'"))
        return {r[0] for r in rows}


def _statements(connection: Any) -> Any:
    """A context that records the statements run on `connection`."""
    seen: list[str] = []

    def keep(_c: Any, _cur: Any, statement: str, *_: Any) -> None:
        seen.append(statement)

    class Recording:
        def __enter__(self) -> list[str]:
            event.listen(connection, "before_cursor_execute", keep)
            return seen

        def __exit__(self, *_: object) -> None:
            event.remove(connection, "before_cursor_execute", keep)

    return Recording()


def _kinds(statements: list[str]) -> list[str]:
    """What each list statement was: a walk of the employer's jobs, a reading of every match
    (with their count), or a count alone."""
    return [
        "walk" if " walked" in s else "matches" if "over ()" in s.lower() else "count"
        for s in statements
    ]


@pytest.mark.parametrize("q", QUERIES)
def test_a_walk_of_the_employers_jobs_finds_what_reading_the_matches_finds(
    session: Session, two_employers: tuple[Any, Any], q: str
) -> None:
    """Every page, walked: a kept total of another state (its changes never the employer's)
    and as many matches as jobs make the walk the cheaper reading; it must find the same
    pages, `%`, `_` and `/` literal, and then count the total again."""
    ours, _ = two_employers
    connection = session.connection()
    folded = job_search.fold_for_search(q)
    for page in range(1, len(TITLES) // 2 + 1):  # pages ending before the last job
        kept = tallies.SearchTotals()
        stale = tallies.Counted(changes=-1, total=len(TITLES), jobs=len(TITLES))
        kept.put(ours.id, None, folded, stale)
        with _statements(connection) as seen:
            walked = job_listing.listing(
                connection, ours.id, q=q, status=None, page=page, page_size=2, totals=kept
            )
        read = job_listing.listing(connection, ours.id, q=q, status=None, page=page, page_size=2)
        assert [j.id for j in walked.jobs] == [j.id for j in read.jobs]
        assert walked.total == read.total
        assert _kinds(seen)[0] == "walk"


@pytest.fixture
def zephyrs(session: Session) -> Any:
    """An employer with 400 jobs, one in four a Zephyr; the newest first in the list."""
    employer = employers.create_employer(session, "Windy")
    titles = ["Zephyr driver" if i % 4 == 0 else f"Clerk {i}" for i in range(400)]
    _add_jobs(session, employer.id, titles)
    session.flush()
    return employer


def _search(session: Session, employer: Any, kept: Any, **params: Any) -> tuple[Any, list[str]]:
    connection = session.connection()
    with _statements(connection) as seen:
        page = job_listing.listing(
            connection, employer.id, **({"q": "zephyr", "status": None, "page": 1} | params),
            page_size=10, totals=kept,
        )  # fmt: skip
    return page, _kinds(seen)


def test_a_kept_total_is_served_until_the_jobs_change(session: Session, zephyrs: Any) -> None:
    """C6 exact: the first search reads every match and keeps their count; the next walks the
    employer's newest jobs for its page and is served the count kept, in one statement; once
    a job changes, the count is made again."""
    kept = tallies.SearchTotals()
    first, kinds = _search(session, zephyrs, kept)
    assert (first.total, kinds) == (100, ["matches"])
    again, kinds = _search(session, zephyrs, kept)
    assert (again.total, kinds) == (100, ["walk"])
    assert [j.id for j in again.jobs] == [j.id for j in first.jobs]
    session.execute(
        text("UPDATE jobs SET search_text = 'clerk' WHERE id = :id"), {"id": first.jobs[0].id}
    )
    changed, kinds = _search(session, zephyrs, kept)
    assert (changed.total, kinds) == (99, ["walk", "count"])
    read, _ = _search(session, zephyrs, tallies.SearchTotals(0))
    assert [j.id for j in changed.jobs] == [j.id for j in read.jobs]
    assert changed.jobs[0].id == first.jobs[1].id
    _, kinds = _search(session, zephyrs, kept)
    assert kinds == ["walk"]  # the new count is kept in its turn


def test_a_kept_total_of_a_status_follows_changes_of_status(session: Session, zephyrs: Any) -> None:
    """Expiry changes status only: the totals kept for a status are counted again."""
    kept = tallies.SearchTotals()
    assert _search(session, zephyrs, kept, status="active")[0].total == 100
    session.execute(
        text("UPDATE jobs SET status = 'archived' WHERE employer_id = :e AND id % 3 = 0"),
        {"e": zephyrs.id},
    )
    for status in ("active", "archived", "active"):
        page, _ = _search(session, zephyrs, kept, status=status)
        counted = _total_of(session, zephyrs, "zephyr", status)
        assert page.total == counted and 0 < counted < 100


def _total_of(session: Session, employer: Any, q: str, status: str) -> int:
    return int(
        session.execute(
            text(
                "SELECT count(*) FROM jobs WHERE employer_id = :e AND status = :s "
                "AND search_text LIKE :q"
            ),
            {"e": employer.id, "s": status, "q": f"%{q}%"},
        ).scalar_one()
    )


def test_a_walk_finding_too_few_reads_the_matches_and_goes_further_next_time(
    session: Session,
) -> None:
    """The matches bunch up among the oldest jobs: the walk, sized for matches spread evenly,
    finds too few of them for a full page, and the page is read from the matches instead;
    the next walk of the search goes twice as far, until it finds its page."""
    employer = employers.create_employer(session, "Old Winds")
    titles = ["Clerk"] * 300 + ["Zephyr driver"] * 100  # _add_jobs: later ones are older
    _add_jobs(session, employer.id, titles)
    session.flush()
    kept = tallies.SearchTotals()
    first, _ = _search(session, employer, kept)
    runs = [_search(session, employer, kept) for _ in range(3)]
    assert [kinds for _, kinds in runs] == [["walk", "matches"], ["walk", "matches"], ["walk"]]
    for page, _ in runs:
        assert (page.total, [j.id for j in page.jobs]) == (100, [j.id for j in first.jobs])


def test_a_page_past_the_last_is_served_the_kept_total(session: Session, zephyrs: Any) -> None:
    """Past the last page nothing is found, and the kept total is the answer: the walk of the
    employer's 400 jobs costs less than reading the 100 matches."""
    kept = tallies.SearchTotals()
    _search(session, zephyrs, kept)
    past, kinds = _search(session, zephyrs, kept, page=11)
    assert (past.jobs, past.total, kinds) == ([], 100, ["walk"])


@pytest.mark.parametrize("engine", ["postgresql"], indirect=True)
def test_a_walk_reads_the_employers_index_alone_on_postgresql(session: Session) -> None:
    """The walk tests each job's search text in order; with status and search text in the
    employer's publish-date index (migration 0008) it reads no table row for that."""
    employer = employers.create_employer(session, "Walker")
    _add_jobs(session, employer.id, [f"Zephyr {i}" if i % 4 else f"Job {i}" for i in range(3000)])
    session.execute(text("ANALYZE jobs"))
    kept = tallies.SearchTotals()
    seen: list[tuple[str, Any]] = []

    def keep(_c: Any, _cur: Any, statement: str, params: Any, *_: Any) -> None:
        seen.append((statement, params))

    connection = session.connection()
    for status in (None, "active"):
        event.listen(connection, "before_cursor_execute", keep)
        try:
            for _ in range(2):  # the first counts and keeps the total; the second walks
                job_listing.listing(
                    connection, employer.id, q="zephyr", status=status, page=1, page_size=10,
                    totals=kept,
                )  # fmt: skip
        finally:
            event.remove(connection, "before_cursor_execute", keep)
        statement, params = seen[-1]
        assert " walked" in statement
        raw: Any = connection.connection.dbapi_connection
        plan = "\n".join(r[0] for r in raw.execute("EXPLAIN " + statement, params).fetchall())
        assert "Index Only Scan using ix_jobs_employer_published" in plan, plan
