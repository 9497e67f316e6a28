"""admin: health, readiness and the bearer token on the endpoints that hold data."""

from __future__ import annotations

import aiohttp

from proxy_harness import (
    TOKEN,
    FakeUpstream,
    Proxy,
    raw_url,
)


async def test_admin_token_guards_stats_and_metrics_but_not_the_api_or_the_dashboard_files(
    upstream: FakeUpstream, proxy: Proxy, client: aiohttp.ClientSession
) -> None:
    server = await proxy(admin_token=TOKEN)
    for path in ("/stats", "/metrics"):
        for headers in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": TOKEN}):
            async with client.get(server.make_url(path), headers=headers) as response:
                assert response.status == 401, (path, headers)
                assert response.headers["WWW-Authenticate"].startswith("Bearer")
        good = {"Authorization": f"Bearer {TOKEN}"}
        async with client.get(server.make_url(path), headers=good) as response:
            assert response.status == 200
    for path in ("/dashboard", "/dashboard/app.js", "/dashboard/style.css"):
        async with client.get(server.make_url(path)) as response:
            assert response.status == 200, path
            assert "default-src 'self'" in response.headers["Content-Security-Policy"]
            assert TOKEN.encode() not in await response.read()
    for path in ("/dashboard/nope.js", "/dashboard/.hidden", "/dashboard/%2e%2e%2fapp.py"):
        async with client.get(raw_url(server, path)) as response:
            assert response.status == 404, path
    async with client.get(raw_url(server, "/dashboard/../app.py")) as response:
        assert b"make_app" not in await response.read()
    headers = {"Authorization": "Bearer sk-client-own-key"}
    async with client.post(server.make_url("/v1/messages"), data=b"{}", headers=headers) as r:
        assert r.status == 200
    assert upstream.received[-1].headers["Authorization"] == "Bearer sk-client-own-key"


async def test_healthz_and_readyz_and_readyz_turns_503_on_shutdown(
    proxy: Proxy, client: aiohttp.ClientSession
) -> None:
    server = await proxy()
    async with client.get(server.make_url("/healthz")) as response:
        assert (response.status, await response.json()) == (200, {"status": "alive"})
    async with client.get(server.make_url("/readyz")) as response:
        assert response.status == 200
    assert server.app is not None
    await server.app.shutdown()
    async with client.get(server.make_url("/readyz")) as response:
        assert response.status == 503
    async with client.get(server.make_url("/healthz")) as response:
        assert response.status == 200
