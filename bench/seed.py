"""The bench database: 1,000,000 jobs, one employer holding 200,000 of them, loaded with COPY.

The database is created once and reused while its marker table says it holds this seed
(`SEED_VERSION`, `TOTAL_JOBS`); `--reseed` or a changed seed drops it and loads it again.
Schema and reference data come from `models.db.migrate.upgrade` and employers from
`models.employers`, so the bench measures the service's own tables and indexes. Jobs go in
with COPY, with the secondary indexes dropped during the load and rebuilt from their own
definitions afterwards (far faster than maintaining a trigram GIN index row by row).
"""

from __future__ import annotations

import random
import time
from array import array
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from datetime import time as dtime

import psycopg
from sqlalchemy import Engine, create_engine, text
from sqlalchemy.engine import URL, make_url

from bench.options import Options
from bench.words import (
    COMPANY_KINDS,
    COMPANY_SUFFIXES,
    COMPANY_WORDS,
    DESCRIPTIONS,
    REF_PREFIXES,
    ROLES,
    SENIORITY,
    SPECIALTIES,
)
from models import employers
from models.core.dates import today_in
from models.core.settings import Settings
from models.db.engines import make_engine
from models.db.migrate import upgrade
from models.db.unit_of_work import make_sessionmaker, session_scope
from models.jobs import tallies
from models.jobs.search import search_text

SEED_VERSION = 2  # bump when the generated data changes, so old bench databases are reseeded
TOTAL_JOBS = 1_000_000
BIG_EMPLOYER_JOBS = 200_000
OTHER_EMPLOYERS = 200
WORD = "Zephyr"  # in exactly 1% of the titles of every employer (job number % 100 == 37)
WORD_SLOT = 37
RANDOM_SEED = 20261122
MARKER = "bench_seed"
BIG_EMPLOYER_NAME = "Northwind Staffing"
SEED_TABLES = ("jobs", "job_locations", "job_categories")

JOB_COLUMNS = (
    "id, employer_id, reference_id, title, search_text, publish_date, close_date, confidential, "
    "auto_refresh, status, position_type_id, salary_amount, salary_max, salary_period_id, "
    "salary_commission, description, routing_type, application_email, application_url, updated_at"
)


@dataclass(frozen=True)
class Seed:
    """The seeded bench database, as the benches need it."""

    url: str  # SQLAlchemy URL of the bench database
    big_employer_id: int
    big_employer_jobs: int
    jobs: int  # seeded jobs; jobs with a larger id were made by a bench
    max_job_id: int
    word: str
    word_jobs_big: int  # jobs of the big employer whose title holds `word`
    reused: bool
    seconds: float  # seeding time of this run (0 when reused)
    seed_seconds: float  # seeding time when the database was seeded
    phases: dict[str, float] = field(default_factory=dict)


def ensure(options: Options) -> Seed:
    """The bench database: reused when its marker matches this seed, else created and seeded."""
    admin = create_engine(options.admin_url, isolation_level="AUTOCOMMIT")
    url = make_url(options.admin_url).set(database=options.database)
    url_text = url.render_as_string(hide_password=False)
    try:
        with admin.connect() as conn:
            exists = conn.scalar(
                text("SELECT 1 FROM pg_database WHERE datname = :n"), {"n": options.database}
            )
        if exists and not options.reseed:
            seed, reason = _reuse(url_text)
            if seed is not None:
                return seed
            print(f"bench database {options.database}: not reusable ({reason}); seeding again")
        elif exists:
            print(f"bench database {options.database}: --reseed given; seeding again")
        with admin.connect() as conn:
            conn.execute(text(f'DROP DATABASE IF EXISTS "{options.database}" WITH (FORCE)'))
            conn.execute(text(f'CREATE DATABASE "{options.database}"'))
    finally:
        admin.dispose()
    return _seed(url_text)


def _reuse(url: str) -> tuple[Seed | None, str]:
    engine = make_engine(url)
    try:
        with engine.connect() as conn:
            has_marker = conn.scalar(text("SELECT to_regclass(:t) IS NOT NULL"), {"t": MARKER})
            if not has_marker:
                return None, "no marker table: an earlier seed did not finish"
            row = conn.execute(text(f"SELECT * FROM {MARKER}")).mappings().first()
        if row is None or row["version"] != SEED_VERSION or row["jobs"] != TOTAL_JOBS:
            return None, "marker of another seed"
        upgrade(engine)  # idempotent; brings the schema to head if migrations were added since
        with engine.begin() as conn:
            # Jobs a bench created (POST) have ids above the seed's; an interrupted run may have
            # left some behind.
            conn.execute(text("DELETE FROM jobs WHERE id > :m"), {"m": row["max_job_id"]})
            conn.execute(
                text("SELECT setval(pg_get_serial_sequence('jobs', 'id'), :m)"),
                {"m": row["max_job_id"]},
            )
            count = conn.scalar(text("SELECT count(*) FROM jobs"))
            big = conn.scalar(
                text("SELECT count(*) FROM jobs WHERE employer_id = :e"),
                {"e": row["big_employer_id"]},
            )
        if count != TOTAL_JOBS or big != BIG_EMPLOYER_JOBS:
            return None, f"it holds {count} jobs, {big} of the big employer"
        _vacuum(url)  # the last run's updates and deletes: every run starts from the same state
        seed = Seed(
            url=url,
            big_employer_id=row["big_employer_id"],
            big_employer_jobs=BIG_EMPLOYER_JOBS,
            jobs=TOTAL_JOBS,
            max_job_id=row["max_job_id"],
            word=row["word"],
            word_jobs_big=row["word_jobs_big"],
            reused=True,
            seconds=0.0,
            seed_seconds=row["seconds"],
        )
        print(
            f"bench database reused: {count:,} jobs, seeded {row['seeded_at']:%Y-%m-%d %H:%M} "
            f"in {row['seconds']:.1f} s (--reseed to seed again)"
        )
        return seed, ""
    finally:
        engine.dispose()


def _vacuum(url: str) -> None:
    """What autovacuum would have done by now on a live database (and it may be off, as on the
    CI machines): visibility map set and hint bits written, so counts can be index-only and
    reads write nothing; statistics of every table current, reference tables included."""
    with psycopg.connect(conninfo(url), autocommit=True) as conn:
        for table in (*SEED_TABLES, "job_tallies"):  # the tallies' rows the last run replaced
            conn.execute(f"VACUUM (ANALYZE) {table}")
        conn.execute("ANALYZE")


class _Phases:
    """Wall time of each seeding step, printed as it ends."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}

    @contextmanager
    def __call__(self, name: str) -> Iterator[None]:
        start = time.perf_counter()
        yield
        self.seconds[name] = time.perf_counter() - start
        print(f"  {name:<22} {self.seconds[name]:7.1f} s", flush=True)


def _seed(url: str) -> Seed:
    print(f"seeding {TOTAL_JOBS:,} jobs into a new bench database …", flush=True)
    started = time.perf_counter()
    phase = _Phases()
    engine = make_engine(url)
    try:
        with phase("migrate"):
            upgrade(engine)
        with phase("employers"):
            big_id, sizes, unlimited = _employers(engine)
        with phase("locations"):
            locations = _location_pool(engine)
        with psycopg.connect(conninfo(url)) as conn:
            with phase("copy jobs"):
                # One transaction: the tables are truncated in it, so COPY may FREEZE (rows
                # written visible to all, no later rewrite by vacuum); the load skips the
                # foreign-key triggers (replica role) since the generator only uses ids it read,
                # and the triggers counting jobs, whose counts are made once, after.
                conn.execute("SET session_replication_role = replica")
                indexes = _drop_secondary_indexes(conn)
                conn.execute(f"TRUNCATE {', '.join(SEED_TABLES)} CASCADE")
                word_big = _copy_jobs(conn, sizes, unlimited, big_id, locations)
                conn.commit()
            with phase("rebuild indexes"):
                _create_indexes(conn, indexes)
        with phase("tally jobs"), engine.begin() as connection:
            tallies.rebuild(connection)  # COPY went around the triggers that count jobs
        with phase("vacuum analyze"):
            _vacuum(url)
        seconds = time.perf_counter() - started
        with engine.begin() as conn:
            conn.execute(
                text(f"""CREATE TABLE {MARKER} (
                version integer NOT NULL, jobs integer NOT NULL, big_employer_id integer NOT NULL,
                max_job_id integer NOT NULL, word text NOT NULL, word_jobs_big integer NOT NULL,
                seconds double precision NOT NULL, seeded_at timestamptz NOT NULL DEFAULT now())""")
            )
            conn.execute(
                text(
                    f"INSERT INTO {MARKER} (version, jobs, big_employer_id, max_job_id, word, "
                    "word_jobs_big, seconds) VALUES (:v, :j, :b, :m, :w, :wb, :s)"
                ),
                {
                    "v": SEED_VERSION,
                    "j": TOTAL_JOBS,
                    "b": big_id,
                    "m": TOTAL_JOBS,
                    "w": WORD,
                    "wb": word_big,
                    "s": seconds,
                },
            )
    finally:
        engine.dispose()
    print(f"seeded {TOTAL_JOBS:,} jobs in {seconds:.1f} s", flush=True)
    return Seed(
        url=url,
        big_employer_id=big_id,
        big_employer_jobs=BIG_EMPLOYER_JOBS,
        jobs=TOTAL_JOBS,
        max_job_id=TOTAL_JOBS,
        word=WORD,
        word_jobs_big=word_big,
        reused=False,
        seconds=seconds,
        seed_seconds=seconds,
        phases=phase.seconds,
    )


def _employers(engine: Engine) -> tuple[int, dict[int, int], set[int]]:
    """The big employer and ~200 others: its id, every employer's job count, and the ids of
    those on the unlimited plan (the only ones whose jobs may auto-refresh).

    The others' sizes fall off like a Zipf law (a few large boards, many small ones), each a
    multiple of 100 so that the word is in exactly 1% of every employer's titles.
    """
    rng = random.Random(RANDOM_SEED)
    units = (TOTAL_JOBS - BIG_EMPLOYER_JOBS) // 100
    weights = [1 / (rank**0.8) for rank in range(1, OTHER_EMPLOYERS + 1)]
    spare = units - OTHER_EMPLOYERS  # every employer has at least 100 jobs
    shares = [spare * w / sum(weights) for w in weights]
    counts = [1 + int(s) for s in shares]
    by_remainder = sorted(range(OTHER_EMPLOYERS), key=lambda i: shares[i] - int(shares[i]))
    for i in by_remainder[len(by_remainder) - (units - sum(counts)) :]:
        counts[i] += 1
    sizes: dict[int, int] = {}
    unlimited: set[int] = set()
    with session_scope(make_sessionmaker(engine)) as session:
        big = employers.create_employer(session, BIG_EMPLOYER_NAME, "unlimited")
        sizes[big.id] = BIG_EMPLOYER_JOBS
        unlimited.add(big.id)
        names: set[str] = set()
        for count in counts:
            name = f"{rng.choice(COMPANY_WORDS)} {rng.choice(COMPANY_KINDS)}"
            while name in names:
                name = f"{name} {rng.choice(COMPANY_SUFFIXES)}"
            names.add(name)
            employer = employers.create_employer(
                session, name, "unlimited" if rng.random() < 0.2 else "standard"
            )
            sizes[employer.id] = count * 100
            if employer.plan == "unlimited":
                unlimited.add(employer.id)
    assert sum(sizes.values()) == TOTAL_JOBS
    return big.id, sizes, unlimited


def _location_pool(engine: Engine) -> array[int]:
    """Location ids of the locations list, repeated in proportion to population (big cities
    get most jobs), to be drawn from uniformly."""
    with engine.connect() as conn:
        rows = conn.execute(
            text("SELECT id, population FROM locations WHERE listed AND type = 'City'")
        ).all()
    total = sum(max(p, 1) for _i, p in rows)
    pool = array("i")
    for location_id, population in rows:
        pool.extend([location_id] * max(1, round(20_000 * max(population, 1) / total)))
    return pool


def _drop_secondary_indexes(conn: psycopg.Connection[tuple[object, ...]]) -> list[str]:
    """Drop the indexes of the seeded tables that back no constraint; return their DDL."""
    rows = conn.execute(
        """SELECT i.indexrelid::regclass::text, pg_get_indexdef(i.indexrelid)
           FROM pg_index i JOIN pg_class t ON t.oid = i.indrelid
           WHERE t.relname = ANY(%s)
             AND NOT EXISTS (SELECT 1 FROM pg_constraint c WHERE c.conindid = i.indexrelid)""",
        (list(SEED_TABLES),),
    ).fetchall()
    for name, _ddl in rows:
        conn.execute(f"DROP INDEX {name}")
    return [str(ddl) for _name, ddl in rows]


def _create_indexes(conn: psycopg.Connection[tuple[object, ...]], ddl: Sequence[str]) -> None:
    conn.execute("SET maintenance_work_mem = '1GB'")
    conn.execute("SET max_parallel_maintenance_workers = 2")
    for statement in ddl:
        conn.execute(statement)
    conn.commit()


def _copy_jobs(
    conn: psycopg.Connection[tuple[object, ...]],
    sizes: dict[int, int],
    unlimited: set[int],
    big_id: int,
    locations: array[int],
) -> int:
    """COPY the jobs, one location and one category each (in the caller's transaction);
    returns how many of the big employer's titles hold the word."""
    rng = random.Random(RANDOM_SEED)
    location_ids = array("i", bytes(4 * (TOTAL_JOBS + 1)))
    category_ids = array("b", bytes(TOTAL_JOBS + 1))
    with conn.cursor() as cur:
        with cur.copy(f"COPY jobs ({JOB_COLUMNS}) FROM STDIN WITH (FREEZE)") as copy:
            for row in _job_rows(rng, sizes, unlimited, big_id):
                copy.write_row(row)
        for job_id in range(1, TOTAL_JOBS + 1):
            location_ids[job_id] = locations[int(rng.random() * len(locations))]
            category_ids[job_id] = 1 + int(rng.random() * 30)
        for table, column, values in (
            ("job_locations", "location_id", location_ids),
            ("job_categories", "category_id", category_ids),
        ):
            sql = f"COPY {table} (job_id, position, {column}) FROM STDIN WITH (FREEZE)"
            with cur.copy(sql) as copy:
                for job_id in range(1, TOTAL_JOBS + 1):
                    copy.write_row((job_id, 0, values[job_id]))
        cur.execute("SELECT setval(pg_get_serial_sequence('jobs', 'id'), %s)", (TOTAL_JOBS,))
        found = cur.execute(
            "SELECT count(*) FROM jobs WHERE employer_id = %s AND search_text LIKE %s",
            (big_id, f"%{WORD.casefold()}%"),
        ).fetchone()
    word_big = found[0] if found else 0
    assert isinstance(word_big, int)
    return word_big


def _job_rows(
    rng: random.Random, sizes: dict[int, int], unlimited: set[int], big_id: int
) -> Iterator[tuple[object, ...]]:
    """The jobs in id order, as if posted over the last year by interleaved employers.

    Random draws are `seq[int(random() * len(seq))]` rather than `rng.choice`: a third of the
    time, over a million rows.
    """
    today = today_in(Settings.from_env().timezone)
    slots = array("i")  # the employer of each job id
    for employer_id, count in sizes.items():
        slots.extend([employer_id] * count)
    rng.shuffle(slots)
    numbers = dict.fromkeys(sizes, 0)
    prefixes = {e: None if e % 5 == 0 else rng.choice(REF_PREFIXES) for e in sizes}
    prefixes[big_id] = "NW"
    # date_at[base + d] is today + d days: publish dates go back a year, close dates ahead.
    base = 366
    date_at = [today + timedelta(days=d) for d in range(-base, 100)]
    updated = {d: datetime.combine(d, dtime(12), UTC).replace(tzinfo=None) for d in date_at}
    close_after = (60, 60, 60, 30, 90)
    position_types = (1,) * 60 + (2,) * 20 + (3,) * 10 + (4,) * 7 + (5,) * 3
    rand = rng.random
    n_specialties, n_seniority, n_roles = len(SPECIALTIES), len(SENIORITY), len(ROLES)
    for job_id in range(1, TOTAL_JOBS + 1):
        employer_id = slots[job_id - 1]
        n = numbers[employer_id] = numbers[employer_id] + 1
        prefix = prefixes[employer_id]
        ref = None if prefix is None else f"{prefix}-{n:06d}"
        specialty = WORD if n % 100 == WORD_SLOT else SPECIALTIES[int(rand() * n_specialties)]
        seniority = SENIORITY[int(rand() * n_seniority)]
        title = f"{seniority} {specialty} {ROLES[int(rand() * n_roles)]}".lstrip()
        age = (365 * (TOTAL_JOBS - job_id)) // TOTAL_JOBS + int(rand() * 7) - 3  # days old
        age = min(365, max(0, age))
        close_in = close_after[int(rand() * 5)] - age  # days from today, negative if past
        roll = rand()
        if close_in < 0:  # expired: archived by the expiry task, or never published
            status = "draft" if roll < 0.05 else "archived"
        else:
            status = "active" if roll < 0.75 else "draft" if roll < 0.9 else "archived"
        salary = rand()
        amount: int | None = None
        top: int | None = None
        period: int | None = None
        if salary < 0.5:
            amount, period = 40_000 + 1000 * int(rand() * 110), 1
            top = amount + 10_000 if salary < 0.25 else None
        elif salary < 0.7:
            amount, period = 16 + int(rand() * 30), 5
        email_route = rand() < 0.6
        publish = date_at[base - age]
        yield (
            job_id,
            employer_id,
            ref,
            title,
            search_text(title, ref),
            publish,
            date_at[base + close_in],
            rand() < 0.05,
            employer_id in unlimited and rand() < 0.3,
            status,
            position_types[int(rand() * 100)],
            amount,
            top,
            period,
            False,
            DESCRIPTIONS[job_id % len(DESCRIPTIONS)],
            1 if email_route else 2,
            f"careers{employer_id}@jobs.test" if email_route else None,
            None if email_route else f"https://careers{employer_id}.test/jobs/{n}",
            updated[publish],
        )


def conninfo(url: str | URL) -> str:
    """A SQLAlchemy URL of PostgreSQL as psycopg takes it, for what the benches do on the
    driver itself (COPY, VACUUM, a watching connection)."""
    return make_url(url).set(drivername="postgresql").render_as_string(hide_password=False)


def issue_key(seed: Seed, employer_id: int) -> str:
    """A fresh API key for the employer (keys are shown only once, so each run gets one)."""
    engine = make_engine(seed.url)
    try:
        with session_scope(make_sessionmaker(engine)) as session:
            return employers.issue_key(session, employer_id).key
    finally:
        engine.dispose()


def remove_bench_rows(seed: Seed, key: str | None) -> int:
    """Delete the jobs a bench created and its key, so the next run starts from the seed."""
    engine = make_engine(seed.url)
    try:
        with engine.begin() as conn:
            removed = conn.execute(text("DELETE FROM jobs WHERE id > :m"), {"m": seed.max_job_id})
            if key:
                conn.execute(
                    text("DELETE FROM api_keys WHERE prefix = :p"),
                    {"p": key[: employers.PREFIX_LEN]},
                )
        return removed.rowcount
    finally:
        engine.dispose()
