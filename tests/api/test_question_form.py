"""C21 on the public form: the job's screening questions asked accessibly in English and
French (a fieldset named by its legend for each group of choices, labels, required
attributes, errors tied to their inputs), their answers sent as `answers.{id}` parts."""

from __future__ import annotations

import re
from typing import Any

from api.app import WsgiApp
from tests.api.test_pages import APPLICANT, BOUNDARY, active_job, assert_html, pages, stored
from tests.api.test_questions import QUESTIONS


def multipart(fields: list[tuple[str, str]]) -> dict[str, Any]:
    """A multipart/form-data body with repeatable names (a group of checkboxes)."""
    out = b""
    for name, value in fields:
        head = f'--{BOUNDARY}\r\nContent-Disposition: form-data; name="{name}"\r\n\r\n'
        out += head.encode() + value.encode() + b"\r\n"
    out += f"--{BOUNDARY}--\r\n".encode()
    return {"body": out, "headers": {"Content-Type": f"multipart/form-data; boundary={BOUNDARY}"}}


def tag(page: str, element_id: str) -> str:
    """The opening tag of the input, textarea or fieldset with this id."""
    found = re.search(rf'<(?:input|textarea|fieldset)\b[^>]*\bid="{element_id}"[^>]*>', page)
    assert found, element_id
    return found.group(0)


def test_the_form_asks_each_question_with_its_label_or_legend(
    app: WsgiApp, api: Any, employer: Any
) -> None:
    job = active_job(api, employer, questions=QUESTIONS)
    page = assert_html(pages(app).simulate_get(f"/jobs/{job['id']}"), 200)
    legend = r'<fieldset class="question" id="q-workAuth">\s*<legend>Are you legally entitled'
    assert re.search(legend, page)
    assert re.search(r'<fieldset class="question" id="q-shift">\s*<legend>Which shift', page)
    assert re.search(r'<legend>Which ovens have you used\? <span class="optional">', page)
    for i, (value, words) in enumerate([("true", "Yes"), ("false", "No")], 1):
        radio = tag(page, f"q-workAuth-{i}")
        assert 'type="radio"' in radio and f'value="{value}"' in radio and "required" in radio
        assert f'for="q-workAuth-{i}"' in page and f"> {words}</label>" in page
    box = tag(page, "q-ovens-3")
    assert 'type="checkbox"' in box and 'name="answers.ovens"' in box and "required" not in box
    assert '<label for="q-why">Why bread? <span class="optional">' in page
    assert 'maxlength="20"' in tag(page, "q-why")
    number = tag(page, "q-years")
    assert 'type="number"' in number and 'min="0"' in number and 'max="60"' in number


def test_a_french_page_asks_the_questions_translated_where_they_are(
    app: WsgiApp, api: Any, employer: Any
) -> None:
    job = active_job(api, employer, questions=QUESTIONS)
    page = assert_html(pages(app).simulate_get(f"/jobs/{job['id']}?lang=fr"), 200)
    assert "<legend>Êtes-vous légalement autorisé à travailler au Canada?</legend>" in page
    assert "> Oui</label>" in page and "> Non</label>" in page
    assert "> Nuit</label>" in page and "> À bois</label>" in page
    assert "<legend>Which ovens have you used? <span" in page  # no translation: as written


def test_the_form_sends_the_answers_and_a_knock_out_is_stored_marked(
    app: WsgiApp, api: Any, employer: Any
) -> None:
    job = active_job(api, employer, questions=QUESTIONS)
    fields = [
        *APPLICANT.items(),
        ("answers.workAuth", "true"),
        ("answers.shift", "night"),
        ("answers.ovens", "wood"),
        ("answers.ovens", "deck"),
        ("answers.why", "Crust\r\nand crumb"),
        ("answers.years", "12"),
    ]
    result = pages(app).simulate_post(f"/jobs/{job['id']}/apply", **multipart(fields))
    assert result.status_code == 303, result.text
    [application] = stored(api, employer)
    assert [a["answer"] for a in application["answers"]] == [
        True,
        "night",
        ["deck", "wood"],
        "Crust\nand crumb",
        12,
    ]
    assert application["knockedOutBy"] == "shift"


def test_a_bad_answer_rerenders_the_form_with_its_message_tied_to_the_question(
    app: WsgiApp, api: Any, employer: Any
) -> None:
    job = active_job(api, employer, questions=QUESTIONS)
    fields = [*APPLICANT.items(), ("answers.ovens", "rack"), ("answers.years", "99")]
    result = pages(app).simulate_post(f"/jobs/{job['id']}/apply?lang=fr", **multipart(fields))
    page = assert_html(result, 422)
    assert "3 champs sont à corriger" in page
    for anchor, message in [
        ("q-workAuth", "Veuillez répondre à cette question."),
        ("q-shift", "Veuillez répondre à cette question."),
        ("q-years", "Veuillez saisir un nombre dans l’intervalle indiqué."),
    ]:
        assert re.search(rf'<p class="error" id="{anchor}-error">{re.escape(message)}', page)
    assert 'aria-describedby="q-workAuth-error"' in tag(page, "q-workAuth")
    first = tag(page, "q-workAuth-1")
    assert 'aria-invalid="true"' in first and 'aria-describedby="q-workAuth-error"' in first
    number = tag(page, "q-years")
    assert 'aria-invalid="true"' in number and 'value="99"' in number
    assert "checked" in tag(page, "q-ovens-2") and "checked" not in tag(page, "q-ovens-1")
    assert stored(api, employer) == []
