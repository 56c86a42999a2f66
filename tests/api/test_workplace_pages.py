"""C16 on the job page, on both databases: the JSON-LD properties of Google's JobPosting guide
checked against the job for onSite, remote, hybrid and confidential jobs, and the page's words
in English and French."""

from __future__ import annotations

import json
import re
from typing import Any

from api.app import WsgiApp
from tests.conftest import Account, Api, CheckedClient
from tests.factories import create_job

REMOTE = {"workplaceType": "remote"}


def json_ld(app: WsgiApp, job_id: int, query: str = "") -> tuple[dict[str, Any], str]:
    page = CheckedClient(app).simulate_get(f"/jobs/{job_id}{query}")
    assert page.status_code == 200, page.text
    (script,) = re.findall(r'<script type="application/ld\+json">(.*?)</script>', page.text, re.S)
    data: dict[str, Any] = json.loads(script)
    return data, page.text


def test_json_ld_of_an_on_site_job_has_every_property_the_service_knows(
    app: WsgiApp, api: Api, employer: Account
) -> None:
    salary = {"amount": 25.5, "period": {"id": 5}}
    job = create_job(api, employer, status="active", positionType={"id": 2}, salary=salary)
    data, _page = json_ld(app, job["id"])
    assert data["identifier"] == {
        "@type": "PropertyValue",
        "name": "jobpost",
        "value": str(job["id"]),
    }
    assert data["validThrough"] == f"{job['closeDate']}T23:59:59-04:00"
    assert data["employmentType"] == "PART_TIME"
    assert data["baseSalary"] == {
        "@type": "MonetaryAmount",
        "currency": "CAD",
        "value": {"@type": "QuantitativeValue", "value": 25.5, "unitText": "HOUR"},
    }
    assert data["directApply"] is True
    assert data["hiringOrganization"] == {"@type": "Organization", "name": employer.name}
    assert data["jobLocation"][0]["address"]["addressLocality"] == "Toronto"
    assert "jobLocationType" not in data and "applicantLocationRequirements" not in data


def test_json_ld_of_a_remote_job_says_telecommute_and_where_applicants_live(
    app: WsgiApp, api: Api, employer: Account
) -> None:
    everywhere = create_job(api, employer, status="active", **REMOTE)
    data, _page = json_ld(app, everywhere["id"])
    assert data["jobLocationType"] == "TELECOMMUTE"
    assert data["applicantLocationRequirements"] == [{"@type": "Country", "name": "CA"}]
    assert data["jobLocation"][0]["address"]["addressRegion"] == "ON"  # still named (v1.1)
    two = create_job(api, employer, status="active", **REMOTE, applicantLocations=["ON", "QC"])
    data, _page = json_ld(app, two["id"])
    assert data["applicantLocationRequirements"] == [
        {"@type": "AdministrativeArea", "name": "Ontario"},
        {"@type": "AdministrativeArea", "name": "Quebec"},
    ]
    hybrid = create_job(api, employer, status="active", workplaceType="hybrid")
    data, _page = json_ld(app, hybrid["id"])
    assert "jobLocationType" not in data  # Google's TELECOMMUTE is for fully remote jobs


def test_json_ld_of_a_confidential_job_names_no_employer(
    app: WsgiApp, api: Api, employer: Account
) -> None:
    job = create_job(
        api,
        employer,
        status="active",
        confidential=True,
        applicantRoutingType={"id": 2},
        applicationUrl="https://careers.maple.test/1",
    )
    data, _page = json_ld(app, job["id"])
    assert "hiringOrganization" not in data and employer.name not in json.dumps(data)
    assert data["identifier"]["value"] == str(job["id"])
    assert data["directApply"] is False


def test_the_page_says_where_the_job_is_done_in_english_and_french(
    app: WsgiApp, api: Api, employer: Account
) -> None:
    job = create_job(api, employer, status="active", **REMOTE, applicantLocations=["ON", "QC"])
    _data, english = json_ld(app, job["id"])
    assert "<dt>Workplace</dt><dd>Remote</dd>" in english
    assert "<dt>Applicants from</dt><dd>Ontario; Quebec</dd>" in english
    _data, french = json_ld(app, job["id"], "?lang=fr")
    assert "<dt>Mode de travail</dt><dd>Télétravail</dd>" in french
    assert "<dt>Provenance des candidatures</dt><dd>Ontario\u202f; Québec</dd>" in french
    on_site = create_job(api, employer, status="active")
    _data, page = json_ld(app, on_site["id"], "?lang=fr")
    assert "<dd>Sur place</dd>" in page and "Provenance" not in page
