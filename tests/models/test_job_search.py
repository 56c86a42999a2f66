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

from models import employers, jobs
from models.dates import utcnow
from models.entities import Job
from models.migrate import alembic_config, upgrade
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
                "search_text": jobs.search_text(title or "-", f"{prefix}{i}"),
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
    return jobs.listing(conn, employer.id, q=q, status=None, page=page, page_size=2).total


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
        jobs.fold(q) in jobs.search_text(t or "-", f"R{i}") for i, t in enumerate(TITLES)
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
    page = jobs.listing(session.connection(), ours.id, q=q, status=None, page=1, page_size=50)
    assert [j.title for j in page.jobs] == found  # the title as stored, not folded


def test_migration_0004_folds_the_search_text_of_existing_jobs(session: Session) -> None:
    """Jobs stored before models.jobs.fold carry a text only casefolded: the migration
    brings it to the folded form, so the searches above find them too."""
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


def test_the_search_index_serves_a_search_on_postgresql(
    session: Session, two_employers: tuple[Any, Any]
) -> None:
    """If the condition stopped matching the index's expression, searches would still be
    right but would read every job of the employer: the plan is what shows it. SQLite has
    no such index, and its statement does not ask for one."""
    ours, _ = two_employers
    seen: list[tuple[str, Any]] = []

    def keep(_c: Any, _cur: Any, statement: str, params: Any, *_: Any) -> None:
        seen.append((statement, params))

    connection = session.connection()
    postgres = connection.dialect.name == "postgresql"
    if postgres:  # an employer with enough jobs that reading them all would cost
        _add_jobs(session, ours.id, [f"Filler job {i}" for i in range(3000)], "F")
        session.execute(text("ANALYZE jobs"))
    event.listen(connection, "before_cursor_execute", keep)
    try:
        jobs.listing(connection, ours.id, q="zephyr", status=None, page=1, page_size=10)
    finally:
        event.remove(connection, "before_cursor_execute", keep)
    statement, params = seen[0]
    assert len(seen) == 1  # the page with its total and its jobs' locations
    if not postgres:
        assert "jobpost_search_grams" not in statement
        return
    raw: Any = connection.connection.dbapi_connection
    plan = "\n".join(r[0] for r in raw.execute("EXPLAIN " + statement, params).fetchall())
    assert "ix_jobs_search_grams" in plan, plan
    assert "WindowAgg" in plan  # the total comes from the same reading as the page


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
    from models.engines import make_engine

    engine = make_engine(url)
    upgrade(engine)
    return engine


def _indexes(engine: Engine) -> set[str]:
    with engine.connect() as conn:
        rows = conn.execute(text("SELECT indexname FROM pg_indexes WHERE tablename = 'jobs'"))
        return {r[0] for r in rows}
