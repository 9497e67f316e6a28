"""The admin endpoints: /healthz, /readyz, /stats, /metrics and the static dashboard, with the
bearer check that guards the two that hold data. None of them is a proxied request."""

from __future__ import annotations

import hmac
import re
from collections.abc import Awaitable, Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

import orjson
from aiohttp import web

from toolslim.observe import fleet, metrics
from toolslim.observe.stats import Stats
from toolslim.wire.errors import unauthorized_body
from toolslim.wire.routing import ADMIN_ROUTES

DASHBOARD: Final = Path(__file__).resolve().parent.parent / "observe" / "dashboard"
_FILE_NAME: Final = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*")
_CSP: Final = (
    "default-src 'self'; img-src 'self' data:; style-src 'self' 'unsafe-inline'; "
    "script-src 'self'; connect-src 'self'; frame-ancestors 'none'; base-uri 'none'"
)


Host = Callable[[], dict[str, Any]]  # the host's /stats: every worker's counters, merged


@dataclass(slots=True)
class Admin:
    """What the admin endpoints read: the counters, their registry, the token, readiness, and
    with several workers the host's merged view (None: this process serves alone)."""

    stats: Stats
    registry: metrics.Registry
    admin_token: str | None
    ready: bool = True  # /readyz turns 503 once shutdown starts
    extra: dict[str, Any] = field(default_factory=dict)
    host: Host | None = None

    def snapshot(self) -> dict[str, Any]:
        """What /stats answers: the host's totals, with `workers`."""
        return fleet.alone(self.stats) if self.host is None else self.host()


ADMIN: Final = web.AppKey("admin", Admin)


class HostCollector(metrics.StatsCollector):
    """/metrics of the host: every family from one merged snapshot per scrape, the same
    rendering as one process's (`metrics.families`)."""

    def __init__(self, stats: Stats, host: Callable[[], Mapping[str, Any]]) -> None:
        super().__init__(stats)
        self.host = host

    def collect(self) -> Iterator[Any]:  # Any: metrics.Metric, which metrics does not export
        return iter(metrics.families(self.host()))


def host_registry(stats: Stats, host: Callable[[], Mapping[str, Any]]) -> metrics.Registry:
    """A fresh registry whose one collector renders `host()`: /metrics of several workers."""
    registry = metrics.Registry(auto_describe=False)
    registry.register(HostCollector(stats, host))
    return registry


Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def add_routes(app: web.Application) -> None:
    """A GET (and HEAD) handler for each of `routing.ADMIN_ROUTES`, a name without one failing
    at start-up, and the dashboard's files below it."""
    handlers: dict[str, Handler] = {
        "dashboard": dashboard,
        "healthz": healthz,
        "metrics": metrics_page,
        "readyz": readyz,
        "stats": stats,
    }
    for name in ADMIN_ROUTES:
        app.router.add_get(f"/{name}", handlers[name])
    app.router.add_get("/dashboard/", dashboard)
    app.router.add_get("/dashboard/{name}", dashboard)


def authorized(request: web.Request) -> bool:
    token = request.app[ADMIN].admin_token
    if token is None:
        return True
    scheme, _, given = request.headers.get("Authorization", "").partition(" ")
    return scheme.lower() == "bearer" and hmac.compare_digest(
        given.strip().encode("utf-8", "surrogateescape"), token.encode()
    )


def _unauthorized() -> web.Response:
    return web.Response(
        status=401,
        body=unauthorized_body("this endpoint requires Authorization: Bearer <admin_token>"),
        content_type="application/json",
        headers={"WWW-Authenticate": 'Bearer realm="toolslim"'},
    )


def _json(obj: Any) -> str:
    return orjson.dumps(obj).decode()


async def healthz(request: web.Request) -> web.Response:
    return web.json_response({"status": "alive"}, dumps=_json)


async def readyz(request: web.Request) -> web.Response:
    if request.app[ADMIN].ready:
        return web.json_response({"status": "ready"}, dumps=_json)
    return web.json_response({"status": "shutting_down"}, status=503, dumps=_json)


async def stats(request: web.Request) -> web.Response:
    if not authorized(request):
        return _unauthorized()
    snapshot = request.app[ADMIN].snapshot()
    return web.json_response(snapshot, dumps=_json, headers={"Cache-Control": "no-store"})


async def metrics_page(request: web.Request) -> web.Response:
    if not authorized(request):
        return _unauthorized()
    body = metrics.exposition(request.app[ADMIN].registry)
    headers = {"Content-Type": metrics.CONTENT_TYPE, "Cache-Control": "no-store"}
    return web.Response(body=body, headers=headers)


async def dashboard(request: web.Request) -> web.StreamResponse:
    """The static dashboard: public (it holds no data; its script needs the token for /stats)."""
    name = request.match_info.get("name", "index.html")
    path = DASHBOARD / name
    if not _FILE_NAME.fullmatch(name) or not path.is_file():
        raise web.HTTPNotFound()
    headers = {
        "Cache-Control": "no-cache",
        "Content-Security-Policy": _CSP,
        "X-Content-Type-Options": "nosniff",
    }
    return web.FileResponse(path, headers=headers)
