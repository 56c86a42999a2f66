"""Pay transparency and posting statements (C13): the provinces' rules, as data.

One table, `RULES`, says which jurisdiction asks what of a job from which day. A new
province is a new row. The checks are pure functions of the merged job; the write path
(`models.jobs.writes`) turns their findings into C10 warnings or C1 422 entries by the employer's
`compliance` mode.
"""

from __future__ import annotations

import html
import re
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import date
from decimal import Decimal

from sqlalchemy import Connection, select

from models.core.errors import FieldError, ValidationFailed
from models.db.entities import Location
from models.jobs import questions, workplace
from models.jobs.rows import StoredJob
from models.jobs.warnings import Warning
from models.reference.lists import fold_spaced

MODES = ("off", "warn", "enforce")
DEFAULT_MODE = "warn"

PAY_REQUIRED = "pay_required"
PAY_RANGE_TOO_WIDE = "pay_range_too_wide"
AI_DISCLOSURE_REQUIRED = "ai_disclosure_required"
VACANCY_DISCLOSURE_REQUIRED = "vacancy_disclosure_required"
CANADIAN_EXPERIENCE_REQUIREMENT = "canadian_experience_requirement"
CANADIAN_EXPERIENCE_QUESTION = "canadian_experience_question"
FRENCH_VERSION_REQUIRED = "french_version_required"
# Ontario's guide says an employer may not require Canadian experience; what a posting says
# is the employer's to judge, so this one is a warning in every mode, never an error.
ALWAYS_WARNINGS = frozenset({CANADIAN_EXPERIENCE_REQUIREMENT})

# Hours, days, weeks or months in a year, by salary period id (models.reference.lists).
PER_YEAR: dict[int, int] = {1: 1, 2: 12, 3: 52, 4: 260, 5: 2080}
RANGE_WIDTH_LIMIT = Decimal(50_000)  # Ontario: a range at most $50,000 wide a year …
RANGE_EXEMPT_ABOVE = Decimal(200_000)  # … unless its top is over $200,000 a year
PHRASES = ("canadian experience", "experience canadienne")  # as `fold` leaves them


@dataclass(frozen=True)
class Facts:
    """What the rules read of a job write: the merged job, its text, and the employer's."""

    job: StoredJob
    ontario25_plus: bool


# None: the job complies; else why not, or (the field at fault, why not) for a rule whose
# field is one of several (a screening question's, `questions[i].text`).
Check = Callable[[Facts], str | tuple[str, str] | None]


def _pay_stated(facts: Facts) -> str | None:
    amount = facts.job.salary_amount
    if amount is None or amount <= 0:
        return "The job's province asks for the expected pay or a pay range: send salary."
    return None


def annual(amount: Decimal, period_id: int) -> Decimal:
    """An amount of a salary period as a year's pay (hourly × 2,080 … monthly × 12)."""
    return amount * PER_YEAR[period_id]


def _range_narrow(facts: Facts) -> str | None:
    job = facts.job
    low, top, period = job.salary_amount, job.salary_max, job.salary_period_id
    if low is None or top is None or period is None:
        return None  # no range: nothing to measure (no pay is pay_required's)
    width, yearly_top = annual(top - low, period), annual(top, period)
    if width <= RANGE_WIDTH_LIMIT or yearly_top > RANGE_EXEMPT_ABOVE:
        return None
    return (
        f"The pay range is ${width:,.2f} wide a year; Ontario allows at most $50,000 unless "
        "salary.maxAmount is over $200,000 a year."
    )


def _ai_stated(facts: Facts) -> str | None:
    if facts.job.ai_screening is None:
        return "Ontario asks whether AI screens, assesses or selects applicants: send aiScreening."
    return None


def _vacancy_stated(facts: Facts) -> str | None:
    if facts.job.existing_vacancy is None:
        return "Ontario asks whether the posting is for an existing vacancy: send existingVacancy."
    return None


# A tag of stored (nh3-serialised) HTML: quoted attribute values may hold ">". nh3 leaves no
# comments and escapes a text's "<", so removing these leaves only text and entities.
_TAG = re.compile(r"""<(?:[^>"']|"[^"]*"|'[^']*')*>""")


def plain(stored_html: str) -> str:
    """The text of stored HTML: tags dropped (each as a space), entities decoded."""
    return html.unescape(_TAG.sub(" ", stored_html))


def _texts(job: StoredJob) -> Iterable[str]:
    """The job's words a reader sees: title and description as text, in both languages."""
    yield html.unescape(job.title)
    yield plain(job.description)
    if job.translation_title is not None:
        yield html.unescape(job.translation_title)
    if job.translation_description is not None:
        yield plain(job.translation_description)


# PHRASES in a folded text whose whitespace was left as it was (`fold_spaced`): the matches
# of `phrase in fold(text)`, whose joining of the words again cost a description 18 µs.
_PHRASES = re.compile("|".join(r"\s+".join(map(re.escape, p.split())) for p in PHRASES))


def _no_canadian_experience(facts: Facts) -> str | None:
    # `fold` ignores case, accents and punctuation (C13); the pattern, runs of whitespace.
    for text in _texts(facts.job):
        if _PHRASES.search(fold_spaced(text)):
            return (
                "The posting seems to require Canadian experience, which Ontario forbids "
                "employers to require."
            )
    return None


# A question's ways of asking it, in folded text (case, accents and punctuation as `fold`
# leaves them): the posting's phrases with a word between ("Canadian work experience",
# "expérience professionnelle canadienne"), and experience "in Canada" ("au Canada").
_ASKED = re.compile(
    r"canadian\s+(?:\w+\s+)?experience|experience\s+(?:\w+\s+){0,3}in\s+canada"
    r"|experience\s+(?:\w+\s+){0,2}(?:canadienne|au\s+canada|acquise\s+au\s+canada)"
)


def _no_canadian_experience_question(facts: Facts) -> tuple[str, str] | None:
    """A screening question (C21), in either language, that asks for Canadian experience."""
    for i, q in enumerate(questions.listed(facts.job.questions)):
        for text in (q["text"], q.get("translation")):
            if text is not None and _ASKED.search(fold_spaced(text)):
                return (
                    f"questions[{i}].text",
                    f"Question {q['id']!r} asks for Canadian experience; the Ontario Human "
                    "Rights Commission holds that requiring it is discrimination unless it is "
                    "a bona fide requirement: ask for the skills or experience the job needs.",
                )
    return None


def _in_french(facts: Facts) -> str | None:
    job = facts.job
    if job.language == "fr" or job.translation_title is not None:
        return None  # in French, or with its French translation (both members or neither)
    return "Quebec asks for the posting in French: send translation (or write it in French)."


@dataclass(frozen=True)
class Rule:
    jurisdiction: str  # a province code of models.reference.lists.PROVINCES
    in_force: date
    check: Check
    code: str
    field: str
    ontario25_only: bool = False  # only for employers with 25+ employees in Ontario


# Each row cites where its rule comes from (C13 names the public sources).
RULES: tuple[Rule, ...] = (
    # BC: the Pay Transparency Act; publicly advertised jobs state the expected pay or its
    # range from 2023-11-01 (the BC government's page on pay transparency in job postings).
    Rule("BC", date(2023, 11, 1), _pay_stated, PAY_REQUIRED, "salary"),
    # PEI: Employment Standards Act s.5.9, the same from 2022-06-01 (as counsel summarise it).
    Rule("PE", date(2022, 6, 1), _pay_stated, PAY_REQUIRED, "salary"),
    # Ontario, employers with 25+ employees, from 2026-01-01: the ESA's job-posting duties and
    # O. Reg. 476/24 (Ontario's guide to the ESA, "Job postings"). Expected pay or a range …
    Rule("ON", date(2026, 1, 1), _pay_stated, PAY_REQUIRED, "salary", True),
    # … a range at most $50,000 wide, unless its top is over $200,000 (O. Reg. 476/24) …
    Rule("ON", date(2026, 1, 1), _range_narrow, PAY_RANGE_TOO_WIDE, "salary.maxAmount", True),
    # … a statement of whether AI screens, assesses or selects applicants …
    Rule("ON", date(2026, 1, 1), _ai_stated, AI_DISCLOSURE_REQUIRED, "aiScreening", True),
    # … a statement of whether the posting is for an existing vacancy …
    Rule(
        "ON",
        date(2026, 1, 1),
        _vacancy_stated,
        VACANCY_DISCLOSURE_REQUIRED,
        "existingVacancy",
        True,
    ),
    # … and no Canadian-experience requirement (the same guide).
    Rule(
        "ON",
        date(2026, 1, 1),
        _no_canadian_experience,
        CANADIAN_EXPERIENCE_REQUIREMENT,
        "description",
        True,
    ),
    # … and no screening question (C21) asking for it, of any employer in Ontario: the Human
    # Rights Code, as the Ontario Human Rights Commission's "Policy on removing the 'Canadian
    # experience' barrier" (2013) reads it: a requirement of Canadian experience is prima
    # facie discrimination, allowed only as a bona fide requirement. The employer's mode
    # decides: refused in enforce, warned in warn.
    Rule(
        "ON",
        date(2013, 1, 1),
        _no_canadian_experience_question,
        CANADIAN_EXPERIENCE_QUESTION,
        "questions",
    ),
    # Quebec: the Charter of the French Language as amended in 2022 (Bill 96); postings are
    # published in French from 2022-06-01 (as the CAI and Éducaloi summarise it).
    Rule("QC", date(2022, 6, 1), _in_french, FRENCH_VERSION_REQUIRED, "translation"),
)


def findings(
    job: StoredJob, provinces: Iterable[str], *, ontario25_plus: bool, today: date
) -> list[Warning]:
    """Every rule of the job's jurisdictions in force `today` that it breaks, one entry per
    (field, code) however many jurisdictions ask it (a job in BC and Ontario gets one
    pay_required). Only an active job is checked (C13)."""
    if job.status != "active":
        return []
    where = set(provinces)
    facts = Facts(job, ontario25_plus)
    found: dict[tuple[str, str], Warning] = {}
    for rule in RULES:
        if rule.jurisdiction not in where or today < rule.in_force:
            continue
        if rule.ontario25_only and not ontario25_plus:
            continue
        if (rule.field, rule.code) in found:
            continue
        said = rule.check(facts)
        if said is not None:
            field, message = said if isinstance(said, tuple) else (rule.field, said)
            found[(rule.field, rule.code)] = Warning(field, rule.code, message)
    return list(found.values())


def apply_mode(mode: str, found: list[Warning]) -> list[Warning]:
    """The warnings a write answers in `mode`; in `enforce`, the 422 of the entries that are
    errors there (every one but ALWAYS_WARNINGS)."""
    if mode == "off":
        return []
    if mode == "enforce":
        errors = sorted(
            (w for w in found if w.code not in ALWAYS_WARNINGS), key=lambda w: (w.field, w.code)
        )
        if errors:
            raise ValidationFailed(
                [FieldError(w.field, w.code, w.message) for w in errors], subject="job"
            )
    return found


class _Provinces:
    """The province of each place, kept per process: places are reference data, and a
    place's province never changes, so a write reads them only the first time the process
    meets the place. At most `MAX_KEYS` are kept; beyond, it starts afresh."""

    MAX_KEYS = 50_000

    def __init__(self) -> None:
        self._kept: dict[int, str] = {}
        self._lock = threading.Lock()

    def of(self, connection: Connection, place_ids: Iterable[int]) -> set[str]:
        ids = list(place_ids)
        kept = self._kept
        missing = [i for i in ids if i not in kept]
        if missing:
            stmt = select(Location.id, Location.province_code).where(Location.id.in_(missing))
            read = {int(i): str(code) for i, code in connection.execute(stmt)}
            with self._lock:
                if len(self._kept) + len(read) > self.MAX_KEYS:
                    self._kept = {}
                self._kept.update(read)
            kept = {**kept, **read}
        return {kept[i] for i in ids if i in kept}


PROVINCES = _Provinces()


def check(
    connection: Connection,
    job: StoredJob,
    *,
    mode: str,
    ontario25_plus: bool,
    today: date,
) -> list[Warning]:
    """The compliance warnings of a write leaving `job` (whole) as it is, or the 422 of its
    broken rules in `enforce` mode. Nothing is read in `off` mode or of a job not active."""
    if mode == "off" or job.status != "active":
        return []
    assert job.locations is not None  # a merged job, whole
    located = PROVINCES.of(connection, [p.id for p in job.locations])
    provinces = workplace.provinces(job.workplace_type, job.applicant_locations, located)
    found = findings(job, provinces, ontario25_plus=ontario25_plus, today=today)
    return apply_mode(mode, found)
