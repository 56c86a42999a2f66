"""C4 job writes that succeed: defaults, normalisation, the symmetry rule, partial PUT."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

from tests.factories import JOBS, create_job, entries, job_body, read_shape

FULL_URL_JOB = {
    "referenceId": "BAKE-001",
    "title": "Head Baker",
    "closeDate": "2026-04-30",
    "confidential": True,
    "status": "active",
    "locations": [{"description": "Vancouver, BC"}, {"description": "Montreal, QC"}],
    "categories": [{"id": 17}, {"id": 12}],
    "positionType": {"id": 3},
    "salary": {
        "amount": 60000,
        "maxAmount": 70000.5,
        "period": {"id": 1},
        "plusCommission": True,
    },
    "description": '<p>Bake <a href="https://maple.test/about" target="_blank">with us</a>.</p>'
    "<ul><li>Bread</li><li>Pastry</li></ul>",
    "applicantRoutingType": {"id": 2},
    "applicationUrl": "https://maple.test/careers/apply?job=1",
}


def test_a_new_job_gets_its_defaults(api: Any, employer: Any) -> None:
    """C4/C5: status draft, closeDate publishDate + 60, confidential and autoRefresh false,
    no salary, referenceId null; publishDate is today by the service clock."""
    job = create_job(api, employer, salary=...)
    assert job["publishDate"] == "2026-03-10" and job["closeDate"] == "2026-05-09"
    assert job["status"] == "draft" and job["referenceId"] is None
    assert job["confidential"] is False and job["autoRefresh"] is False
    assert job["salary"] is None and job["applicationUrl"] is None


def test_the_response_is_the_complete_job_with_names_and_units(api: Any, employer: Any) -> None:
    """Interface rule 5: the response includes employer, names and units."""
    created = api.post(JOBS, json=FULL_URL_JOB, key=employer.key)
    assert created.status_code == 201
    job = created.json
    assert created.headers["location"] == f"http://127.0.0.1:8000{JOBS}/{job['id']}"
    assert job["employer"] == {"id": employer.id, "name": employer.name}
    assert job["referenceId"] == "BAKE-001"
    assert [loc["description"] for loc in job["locations"]] == ["Vancouver, BC", "Montréal, QC"]
    assert job["locations"][0] == {
        "id": 6173331,
        "name": "Vancouver",
        "description": "Vancouver, BC",
        "type": "City",
        "latitude": 49.24966,
        "longitude": -123.11934,
    }
    assert job["categories"] == [
        {"id": 17, "name": "Manufacturing & Production"},
        {"id": 12, "name": "Hospitality & Tourism"},
    ]
    assert job["positionType"] == {"id": 3, "name": "Contract"}
    assert job["salary"] == {
        "amount": 60000,
        "maxAmount": 70000.5,
        "plusCommission": True,
        "period": {"id": 1, "name": "Yearly", "unit": "year"},
    }
    assert job["applicantRoutingType"] == {"id": 2, "name": "URL"}
    assert job["applicationEmail"] is None
    assert job["confidential"] is True and job["status"] == "active"


@pytest.mark.parametrize(
    "body",
    [
        pytest.param(FULL_URL_JOB, id="url-route-every-property"),
        pytest.param(
            job_body(
                salary={"amount": 19.99, "period": {"id": 5}},
                referenceId="E-1",
                locations=[{"description": "Ontario"}, {"id": 6167865}],
            ),
            id="email-route-hourly",
        ),
        pytest.param(
            job_body(locations=[{"id": 13580764}]),  # the smaller of two Vanier, ON (C3)
            id="a-place-sharing-its-description",
        ),
    ],
)
def test_symmetry_a_get_result_without_id_and_reference_id_posts_an_equal_job(
    api: Any, employer: Any, body: dict[str, Any]
) -> None:
    """C4 (interface, write shape): take a GET result, remove id and referenceId, POST it:
    the new job has the same values (publishDate too, on the same day)."""
    original = create_job(api, employer, **body)
    fetched = api.get(f"{JOBS}/{original['id']}", key=employer.key).json
    del fetched["id"], fetched["referenceId"]
    result = api.post(JOBS, json=fetched, key=employer.key)
    assert result.status_code == 201, result.text
    copy_ = read_shape(result.json)
    assert copy_["id"] != original["id"] and copy_["referenceId"] is None
    strip = {"id", "referenceId", "updatedAt"}  # and when each was written (C10)
    assert {k: v for k, v in copy_.items() if k not in strip} == {
        k: v for k, v in original.items() if k not in strip
    }


def test_putting_a_get_result_back_changes_nothing(api: Any, employer: Any) -> None:
    """C4: read-only members (id, publishDate, employer, names, units, types) are ignored."""
    job = create_job(api, employer, **FULL_URL_JOB)
    result = api.put(f"{JOBS}/{job['id']}", json=job, key=employer.key)
    assert result.status_code == 200 and read_shape(result.json) == job


def test_read_only_and_unknown_properties_are_ignored(
    api: Any, employer: Any, make_employer: Any
) -> None:
    """C4: unknown and read-only properties are ignored, never an error."""
    other = make_employer("Other Co")
    body = job_body(
        id=5,
        publishDate="2020-01-01",
        employer={"id": other.id, "name": "Other"},
        colour="blue",
        positionType={"id": 2, "name": "Whatever"},
        locations=[
            {
                "description": "Toronto, ON",
                "name": "X",
                "type": "Planet",
                "latitude": 0,
                "longitude": 0,
            }
        ],
    )
    job = create_job(api, employer, **body)
    assert job["publishDate"] == "2026-03-10"
    assert job["employer"] == {"id": employer.id, "name": employer.name}
    assert job["positionType"] == {"id": 2, "name": "Part Time"}
    assert job["locations"][0]["name"] == "Toronto" and job["locations"][0]["type"] == "City"
    assert "colour" not in job


def test_title_is_stored_trimmed(api: Any, employer: Any) -> None:
    """C4: title is 1 to 256 characters after trimming, stored trimmed."""
    job = create_job(api, employer, title="  " + "t" * 256 + "\n")
    assert job["title"] == "t" * 256


@pytest.mark.parametrize("given", ["", None])
def test_an_empty_or_null_reference_id_means_none(api: Any, employer: Any, given: Any) -> None:
    """C4: referenceId "" or null means none, returned as null."""
    assert create_job(api, employer, referenceId=given)["referenceId"] is None
    assert create_job(api, employer, referenceId=given)["referenceId"] is None


def test_a_salary_max_amount_equal_to_its_amount_is_accepted(api: Any, employer: Any) -> None:
    """C4: maxAmount ≥ amount: a maxAmount equal to the amount is no range below it."""
    salary = {"amount": 60000, "maxAmount": 60000, "period": {"id": 1}}
    job = create_job(api, employer, salary=salary)
    assert (job["salary"]["amount"], job["salary"]["maxAmount"]) == (60000, 60000)


def test_a_salary_amount_of_zero_is_accepted(api: Any, employer: Any) -> None:
    """C4: amount ≥ 0, so 0 is an amount (a volunteer position, id 5, may state it)."""
    salary = {"amount": 0, "maxAmount": 0, "period": {"id": 5}}
    job = create_job(api, employer, positionType={"id": 5}, salary=salary)
    assert (job["salary"]["amount"], job["salary"]["maxAmount"]) == (0, 0)


def test_amounts_are_exact_numbers_with_at_most_two_decimals(api: Any, employer: Any) -> None:
    """C4: numbers parsed exactly; returned as numbers without trailing zeros."""
    job = create_job(
        api, employer, salary={"amount": 0.1, "maxAmount": 9999999999.99, "period": {"id": 2}}
    )
    assert job["salary"]["amount"] == 0.1 and job["salary"]["maxAmount"] == 9999999999.99
    assert job["salary"]["plusCommission"] is False
    assert job["salary"]["period"] == {"id": 2, "name": "Monthly", "unit": "month"}
    raw = api.post(
        JOBS,
        body=job_body_json(salary='{"amount": 60000.00, "period": {"id": 1}}'),
        headers={"Content-Type": "application/json"},
        key=employer.key,
    )
    assert b'"amount":60000,' in raw.content


def job_body_json(**raw_members: str) -> str:
    """A valid body as JSON text, with members given as raw JSON (to control number text)."""
    text = json.dumps(job_body())[:-1]
    return text + "".join(f', "{k}": {v}' for k, v in raw_members.items()) + "}"


def test_the_other_route_address_is_stored_null(api: Any, employer: Any) -> None:
    """C4: the field of the other route is stored and returned as null."""
    email_job = create_job(api, employer, applicationUrl="https://maple.test/apply")
    assert email_job["applicationEmail"] == "jobs@maple.test"
    assert email_job["applicationUrl"] is None
    url_job = create_job(
        api, employer, applicantRoutingType={"id": 2}, applicationUrl="https://maple.test/apply"
    )
    assert url_job["applicationEmail"] is None


def test_switching_route_on_put_nulls_the_old_address(api: Any, employer: Any) -> None:
    job = create_job(api, employer)
    body = {"applicantRoutingType": {"id": 2}, "applicationUrl": "http://maple.test/jobs"}
    switched = api.put(f"{JOBS}/{job['id']}", json=body, key=employer.key).json
    assert switched["applicationEmail"] is None
    assert switched["applicationUrl"] == "http://maple.test/jobs"
    back = api.put(
        f"{JOBS}/{job['id']}",
        key=employer.key,
        json={"applicantRoutingType": {"id": 1}, "applicationEmail": "a@b.test"},
    )
    assert back.json["applicationUrl"] is None and back.json["applicationEmail"] == "a@b.test"


def test_an_application_email_is_stored_trimmed_and_test_domains_pass(
    api: Any, employer: Any
) -> None:
    """C4: valid syntax, no DNS look-up, special-use test domains accepted, trimmed."""
    job = create_job(api, employer, applicationEmail="  hiring@bakery.test ")
    assert job["applicationEmail"] == "hiring@bakery.test"


def test_allowed_html_is_stored(api: Any, employer: Any) -> None:
    """C4: every allowed tag, href with http, https or mailto, target optional."""
    html = (
        "<div><p><strong>a</strong><b>b</b><em>c</em><i>d</i><br></p><ol><li>e</li></ol>"
        '<a href="mailto:jobs@maple.test">f</a> <a href="http://maple.test" target="_top">'
        "g</a></div>"
    )
    job = create_job(api, employer, description=html)
    for fragment in (
        "<strong>a</strong>",
        '<a href="mailto:jobs@maple.test">f</a>',
        'target="_top"',
        "<br>",
    ):
        assert fragment in job["description"]
    assert "rel=" not in job["description"]


# --- closeDate ------------------------------------------------------------------------


def test_close_date_today_is_allowed(api: Any, employer: Any) -> None:
    assert create_job(api, employer, closeDate="2026-03-10")["closeDate"] == "2026-03-10"


def test_close_date_today_may_be_written_on_put_to_a_job_published_today(
    api: Any, employer: Any
) -> None:
    """C4/C5: a job is still active on its closeDate, so today is a closeDate a PUT may set
    on a job published today: it is neither before today nor before publishDate."""
    job = create_job(api, employer, closeDate="2026-04-30")
    assert job["publishDate"] == "2026-03-10"
    result = api.put(f"{JOBS}/{job['id']}", json={"closeDate": "2026-03-10"}, key=employer.key)
    assert result.status_code == 200 and result.json["closeDate"] == "2026-03-10"


def test_a_close_date_before_the_publish_date_is_422_even_when_not_before_today(
    api: Any, employer: Any, clock: Any
) -> None:
    """C4: closeDate must not be before today nor before publishDate. The service date can
    fall behind a publishDate (JOBPOST_TIMEZONE moved west, C5): the day between is not
    before today, but is before publishDate, and is refused on closeDate."""
    job = create_job(api, employer)
    clock.today = clock.today.replace(day=8)
    result = api.put(f"{JOBS}/{job['id']}", json={"closeDate": "2026-03-09"}, key=employer.key)
    assert entries(result) == [("closeDate", "out_of_range")]
    assert api.get(f"{JOBS}/{job['id']}", key=employer.key).json == job
    allowed = api.put(f"{JOBS}/{job['id']}", json={"closeDate": "2026-03-10"}, key=employer.key)
    assert allowed.status_code == 200 and allowed.json["closeDate"] == "2026-03-10"


def test_a_null_close_date_on_put_resets_it_to_publish_date_plus_60(
    api: Any, employer: Any
) -> None:
    """C4: closeDate null on update: reset to publishDate + 60 days."""
    job = create_job(api, employer, closeDate="2026-12-31")
    result = api.put(f"{JOBS}/{job['id']}", json={"closeDate": None}, key=employer.key)
    assert result.status_code == 200 and result.json["closeDate"] == "2026-05-09"


def test_a_null_close_date_on_post_is_the_default(api: Any, employer: Any) -> None:
    assert create_job(api, employer, closeDate=None)["closeDate"] == "2026-05-09"


def test_an_expired_stored_close_date_does_not_fail_a_put_that_does_not_write_it(
    api: Any, employer: Any, clock: Any
) -> None:
    """C4: a stored closeDate already past is not an error in a PUT that does not write it."""
    job = create_job(api, employer, closeDate="2026-03-12")
    clock.today = clock.today.replace(month=4)
    result = api.put(f"{JOBS}/{job['id']}", json={"title": "Still here"}, key=employer.key)
    assert result.status_code == 200 and result.json["closeDate"] == "2026-03-12"


def test_an_expired_job_put_back_as_read_is_unchanged_but_not_republished(
    api: Any, employer: Any, clock: Any
) -> None:
    """C4: a closeDate sent back as stored is not written: an ATS that PUTs its whole copy
    of an expired job (or repeats an upsert once the date has passed) is not refused; a new
    past date still is. Re-publishing with it is refused, naming what to send (C5: the request
    sets closeDate, so it does not move); left out, it moves to today + 60."""
    job = create_job(api, employer, referenceId="ECHO-1", status="active", closeDate="2026-03-12")
    clock.today = clock.today.replace(month=4)
    fetched = api.get(f"{JOBS}/{job['id']}", key=employer.key).json
    again = api.put(f"{JOBS}/{job['id']}", json=fetched, key=employer.key)
    assert again.status_code == 200 and read_shape(again.json) == fetched
    upsert = api.put(JOBS, json={**fetched, "title": "Renamed"}, key=employer.key)
    assert upsert.status_code == 200 and upsert.json["closeDate"] == "2026-03-12"
    moved = api.put(f"{JOBS}/{job['id']}", json={"closeDate": "2026-03-13"}, key=employer.key)
    assert entries(moved) == [("closeDate", "in_the_past")]
    archived = api.put(f"{JOBS}/{job['id']}", json={"status": "archived"}, key=employer.key)
    refused = api.put(
        f"{JOBS}/{job['id']}",
        json={**read_shape(archived.json), "status": "active"},
        key=employer.key,
    )
    assert entries(refused) == [("closeDate", "in_the_past")]
    assert "2026-03-12 is before today (2026-04-10)" in refused.json["errors"][0]["message"]
    left_out = {k: v for k, v in read_shape(archived.json).items() if k != "closeDate"}
    republished = api.put(
        f"{JOBS}/{job['id']}", json={**left_out, "status": "active"}, key=employer.key
    )
    assert republished.status_code == 200
    assert (republished.json["publishDate"], republished.json["closeDate"]) == (
        "2026-04-10",
        "2026-06-09",
    )


# --- partial PUT --------------------------------------------------------------------------


def test_put_with_only_a_title_keeps_everything_else(api: Any, employer: Any) -> None:
    """Interface rule 3 / C4: properties left out keep their values."""
    job = create_job(api, employer, **FULL_URL_JOB)
    result = api.put(f"{JOBS}/{job['id']}", json={"title": "Night Baker"}, key=employer.key)
    expected = copy.deepcopy(job)
    expected["title"] = "Night Baker"
    expected["updatedAt"] = result.json["updatedAt"]  # a change moves it (C10)
    assert result.status_code == 200 and read_shape(result.json) == expected
    assert expected["updatedAt"] > job["updatedAt"]
    assert api.get(f"{JOBS}/{job['id']}", key=employer.key).json == expected


def test_arrays_replace_the_stored_arrays_on_put(api: Any, employer: Any) -> None:
    """C4: locations and categories sent in a PUT replace the stored arrays (no merge)."""
    job = create_job(api, employer, **FULL_URL_JOB)
    body = {
        "locations": [{"description": "Halifax, NS"}],
        "categories": [{"id": 1}, {"id": 2}, {"id": 3}],
    }
    updated = api.put(f"{JOBS}/{job['id']}", json=body, key=employer.key).json
    assert [loc["description"] for loc in updated["locations"]] == ["Halifax, NS"]
    assert [c["id"] for c in updated["categories"]] == [1, 2, 3]


def test_arrays_keep_the_order_they_were_written_in(api: Any, employer: Any) -> None:
    """Contract preamble: arrays come back in the order they were written."""
    locations = [{"description": d} for d in ("Ottawa, ON", "Calgary, AB", "Alberta")]
    job = create_job(api, employer, locations=locations, categories=[{"id": 30}, {"id": 1}])
    assert [loc["description"] for loc in job["locations"]] == [
        "Ottawa, ON",
        "Calgary, AB",
        "Alberta",
    ]
    assert [c["id"] for c in job["categories"]] == [30, 1]
    reordered = api.put(
        f"{JOBS}/{job['id']}", json={"locations": locations[::-1]}, key=employer.key
    ).json
    assert [loc["description"] for loc in reordered["locations"]] == [
        "Alberta",
        "Calgary, AB",
        "Ottawa, ON",
    ]


def test_a_null_salary_removes_it(api: Any, employer: Any) -> None:
    """C4: salary is optional; null removes it."""
    job = create_job(api, employer, salary={"amount": 50000, "period": {"id": 1}})
    updated = api.put(f"{JOBS}/{job['id']}", json={"salary": None}, key=employer.key)
    assert updated.status_code == 200 and updated.json["salary"] is None


def test_a_salary_sent_on_put_replaces_the_stored_one(api: Any, employer: Any) -> None:
    job = create_job(
        api,
        employer,
        salary={"amount": 50000, "maxAmount": 60000, "period": {"id": 1}, "plusCommission": True},
    )
    body = {"salary": {"amount": 25, "period": {"id": 5}}}
    salary = api.put(f"{JOBS}/{job['id']}", json=body, key=employer.key).json["salary"]
    assert salary == {
        "amount": 25,
        "maxAmount": None,
        "plusCommission": False,
        "period": {"id": 5, "name": "Hourly", "unit": "hour"},
    }


def test_a_reference_id_can_be_removed_with_null_on_put(api: Any, employer: Any) -> None:
    job = create_job(api, employer, referenceId="R-9")
    updated = api.put(f"{JOBS}/{job['id']}", json={"referenceId": None}, key=employer.key)
    assert updated.json["referenceId"] is None
    assert create_job(api, employer, referenceId="R-9")["referenceId"] == "R-9"


def test_a_gazetteer_place_absent_from_the_list_is_accepted_and_joins_the_list(
    api: Any, employer: Any
) -> None:
    """Interface/C3: a valid Canadian location absent from the locations list is accepted."""
    listed = api.get("/api/v1.1/locations", params={"q": "Vanderhoof"}).json
    assert listed["data"] == []
    job = create_job(api, employer, locations=[{"description": "vanderhoof, bc"}])
    place = job["locations"][0]
    assert place["description"] == "Vanderhoof, BC" and place["type"] == "City"
    assert api.get(f"/api/v1.1/locations/{place['id']}").json == place
