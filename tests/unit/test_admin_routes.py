"""Tests for toolslim.proxy.admin's route table: it registers a page for each of
routing.ADMIN_ROUTES, the names no upstream may take."""

from __future__ import annotations

from aiohttp import web

from toolslim.proxy.admin import add_routes
from toolslim.wire.routing import ADMIN_ROUTES


def test_every_admin_route_is_answered_by_the_proxy_itself() -> None:
    app = web.Application()
    add_routes(app)
    registered = {resource.canonical for resource in app.router.resources()}
    assert {f"/{name}" for name in ADMIN_ROUTES} <= registered
    assert {"/dashboard/", "/dashboard/{name}"} <= registered
