"""Many rows as one JSON parameter (PostgreSQL): how a sync run's batch writes its rows.

A batch's rows went as one array parameter a column (`unnest`), which psycopg writes by
escaping each element in Python: a third of a batch's CPU in a profile of 5,000 creates.
As one JSON text (orjson, in C) the database reads them back with each column's own type
(`json_populate_recordset`), in the same single statement.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import UTC, date, datetime
from decimal import Decimal
from typing import Any

import orjson
from sqlalchemy import JSON, Table, Text, bindparam, func, literal_column
from sqlalchemy import cast as sql_cast

PARAMETER = "rows"  # the statement's one parameter: `text(rows)`


def rows_of(table: Table) -> Any:
    """The rows of parameter `rows`, each of `table`'s row type: columns by their names."""
    given = sql_cast(bindparam(PARAMETER, type_=Text), JSON)
    row_type: Any = literal_column(f"NULL::{table.name}")
    return func.json_populate_recordset(row_type, given).table_valued(
        *(column.name for column in table.columns)
    )


def _plain(value: Any) -> Any:
    if isinstance(value, Decimal):
        return str(value)  # read back exactly by numeric's own input
    if isinstance(value, datetime):  # stored as UTC without an offset (UTCDateTime)
        return value.astimezone(UTC).replace(tzinfo=None).isoformat()
    if isinstance(value, date):
        return value.isoformat()
    raise TypeError(f"{type(value).__name__} is not a column value")


def text(rows: Iterable[Mapping[str, Any]]) -> str:
    """The rows as the parameter's JSON text."""
    return orjson.dumps(list(rows), default=_plain, option=orjson.OPT_PASSTHROUGH_DATETIME).decode()
