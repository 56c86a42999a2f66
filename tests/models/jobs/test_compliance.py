"""C13's rules as data, checked alone: the annual conversion at each edge, de-duplication
across jurisdictions, the dates in force, Ontario's 25+ employees, and the folded text."""

from __future__ import annotations

from dataclasses import replace
from datetime import date
from decimal import Decimal

import pytest

from models.core.errors import ValidationFailed
from models.jobs import compliance
from models.jobs.rows import StoredJob
from models.jobs.warnings import Warning

TODAY = date(2026, 3, 10)


def job(**changes: object) -> StoredJob:
    """An active job stating pay (a year's $52,000) and both statements: it complies."""
    base = StoredJob(
        id=1,
        employer_id=1,
        reference_id=None,
        title="Senior Baker",
        publish_date=TODAY,
        close_date=date(2026, 5, 9),
        confidential=False,
        auto_refresh=False,
        status="active",
        position_type_id=1,
        salary_amount=Decimal(52000),
        salary_max=None,
        salary_period_id=1,
        salary_commission=False,
        description="<p>Bake bread.</p>",
        routing_type=1,
        application_email="jobs@maple.test",
        application_url=None,
        ai_screening=False,
        existing_vacancy=True,
        workplace_type="onSite",
        applicant_locations="",
        taken_down=False,
        questions=None,
        language="en",
        translation_title=None,
        translation_description=None,
        version=1,
        updated_at=None,
        locations=(),
        category_ids=(12,),
    )
    return replace(base, **changes)  # type: ignore[arg-type]


def codes(found: list[Warning]) -> list[tuple[str, str]]:
    return sorted((w.field, w.code) for w in found)


def check(
    j: StoredJob, provinces: set[str], *, ontario25: bool = True, today: date = TODAY
) -> list[tuple[str, str]]:
    return codes(compliance.findings(j, provinces, ontario25_plus=ontario25, today=today))


def test_a_complying_job_breaks_nothing_anywhere() -> None:
    assert check(job(), {"BC", "PE", "ON", "AB"}) == []


@pytest.mark.parametrize("province", ["BC", "PE", "ON"])
def test_no_salary_or_a_zero_amount_is_pay_required(province: str) -> None:
    for broken in (job(salary_amount=None, salary_period_id=None), job(salary_amount=Decimal(0))):
        assert ("salary", "pay_required") in check(broken, {province})
    assert check(job(salary_amount=Decimal("0.01")), {province}) == []


def test_one_pay_required_for_a_job_in_several_jurisdictions() -> None:
    """BC, PEI and Ontario all ask for pay: one entry; Ontario's other rules beside it."""
    broken = job(salary_amount=None, salary_period_id=None, ai_screening=None)
    assert check(broken, {"BC", "PE", "ON"}) == [
        ("aiScreening", "ai_disclosure_required"),
        ("salary", "pay_required"),
    ]
    assert check(broken, {"BC", "PE"}) == [("salary", "pay_required")]


@pytest.mark.parametrize(
    ("low", "top", "period", "too_wide"),
    [
        ("50000", "100000", 1, False),  # exactly $50,000 wide a year
        ("50000", "100000.01", 1, True),  # one cent over
        ("150000", "200000.01", 1, False),  # wide enough, but its top is over $200,000
        ("100000", "200000", 1, True),  # a top of exactly $200,000 is not over it
        ("20", "44.03", 5, False),  # hourly: 24.03 × 2,080 = 49,982.40
        ("20", "44.04", 5, True),  # 24.04 × 2,080 = 50,003.20
        ("100", "292.30", 4, False),  # daily: 192.30 × 260 = 49,998
        ("100", "292.31", 4, True),  # 192.31 × 260 = 50,000.60
        ("1000", "1961.53", 3, False),  # weekly: 961.53 × 52 = 49,999.56
        ("1000", "1961.54", 3, True),  # 961.54 × 52 = 50,000.08
        ("4000", "8166.66", 2, False),  # monthly: 4,166.66 × 12 = 49,999.92
        ("4000", "8166.67", 2, True),  # 4,166.67 × 12 = 50,000.04
        ("8000", "16666.67", 2, False),  # over $200,000 a year at the top (200,000.04)
    ],
)
def test_ontario_s_range_width_at_the_edges_of_the_annual_conversion(
    low: str, top: str, period: int, too_wide: bool
) -> None:
    salaried = job(salary_amount=Decimal(low), salary_max=Decimal(top), salary_period_id=period)
    expected = [("salary.maxAmount", "pay_range_too_wide")] if too_wide else []
    assert check(salaried, {"ON"}) == expected
    assert check(salaried, {"BC"}) == []  # BC asks for pay, not for a narrow range


def test_ontario_s_rules_apply_to_employers_with_25_or_more_employees_only() -> None:
    broken = job(
        salary_amount=None, salary_period_id=None, ai_screening=None, existing_vacancy=None
    )
    assert check(broken, {"ON"}) == [
        ("aiScreening", "ai_disclosure_required"),
        ("existingVacancy", "vacancy_disclosure_required"),
        ("salary", "pay_required"),
    ]
    assert check(broken, {"ON"}, ontario25=False) == []
    assert check(broken, {"ON", "BC"}, ontario25=False) == [("salary", "pay_required")]


def test_a_rule_applies_from_the_day_it_is_in_force() -> None:
    broken = job(ai_screening=None)
    assert check(broken, {"ON"}, today=date(2025, 12, 31)) == []
    assert check(broken, {"ON"}, today=date(2026, 1, 1)) == [
        ("aiScreening", "ai_disclosure_required")
    ]
    unpaid = job(salary_amount=None, salary_period_id=None)
    assert check(unpaid, {"BC"}, today=date(2023, 10, 31)) == []
    assert check(unpaid, {"BC"}, today=date(2023, 11, 1)) == [("salary", "pay_required")]


@pytest.mark.parametrize(
    ("title", "description"),
    [
        ("Baker", "<p>Canadian experience required.</p>"),
        ("Baker", "<p>CANADIAN   Experience</p>"),
        ("Boulanger", "<p>Expérience canadienne exigée.</p>"),
        ("Boulanger", "<p>EXPE\u0301RIENCE <em>Canadienne</em></p>"),  # decomposed É
        ("Boulanger", "<p>exp&eacute;rience&nbsp;canadienne</p>"),  # entities decoded
        ("Baker with canadian experience", "<p>Bake.</p>"),
        ("Baker", "<p>Canadian</p><p>experience</p>"),  # tags are word breaks
        ("Baker", "<p>Canadian\n\t experience</p>"),  # any run of whitespace
        ("Baker", "<p>Canadian\u2003experience</p>"),  # an em space
        ("Baker", "<p>canadian-experience</p>"),  # a separator is a space
    ],
)
def test_a_canadian_experience_requirement_is_found_in_every_writing(
    title: str, description: str
) -> None:
    found = check(job(title=title, description=description), {"ON"})
    assert found == [("description", "canadian_experience_requirement")]


@pytest.mark.parametrize(
    "description",
    [
        '<p><a href="https://x.test/?q=&gt;canadian experience">Apply</a></p>',  # as nh3 stores it
        '<p><a href="https://x.test/?q=>canadian experience">Apply</a></p>',  # ">" quoted
        "<p>Canadian-born founders; experience with ovens</p>",
    ],
)
def test_words_a_reader_does_not_see_together_are_no_requirement(description: str) -> None:
    assert check(job(description=description), {"ON"}) == []


def test_canadian_experience_is_never_an_error() -> None:
    broken = job(description="<p>Canadian experience required.</p>")
    found = compliance.findings(broken, {"ON"}, ontario25_plus=True, today=TODAY)
    assert compliance.apply_mode("enforce", found) == found  # a warning, not a 422
    assert compliance.apply_mode("off", found) == []


def test_enforce_refuses_with_every_entry_but_the_canadian_experience_one() -> None:
    broken = job(ai_screening=None, description="<p>Canadian experience</p>")
    found = compliance.findings(broken, {"ON"}, ontario25_plus=True, today=TODAY)
    with pytest.raises(ValidationFailed) as refused:
        compliance.apply_mode("enforce", found)
    assert [(e.field, e.code) for e in refused.value.errors] == [
        ("aiScreening", "ai_disclosure_required")
    ]
    assert compliance.apply_mode("warn", found) == found


def test_quebec_asks_for_the_posting_in_french() -> None:
    assert check(job(), {"QC"}) == [("translation", "french_version_required")]
    assert check(job(language="fr"), {"QC"}) == []
    translated = job(translation_title="Boulanger", translation_description="<p>Pain.</p>")
    assert check(translated, {"QC"}) == []


def test_the_translation_is_read_for_canadian_experience() -> None:
    translated = job(
        translation_title="Boulanger",
        translation_description="<p>Expérience canadienne exigée</p>",
    )
    assert check(translated, {"ON"}) == [("description", "canadian_experience_requirement")]


@pytest.mark.parametrize("status", ["draft", "archived"])
def test_a_job_that_is_not_active_is_not_checked(status: str) -> None:
    broken = job(status=status, salary_amount=None, salary_period_id=None, ai_screening=None)
    assert check(broken, {"ON", "BC", "QC"}) == []


def test_each_row_of_the_table_names_a_known_province_and_a_distinct_rule() -> None:
    from models.reference.lists import PROVINCES

    codes_known = {code for _id, code, _name, _kind in PROVINCES}
    assert {rule.jurisdiction for rule in compliance.RULES} <= codes_known
    keys = [(r.jurisdiction, r.code, r.field) for r in compliance.RULES]
    assert len(keys) == len(set(keys))
