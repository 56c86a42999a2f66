"""alert_subscriptions.filters in the search page's form (C17, C19)

An alert's search was stored by the `Filters` dataclass's field names, sorted
(`category=12&min_pay=50000&q=cook`); it is now stored as the search page's address writes it,
the query names in their fixed order (`q=cook&category=12&minPay=50000`), so one form is
written and read everywhere. Each row is rewritten; the downgrade writes the old form back.
The names are spelled out here as they were when this ran: a migration must not follow the
code's later changes.

Revision ID: 0024
Revises: 0023
Create Date: 2026-12-03 08:10:00
"""

from collections.abc import Callable, Sequence
from urllib.parse import parse_qsl, urlencode

import sqlalchemy as sa
from alembic import op

revision: str = "0024"
down_revision: str | None = "0023"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# Each filter's old name (the dataclass field) and its query name, in the search page's order.
NAMES = (
    ("q", "q"),
    ("category", "category"),
    ("province", "province"),
    ("place", "place"),
    ("position_type", "positionType"),
    ("workplace_type", "workplaceType"),
    ("min_pay", "minPay"),
    ("days", "days"),
)
_alerts = sa.table(
    "alert_subscriptions", sa.column("id", sa.Integer), sa.column("filters", sa.Text)
)


def _new(text: str) -> str:
    values = dict(parse_qsl(text))
    return urlencode([(new, values[old]) for old, new in NAMES if values.get(old)])


def _old(text: str) -> str:
    values = dict(parse_qsl(text))
    return urlencode(sorted((old, values[new]) for old, new in NAMES if values.get(new)))


def _rewrite(form: Callable[[str], str]) -> None:
    connection = op.get_bind()
    rows = connection.execute(sa.select(_alerts.c.id, _alerts.c.filters)).all()
    for alert_id, text in rows:
        written = form(text)
        if written != text:
            connection.execute(
                _alerts.update().where(_alerts.c.id == alert_id).values(filters=written)
            )


def upgrade() -> None:
    _rewrite(_new)


def downgrade() -> None:
    _rewrite(_old)
