"""Alert subscriptions (C19): the stored search, the double opt-in, the manage link's
changes and one-click unsubscribe, on both databases."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime, timedelta
from urllib.parse import urlencode

import pytest
from sqlalchemy import func, select
from sqlalchemy.orm import Session

from models.alerts import filters as alert_filters
from models.alerts import subscriptions as alerts
from models.core.errors import ValidationFailed
from models.db.entities import AlertSubscription, AlertToken
from models.jobs.feeds import Filters
from tests.factories import EVERY_FILTER, EVERY_FILTER_QUERY

NOW = datetime(2026, 12, 2, 15, 0, tzinfo=UTC)


def test_a_search_is_stored_as_the_search_pages_address_writes_it() -> None:
    """One stored form: the query names in the search page's order (C17), as its links."""
    search = Filters(province="QC", q="line cook", category=12)
    text = alert_filters.to_query(search)
    assert text == "q=line+cook&category=12&province=QC"  # whatever the order given
    assert text == urlencode(search.to_query())
    assert alert_filters.from_query(text) == search
    assert alert_filters.to_query(Filters()) == ""
    assert alert_filters.from_query("") == Filters()


def test_every_filter_reads_back_the_same() -> None:
    assert alert_filters.to_query(EVERY_FILTER) == EVERY_FILTER_QUERY
    assert alert_filters.from_query(EVERY_FILTER_QUERY) == EVERY_FILTER
    spaced = dataclasses.replace(EVERY_FILTER, q="café & co")
    assert alert_filters.from_query(alert_filters.to_query(spaced)) == spaced


def test_a_name_the_filters_no_longer_have_is_ignored_and_a_bad_value_dropped() -> None:
    """An alert grows broader, never broken, when the search page's filters change."""
    assert alert_filters.from_query("q=cook&gone=1") == Filters(q="cook")
    assert alert_filters.from_query("q=cook&min_pay=5") == Filters(q="cook")  # the old name
    assert alert_filters.from_query("q=cook&category=99&days=0&province=on") == Filters(q="cook")


def test_sign_up_is_pending_until_its_link_is_followed_then_confirmed_once(
    session: Session,
) -> None:
    made = alerts.sign_up(session, "ada@example.com", "weekly", "fr", Filters(q="cook"), now=NOW)
    alert = made.subscription
    assert (alert.state, alert.frequency, alert.language) == ("pending", "weekly", "fr")
    assert alert.filters == "q=cook" and alert.last_sent_at is None
    stored = session.scalars(select(AlertToken.digest)).all()
    assert made.confirm_token not in stored  # only its digest is kept
    assert stored == [alerts.digest(made.confirm_token)]
    later = NOW + timedelta(hours=1)
    confirmed = alerts.confirm(session, made.confirm_token, now=later)
    assert confirmed is not None and confirmed.subscription.id == alert.id
    assert alert.state == "confirmed" and alert.last_sent_at == later  # digests start now
    assert alerts.confirm(session, made.confirm_token, now=later) is None  # spent
    assert alerts.managed(session, confirmed.manage_token) is alert


def test_a_confirmation_link_expires_and_an_unknown_one_confirms_nothing(
    session: Session,
) -> None:
    made = alerts.sign_up(session, "ada@example.com", "daily", "en", Filters(), now=NOW)
    late = NOW + timedelta(days=alerts.CONFIRM_DAYS, seconds=1)
    assert alerts.confirm(session, made.confirm_token, now=late) is None
    assert alerts.confirm(session, "nope", now=NOW) is None
    assert alerts.confirm(session, "", now=NOW) is None
    assert made.subscription.state == "pending"


def test_signing_up_again_to_the_same_search_is_the_same_alert(session: Session) -> None:
    first = alerts.sign_up(session, "ada@example.com", "daily", "en", Filters(q="cook"), now=NOW)
    again = alerts.sign_up(session, "ADA@example.com", "weekly", "fr", Filters(q="cook"), now=NOW)
    other = alerts.sign_up(session, "ada@example.com", "daily", "en", Filters(q="chef"), now=NOW)
    assert again.subscription.id == first.subscription.id != other.subscription.id
    assert first.subscription.frequency == "daily"  # changed on the manage page only
    assert alerts.confirm(session, first.confirm_token, now=NOW) is not None  # both links work
    count = session.scalar(select(func.count()).select_from(AlertSubscription))
    assert count == 2


def test_an_address_holds_a_bounded_number_of_alerts(session: Session) -> None:
    for n in range(alerts.PER_ADDRESS):
        alerts.sign_up(session, "ada@example.com", "daily", "en", Filters(q=f"j{n}"), now=NOW)
    with pytest.raises(ValidationFailed) as caught:
        alerts.sign_up(session, "ada@example.com", "daily", "en", Filters(q="more"), now=NOW)
    assert [(e.field, e.code) for e in caught.value.errors] == [("email", "too_many")]


def test_the_manage_link_changes_the_frequency_and_unsubscribes_in_one_step(
    session: Session,
) -> None:
    made = alerts.sign_up(session, "ada@example.com", "daily", "en", Filters(), now=NOW)
    confirmed = alerts.confirm(session, made.confirm_token, now=NOW)
    assert confirmed is not None
    token = confirmed.manage_token
    assert alerts.set_frequency(session, token, "weekly", now=NOW) is made.subscription
    assert made.subscription.frequency == "weekly"
    with pytest.raises(ValidationFailed):
        alerts.set_frequency(session, token, "hourly", now=NOW)
    second = alerts.manage_token(session, made.subscription, now=NOW)  # another email's link
    assert alerts.unsubscribe(session, second, now=NOW) is made.subscription
    assert made.subscription.state == "unsubscribed" and made.subscription.unsubscribed_at == NOW
    assert alerts.unsubscribe(session, token, now=NOW) is made.subscription  # again: no-op
    assert alerts.unsubscribe(session, "unknown", now=NOW) is None
    # Unsubscribed, a confirmation link sent before brings nothing back.
    assert alerts.confirm(session, made.confirm_token, now=NOW) is None


def test_the_sign_up_reads_every_broken_rule() -> None:
    with pytest.raises(ValidationFailed) as caught:
        alerts.read_sign_up({"email": "not-an-address", "frequency": "hourly"})
    codes = [(e.field, e.code) for e in caught.value.errors]
    assert codes == [("email", "invalid_format"), ("frequency", "out_of_range")]
    with pytest.raises(ValidationFailed) as missing:
        alerts.read_sign_up({})
    assert [(e.field, e.code) for e in missing.value.errors] == [("email", "required")]
    assert alerts.read_sign_up({"email": " ada@example.com "}) == ("ada@example.com", "daily")


def test_erasure_deletes_the_address_alerts_and_their_tokens(session: Session) -> None:
    alerts.sign_up(session, "ada@example.com", "daily", "en", Filters(q="a"), now=NOW)
    alerts.sign_up(session, "Ada@Example.com", "daily", "en", Filters(q="b"), now=NOW)
    kept = alerts.sign_up(session, "grace@example.com", "daily", "en", Filters(), now=NOW)
    assert [a.filters for a in alerts.of_address(session, "ADA@example.com")] == ["q=a", "q=b"]
    assert alerts.erase_address(session, "ada@EXAMPLE.com") == 2
    session.expire_all()
    assert list(session.scalars(select(AlertSubscription.id))) == [kept.subscription.id]
    assert list(session.scalars(select(AlertToken.subscription_id))) == [kept.subscription.id]
