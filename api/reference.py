"""Reference lists (C3): no key, cacheable, shared by every employer."""

from __future__ import annotations

import falcon
from sqlalchemy import select

from api import query, representations
from api.responses import path_id, send_cacheable
from models.core.errors import FieldError, NotFound
from models.db.entities import Category, PositionType
from models.reference import places


class PositionTypes:
    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        rows = req.context.db.session.scalars(select(PositionType).order_by(PositionType.id))
        send_cacheable(req, resp, {"data": [representations.named(r) for r in rows]})


class Categories:
    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        rows = req.context.db.session.scalars(select(Category).order_by(Category.id))
        send_cacheable(req, resp, {"data": [representations.named(r) for r in rows]})


class Locations:
    def __init__(self, public_base_url: str) -> None:
        self.public_base_url = public_base_url

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        errors: list[FieldError] = []
        paging = query.paging(req, errors)
        q = query.term(req, "q", errors)
        if errors:
            raise query.invalid(errors)
        rows, total = places.search(
            req.context.db.session, q, limit=paging.page_size, offset=paging.offset
        )
        send_cacheable(
            req,
            resp,
            {
                "data": [representations.location(r) for r in rows],
                "paging": query.paging_object(req, self.public_base_url, paging, total, {"q": q}),
            },
        )


class LocationItem:
    def on_get(self, req: falcon.Request, resp: falcon.Response, location_id: str) -> None:
        loc = places.get_listed(req.context.db.session, path_id(location_id, "location"))
        if loc is None:
            raise NotFound(f"No location has id {location_id}.")
        send_cacheable(req, resp, representations.location(loc))
