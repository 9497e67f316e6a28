"""The naive baseline for proxy_bench.py: a minimal aiohttp pass-through reverse proxy.

Reads the whole request body, forwards it unchanged with one shared ClientSession (keep-alive
pool), and streams the upstream response back chunk by chunk with a StreamResponse (so SSE is
not buffered). No body parsing, no rewriting, no log line, no limits: what any aiohttp proxy
costs, which `toolslim serve --pipeline ''` is measured against (issue 23).

Run: `python bench/naive_proxy.py --port 18100 --upstream http://127.0.0.1:18080`.
"""

from __future__ import annotations

import argparse
from collections.abc import AsyncIterator

from aiohttp import ClientSession, ClientTimeout, TCPConnector, web

HOP = frozenset(
    {
        "connection",
        "content-length",
        "host",
        "keep-alive",
        "proxy-authenticate",
        "proxy-authorization",
        "te",
        "trailer",
        "trailers",
        "transfer-encoding",
        "upgrade",
    }
)
SESSION = web.AppKey("session", ClientSession)


def make_app(upstream: str) -> web.Application:
    upstream = upstream.rstrip("/")

    async def session(app: web.Application) -> AsyncIterator[None]:
        app[SESSION] = ClientSession(
            connector=TCPConnector(limit=0, ttl_dns_cache=None),
            timeout=ClientTimeout(total=None, sock_connect=10, sock_read=600),
            auto_decompress=False,
            skip_auto_headers=("User-Agent", "Accept-Encoding"),
        )
        yield
        await app[SESSION].close()

    async def handle(request: web.Request) -> web.StreamResponse:
        body = await request.read()
        headers = [(k, v) for k, v in request.headers.items() if k.lower() not in HOP]
        async with request.app[SESSION].request(
            request.method,
            upstream + request.path_qs,
            data=body,
            headers=headers,
            allow_redirects=False,
        ) as up:
            response = web.StreamResponse(status=up.status, reason=up.reason)
            for k, v in up.headers.items():
                if k.lower() not in HOP:
                    response.headers.add(k, v)
            if up.content_length is not None:
                response.content_length = up.content_length
            await response.prepare(request)
            async for chunk in up.content.iter_any():
                await response.write(chunk)
            await response.write_eof()
            return response

    app = web.Application(client_max_size=1 << 30)
    app.router.add_route("*", "/{tail:.*}", handle)
    app.cleanup_ctx.append(session)
    return app


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=18100)
    parser.add_argument("--upstream", default="http://127.0.0.1:18080")
    args = parser.parse_args()
    web.run_app(
        make_app(args.upstream),
        host=args.host,
        port=args.port,
        access_log=None,
        print=None,
        backlog=4096,
    )


if __name__ == "__main__":
    main()
