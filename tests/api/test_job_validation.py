"""C4: every rule of the write shape broken once, answered 422 validation_failed with an entry
naming the field and the code (C1). Each case changes one property of a valid body, so the entry
list must be exactly the one expected: every rule reported, nothing spurious."""

from __future__ import annotations

from typing import Any

import pytest
from sqlalchemy.orm import Session, sessionmaker

from models import employers
from tests.factories import JOBS, create_job, entries, job_body, unstamped

INT32_MAX = 2**31 - 1
TORONTO = {"description": "Toronto, ON"}
URL_ROUTE = {"applicantRoutingType": {"id": 2}, "applicationEmail": ...}
SALARY = {"amount": 60000, "period": {"id": 1}}


def case(overrides: dict[str, Any], field: str, code: str, name: str) -> Any:
    return pytest.param(overrides, field, code, id=name)


CASES = [
    # types are strict (C4): no coercion of booleans, numbers or strings
    case({"title": 1}, "title", "invalid_type", "title-number"),
    case({"title": ["x"]}, "title", "invalid_type", "title-array"),
    case({"confidential": 1}, "confidential", "invalid_type", "bool-as-int"),
    case({"confidential": "true"}, "confidential", "invalid_type", "bool-as-string"),
    case({"autoRefresh": 0}, "autoRefresh", "invalid_type", "autoRefresh-as-int"),
    case({"categories": [{"id": "12"}]}, "categories[0].id", "invalid_type", "int-as-string"),
    case({"categories": [{"id": 12.0}]}, "categories[0].id", "invalid_type", "id-as-float"),
    case({"categories": [{"id": True}]}, "categories[0].id", "invalid_type", "id-as-bool"),
    case(
        {"categories": [{"id": INT32_MAX + 1}]},
        "categories[0].id",
        "out_of_range",
        "category-id-over-int32",
    ),
    case(
        {"positionType": {"id": -(2**31) - 1}},
        "positionType.id",
        "out_of_range",
        "position-type-id-under-int32",
    ),
    # the ends of Int32 themselves are ids, of no category here (C4)
    case(
        {"categories": [{"id": -(2**31)}]},
        "categories[0].id",
        "unknown_category",
        "category-id-int32-min",
    ),
    case(
        {"categories": [{"id": INT32_MAX}]},
        "categories[0].id",
        "unknown_category",
        "category-id-int32-max",
    ),
    case({"positionType": {"id": "1"}}, "positionType.id", "invalid_type", "position-type-string"),
    case({"positionType": 1}, "positionType", "invalid_type", "position-type-not-object"),
    case(
        {"locations": [{"id": INT32_MAX + 1}]},
        "locations[0].id",
        "out_of_range",
        "location-id-over-int32",
    ),
    case(
        {"locations": [{"id": -(2**31) - 1}]},
        "locations[0].id",
        "out_of_range",
        "location-id-under-int32",
    ),
    # the ends of Int32 are ids, of no location (C3, C4)
    case(
        {"locations": [{"id": -(2**31)}]},
        "locations[0].id",
        "unknown_location",
        "location-id-int32-min",
    ),
    case(
        {"locations": [{"id": INT32_MAX}]},
        "locations[0].id",
        "unknown_location",
        "location-id-int32-max",
    ),
    case(
        {"locations": [{"id": "6167865"}]}, "locations[0].id", "invalid_type", "location-id-string"
    ),
    case(
        {"applicantRoutingType": {"id": 1.5}},
        "applicantRoutingType.id",
        "invalid_type",
        "routing-id-float",
    ),
    case({"closeDate": 20260401}, "closeDate", "invalid_type", "date-as-number"),
    # NUL characters (C4: invalid_format)
    case({"title": "Baker\x00"}, "title", "invalid_format", "nul-in-title"),
    case({"referenceId": "R\x001"}, "referenceId", "invalid_format", "nul-in-referenceId"),
    case({"description": "<p>a\x00b</p>"}, "description", "invalid_format", "nul-in-description"),
    case(
        {"applicationEmail": "jobs\x00@maple.test"},
        "applicationEmail",
        "invalid_format",
        "nul-in-email",
    ),
    case(
        {"locations": [{"description": "Toronto\x00, ON"}]},
        "locations[0].description",
        "invalid_format",
        "nul-in-location",
    ),
    # title: 1 to 256 characters after trimming
    case({"title": ""}, "title", "too_short", "title-empty"),
    case({"title": " \t\n "}, "title", "too_short", "title-blank"),
    case({"title": "x" * 257}, "title", "too_long", "title-257"),
    case({"title": " " + "x" * 257 + " "}, "title", "too_long", "title-257-after-trim"),
    # referenceId: at most 50
    case({"referenceId": "r" * 51}, "referenceId", "too_long", "referenceId-51"),
    case({"referenceId": 7}, "referenceId", "invalid_type", "referenceId-number"),
    # status: exactly active, archived or draft
    case({"status": "open"}, "status", "out_of_range", "status-open"),
    case({"status": "Active"}, "status", "out_of_range", "status-case"),
    case({"status": "published"}, "status", "out_of_range", "status-published"),
    case({"status": True}, "status", "invalid_type", "status-bool"),
    # locations and categories: 1 to 3, no duplicates, must exist
    case({"locations": []}, "locations", "too_few", "0-locations"),
    case(
        {
            "locations": [
                {"description": d}
                for d in ("Toronto, ON", "Ottawa, ON", "Calgary, AB", "Halifax, NS")
            ]
        },
        "locations",
        "too_many",
        "4-locations",
    ),
    case({"locations": TORONTO}, "locations", "invalid_type", "locations-not-array"),
    case({"locations": ["Toronto, ON"]}, "locations[0]", "invalid_type", "location-not-object"),
    case({"locations": [{}]}, "locations[0].description", "required", "location-empty-object"),
    case(
        {"locations": [TORONTO, {"description": "toronto,  on"}]},
        "locations[1]",
        "duplicate",
        "duplicate-location",
    ),
    case(
        {"locations": [TORONTO, {"id": 6167865}]},
        "locations[1]",
        "duplicate",
        "duplicate-location-by-id",
    ),
    case(
        {"locations": [{"description": "x" * 301}]},
        "locations[0].description",
        "too_long",
        "location-301",
    ),
    # 300 characters is a description (interface: max 300), of no place here
    case(
        {"locations": [{"description": "x" * 300}]},
        "locations[0].description",
        "unknown_location",
        "location-300",
    ),
    case({"locations": [{"id": 42}]}, "locations[0].id", "unknown_location", "location-unknown-id"),
    case(
        {"locations": [{"id": 6167865, "description": "Ottawa, ON"}]},
        "locations[0]",
        "unknown_location",
        "location-id-and-description-disagree",
    ),
    case({"categories": []}, "categories", "too_few", "0-categories"),
    case(
        {"categories": [{"id": i} for i in (1, 2, 3, 4)]}, "categories", "too_many", "4-categories"
    ),
    case(
        {"categories": [{"id": 12}, {"id": 12}]},
        "categories[1].id",
        "duplicate",
        "duplicate-category",
    ),
    case({"categories": [{"id": 31}]}, "categories[0].id", "unknown_category", "category-31"),
    case({"categories": [{"id": 0}]}, "categories[0].id", "unknown_category", "category-0"),
    case({"categories": [{}]}, "categories[0].id", "required", "category-without-id"),
    case({"categories": {"id": 12}}, "categories", "invalid_type", "categories-not-array"),
    case({"positionType": {"id": 6}}, "positionType.id", "unknown_position_type", "position-6"),
    case({"positionType": {}}, "positionType.id", "required", "position-type-without-id"),
    # salary
    case(
        {"salary": {"amount": 1, "period": {"id": 6}}},
        "salary.period.id",
        "unknown_salary_period",
        "period-6",
    ),
    case(
        {"salary": {"amount": 1, "period": {"id": 0}}},
        "salary.period.id",
        "unknown_salary_period",
        "period-0",
    ),
    case(
        {"salary": {"amount": 1, "period": {"id": "1"}}},
        "salary.period.id",
        "invalid_type",
        "period-id-string",
    ),
    case({"salary": {"amount": 1}}, "salary.period.id", "required", "salary-without-period"),
    case(
        {"salary": {"amount": 1, "period": {}}},
        "salary.period.id",
        "required",
        "salary-period-without-id",
    ),
    case({"salary": {"period": {"id": 1}}}, "salary.amount", "required", "salary-without-amount"),
    case({"salary": {**SALARY, "amount": -1}}, "salary.amount", "out_of_range", "amount-negative"),
    case(
        {"salary": {**SALARY, "amount": 10**10}},
        "salary.amount",
        "out_of_range",
        "amount-10-billion",
    ),
    case(
        {"salary": {**SALARY, "amount": 1.005}},
        "salary.amount",
        "invalid_format",
        "amount-3-decimals",
    ),
    case(
        {"salary": {**SALARY, "amount": "60000"}}, "salary.amount", "invalid_type", "amount-string"
    ),
    case({"salary": {**SALARY, "amount": True}}, "salary.amount", "invalid_type", "amount-bool"),
    case(
        {"salary": {**SALARY, "maxAmount": 59999.99}},
        "salary.maxAmount",
        "below_amount",
        "max-below-amount",
    ),
    case(
        {"salary": {**SALARY, "maxAmount": 1.001}},
        "salary.maxAmount",
        "invalid_format",
        "max-3-decimals",
    ),
    case(
        {"salary": {**SALARY, "plusCommission": "yes"}},
        "salary.plusCommission",
        "invalid_type",
        "commission-string",
    ),
    case({"salary": 60000}, "salary", "invalid_type", "salary-number"),
    # description: required, non-empty, the HTML allow-list
    case({"description": ""}, "description", "too_short", "description-empty"),
    case({"description": "   "}, "description", "too_short", "description-blank"),
    # What is stored is what nh3 leaves: here blank, which a GET would serve (C4).
    case({"description": "<!-- x -->"}, "description", "too_short", "description-a-comment"),
    case({"description": " <!---->\n"}, "description", "too_short", "description-blank-comment"),
    case({"description": "&#32;"}, "description", "too_short", "description-entity-space"),
    case({"description": 5}, "description", "invalid_type", "description-number"),
    case(
        {"description": "<p>x</p><script>alert(1)</script>"},
        "description",
        "html_tag_not_allowed",
        "script-tag",
    ),
    case({"description": "<h1>Baker</h1>"}, "description", "html_tag_not_allowed", "h1-tag"),
    case({"description": "<img src=x>"}, "description", "html_tag_not_allowed", "img-tag"),
    case(
        {"description": '<p>x</p><img src="x.png"/>'},
        "description",
        "html_tag_not_allowed",
        "self-closing-img-tag",
    ),
    case(
        {"description": '<p class="lead">x</p>'},
        "description",
        "html_attribute_not_allowed",
        "attribute-on-p",
    ),
    case(
        {"description": '<a href="https://maple.test" onclick="x()">x</a>'},
        "description",
        "html_attribute_not_allowed",
        "onclick-on-a",
    ),
    case({"description": "<a>apply</a>"}, "description", "html_href_required", "a-without-href"),
    case(
        {"description": '<a href="">apply</a>'},
        "description",
        "html_href_required",
        "a-with-empty-href",
    ),
    case(
        {"description": '<a href="javascript:alert(1)">x</a>'},
        "description",
        "html_href_scheme",
        "javascript-href",
    ),
    case(
        {"description": '<a href=" JaVaScRiPt:alert(1)">x</a>'},
        "description",
        "html_href_scheme",
        "javascript-href-disguised",
    ),
    case(
        {"description": '<a href="/apply">x</a>'},
        "description",
        "html_href_scheme",
        "relative-href",
    ),
    case(
        {"description": '<a href="ftp://maple.test/x">x</a>'},
        "description",
        "html_href_scheme",
        "ftp-href",
    ),
    # what no description needs and the HTML parsers pay for with the square of its size
    case(
        {"description": "<div>" * 1001 + "deep"},
        "description",
        "too_long",
        "more-than-1000-elements-open",
    ),
    case({"description": "<a " * 102 + ">x"}, "description", "invalid_format", "tags-never-ended"),
    # routing type and the route's own address
    case(
        {"applicantRoutingType": {"id": 3}},
        "applicantRoutingType.id",
        "unknown_routing_type",
        "routing-3",
    ),
    case({"applicantRoutingType": {}}, "applicantRoutingType.id", "required", "routing-no-id"),
    case({"applicationEmail": ...}, "applicationEmail", "required", "email-route-without-email"),
    case({"applicationEmail": None}, "applicationEmail", "required", "email-route-null-email"),
    case(URL_ROUTE, "applicationUrl", "required", "url-route-without-url"),
    case(
        {"applicationEmail": "not-an-address"}, "applicationEmail", "invalid_format", "email-syntax"
    ),
    case(
        {"applicationEmail": "=?utf-8?q?=0D=0Ax?=@maple.test"},
        "applicationEmail",
        "invalid_format",
        "email-holding-an-encoded-word",
    ),
    case(
        {"applicationEmail": "jobs@maple"},
        "applicationEmail",
        "invalid_format",
        "email-without-tld",
    ),
    case(
        {"applicationEmail": "j" * 40 + "@maple.test"}, "applicationEmail", "too_long", "email-51"
    ),
    case({"applicationEmail": 5}, "applicationEmail", "invalid_type", "email-number"),
    case(
        {**URL_ROUTE, "applicationUrl": "ftp://maple.test/jobs"},
        "applicationUrl",
        "invalid_format",
        "url-ftp",
    ),
    case(
        {**URL_ROUTE, "applicationUrl": "maple.test/jobs"},
        "applicationUrl",
        "invalid_format",
        "url-without-scheme",
    ),
    case(
        {**URL_ROUTE, "applicationUrl": "https://"},
        "applicationUrl",
        "invalid_format",
        "url-without-host",
    ),
    case(
        {**URL_ROUTE, "applicationUrl": "https://[maple.test/jobs"},
        "applicationUrl",
        "invalid_format",
        "url-unclosed-bracket",
    ),
    case(
        {**URL_ROUTE, "applicationUrl": "https://maple.test/a b"},
        "applicationUrl",
        "invalid_format",
        "url-with-space",
    ),
    case(
        {**URL_ROUTE, "applicationUrl": "https://maple.test/" + "x" * 182},
        "applicationUrl",
        "too_long",
        "url-201",
    ),
    # closeDate: YYYY-MM-DD, not before today (the clock says 2026-03-10)
    case({"closeDate": "2026-03-09"}, "closeDate", "in_the_past", "close-yesterday"),
    case({"closeDate": "2026/04/01"}, "closeDate", "invalid_format", "close-slashes"),
    case({"closeDate": "2026-4-1"}, "closeDate", "invalid_format", "close-unpadded"),
    case({"closeDate": "2026-02-30"}, "closeDate", "invalid_format", "close-no-such-day"),
    case({"closeDate": "2026-04-01T00:00:00"}, "closeDate", "invalid_format", "close-datetime"),
    case({"closeDate": "20260401"}, "closeDate", "invalid_format", "close-basic-format"),
    # required properties on create
    case({"title": ...}, "title", "required", "no-title"),
    case({"locations": ...}, "locations", "required", "no-locations"),
    case({"categories": ...}, "categories", "required", "no-categories"),
    case({"positionType": ...}, "positionType", "required", "no-position-type"),
    case({"description": ...}, "description", "required", "no-description"),
    case({"applicantRoutingType": ...}, "applicantRoutingType", "required", "no-routing-type"),
    case({"title": None}, "title", "required", "null-title"),
]


@pytest.mark.parametrize(("overrides", "field", "code"), CASES)
def test_a_broken_write_rule_is_422_naming_field_and_code(
    api: Any, employer: Any, overrides: dict[str, Any], field: str, code: str
) -> None:
    """C4 rules, C1 entries: one broken rule, one entry with its field and code."""
    result = api.post(JOBS, json=job_body(**overrides), key=employer.key)
    assert entries(result) == [(field, code)]


def test_values_at_the_length_limits_are_accepted(api: Any, employer: Any) -> None:
    """The limits themselves are allowed: email 50, URL 200, title 1 and 256, referenceId 1
    and 50 (C4)."""
    email = "j" * 39 + "@maple.test"
    url = "https://maple.test/" + "x" * 181
    assert (len(email), len(url)) == (50, 200)
    create_job(api, employer, applicationEmail=email, title="t" * 256, referenceId="r" * 50)
    shortest = create_job(api, employer, title=" t ", referenceId="r")
    assert (shortest["title"], shortest["referenceId"]) == ("t", "r")
    job = create_job(api, employer, applicantRoutingType={"id": 2}, applicationUrl=url)
    assert job["applicationUrl"] == url


def test_a_long_description_of_paragraphs_and_line_breaks_is_accepted(
    api: Any, employer: Any
) -> None:
    """C4: the service's nesting limit (models.jobs.html.MAX_OPEN) counts elements open inside
    each other, not paragraphs side by side nor line breaks."""
    description = "<p>Bake.</p>" * 1001 + "Knead.<br>" * 1001
    assert create_job(api, employer, description=description)["description"] == description


def test_every_required_property_missing_is_listed(api: Any, employer: Any) -> None:
    """C1: every broken rule; C4: an empty body lists each required property."""
    result = api.post(JOBS, json={}, key=employer.key)
    assert entries(result) == [
        (name, "required")
        for name in (
            "title",
            "locations",
            "categories",
            "positionType",
            "description",
            "applicantRoutingType",
        )
    ]


def test_an_unknown_location_suggests_up_to_three_descriptions(api: Any, employer: Any) -> None:
    """C1/C3: unknown_location carries a `suggestions` array of up to 3 descriptions."""
    result = api.post(
        JOBS, json=job_body(locations=[{"description": "Toronot, ON"}]), key=employer.key
    )
    assert entries(result) == [("locations[0].description", "unknown_location")]
    entry = result.json["errors"][0]
    assert 1 <= len(entry["suggestions"]) <= 3
    assert entry["suggestions"][0] == "Toronto, ON"
    assert "Toronto, ON" in entry["message"]


@pytest.mark.parametrize(
    ("description", "suggestions"),
    [
        ("Richmnd", ["Richmond, BC", "Richmond, AB", "Richmond, ON"]),
        ("Richmnd, ON", ["Richmond, ON", "Richmond, BC", "Richmond, AB"]),
    ],
    ids=["by population", "its province first"],
)
def test_a_misspelt_name_of_four_places_suggests_three_nearest_first(
    api: Any, employer: Any, description: str, suggestions: list[str]
) -> None:
    """C1/C3: at most 3 suggestions, the nearest first; among equally near places, the one in
    the written province, then the most populous: the gazetteer has four Richmonds (BC, AB,
    ON, QC) and Richmond Hill."""
    locations = [{"description": description}]
    result = api.post(JOBS, json=job_body(locations=locations), key=employer.key)
    assert entries(result) == [("locations[0].description", "unknown_location")]
    assert result.json["errors"][0]["suggestions"] == suggestions


def test_a_place_that_is_nowhere_is_unknown_with_few_or_no_suggestions(
    api: Any, employer: Any
) -> None:
    result = api.post(
        JOBS, json=job_body(locations=[{"description": "Atlantis, ZZ"}]), key=employer.key
    )
    assert entries(result) == [("locations[0].description", "unknown_location")]
    assert len(result.json["errors"][0]["suggestions"]) <= 3


def test_each_of_several_locations_is_reported_at_its_own_index(api: Any, employer: Any) -> None:
    body = job_body(locations=[TORONTO, {"description": "Nowhereville, ON"}, {"id": "x"}])
    assert entries(api.post(JOBS, json=body, key=employer.key)) == [
        ("locations[1].description", "unknown_location"),
        ("locations[2].id", "invalid_type"),
    ]


# --- autoRefresh and the employer's plan -----------------------------------------------


def test_auto_refresh_on_a_standard_plan_is_422(api: Any, make_employer: Any) -> None:
    """C4: writing autoRefresh true needs the unlimited plan."""
    standard = make_employer("Standard Co", "standard")
    result = api.post(JOBS, json=job_body(autoRefresh=True), key=standard.key)
    assert entries(result) == [("autoRefresh", "auto_refresh_requires_unlimited_plan")]
    assert create_job(api, standard, autoRefresh=False)["autoRefresh"] is False


def test_auto_refresh_on_an_unlimited_plan_is_stored(api: Any, make_employer: Any) -> None:
    unlimited = make_employer("Unlimited Co", "unlimited")
    job = create_job(api, unlimited, autoRefresh=True)
    assert job["autoRefresh"] is True
    assert api.get(f"{JOBS}/{job['id']}", key=unlimited.key).json["autoRefresh"] is True


def test_a_stored_auto_refresh_left_from_a_downgrade_does_not_fail_other_updates(
    api: Any, make_employer: Any, sessions: sessionmaker[Session]
) -> None:
    """C4: a stored true left over from a plan downgrade does not fail other updates."""
    account = make_employer("Downgraded Co", "unlimited")
    job = create_job(api, account, autoRefresh=True)
    with sessions() as s:
        employers.set_plan(s, account.id, "standard")
        s.commit()
    result = api.put(f"{JOBS}/{job['id']}", json={"title": "Head Baker"}, key=account.key)
    assert result.status_code == 200
    assert result.json["title"] == "Head Baker" and result.json["autoRefresh"] is True
    # The GET result PUT back with a change, as a client syncing whole jobs sends it: the
    # stored true is not written, so it does not fail the update either (as closeDate, C4).
    whole = {**result.json, "title": "Master Baker"}
    synced = api.put(f"{JOBS}/{job['id']}", json=whole, key=account.key)
    assert synced.status_code == 200 and unstamped(synced.json) == unstamped(whole)
    # false is always allowed; true again is then a write, which the plan no longer allows.
    off = api.put(f"{JOBS}/{job['id']}", json={"autoRefresh": False}, key=account.key)
    assert off.status_code == 200 and off.json["autoRefresh"] is False
    again = api.put(f"{JOBS}/{job['id']}", json={"autoRefresh": True}, key=account.key)
    assert entries(again) == [("autoRefresh", "auto_refresh_requires_unlimited_plan")]


# --- PUT: explicit nulls and the merged job ---------------------------------------------


@pytest.mark.parametrize(
    "name",
    ["title", "locations", "categories", "positionType", "description", "applicantRoutingType"],
)
def test_an_explicit_null_for_a_required_property_on_put_is_422(
    api: Any, employer: Any, name: str
) -> None:
    """C4: an explicit null for a required property is a 422 (omitting it keeps the value)."""
    job = create_job(api, employer)
    result = api.put(f"{JOBS}/{job['id']}", json={name: None}, key=employer.key)
    assert entries(result) == [(name, "required")]
    assert api.get(f"{JOBS}/{job['id']}", key=employer.key).json == job


def test_a_null_address_of_the_current_route_on_put_is_422(api: Any, employer: Any) -> None:
    """C4: the merged job must satisfy every rule; Email routing requires applicationEmail."""
    job = create_job(api, employer)
    result = api.put(f"{JOBS}/{job['id']}", json={"applicationEmail": None}, key=employer.key)
    assert entries(result) == [("applicationEmail", "required")]


def test_switching_route_on_put_requires_the_new_address(api: Any, employer: Any) -> None:
    job = create_job(api, employer)
    result = api.put(
        f"{JOBS}/{job['id']}", json={"applicantRoutingType": {"id": 2}}, key=employer.key
    )
    assert entries(result) == [("applicationUrl", "required")]


def test_a_put_breaking_rules_changes_nothing(api: Any, employer: Any) -> None:
    job = create_job(api, employer)
    body = {"title": "New title", "categories": [{"id": 99}]}
    assert entries(api.put(f"{JOBS}/{job['id']}", json=body, key=employer.key)) == [
        ("categories[0].id", "unknown_category")
    ]
    assert api.get(f"{JOBS}/{job['id']}", key=employer.key).json == job


def test_put_validates_types_like_post(api: Any, employer: Any) -> None:
    job = create_job(api, employer)
    body = {"confidential": 0, "closeDate": "2026-03-01", "salary": {"amount": "1"}}
    assert entries(api.put(f"{JOBS}/{job['id']}", json=body, key=employer.key)) == [
        ("closeDate", "in_the_past"),
        ("confidential", "invalid_type"),
        ("salary.amount", "invalid_type"),
        ("salary.period.id", "required"),
    ]
