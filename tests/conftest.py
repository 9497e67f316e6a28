"""Fixtures of the shell's end-to-end tests: the fake upstream, the proxy before it, a client;
and the layer markers: a test is `unit`, `proxy` or `system` by the folder it stands in."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from aiohttp.test_utils import TestServer

from proxy_harness import TIMEOUT, FakeUpstream, Proxy, settings_for
from toolslim.proxy.app import make_app

HERE = Path(__file__).resolve().parent
LAYERS = ("unit", "proxy", "system")


def pytest_ignore_collect(collection_path: Path, config: pytest.Config) -> bool | None:
    """`-m unit` alone, the fast loop, does not import the other layers' test modules."""
    if config.getoption("markexpr") != "unit" or not collection_path.is_relative_to(HERE):
        return None
    parts = collection_path.relative_to(HERE).parts
    return True if parts and parts[0] in LAYERS and parts[0] != "unit" else None


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        layer = item.path.relative_to(HERE).parts[0]
        if layer in LAYERS:
            item.add_marker(getattr(pytest.mark, layer))


@pytest.fixture(autouse=True, scope="session")
def _state_home(tmp_path_factory: pytest.TempPathFactory) -> None:
    """`toolslim serve` keeps its tool ledger under $XDG_STATE_HOME by default: the programs
    the tests start keep theirs in a temporary folder, never in the user's home."""
    os.environ["XDG_STATE_HOME"] = str(tmp_path_factory.mktemp("state-home"))


@pytest.fixture
async def upstream(aiohttp_server: Any) -> FakeUpstream:
    fake = FakeUpstream()
    fake.server = await aiohttp_server(fake.app())
    return fake


@pytest.fixture
def proxy(aiohttp_server: Any, upstream: FakeUpstream) -> Proxy:
    async def start(base: str | None = None, **changes: Any) -> TestServer:
        app = make_app(settings_for(base or upstream.url, **changes))
        server: TestServer = await aiohttp_server(app)
        return server

    return start


@pytest.fixture
async def client() -> AsyncIterator[aiohttp.ClientSession]:
    async with aiohttp.ClientSession(timeout=TIMEOUT, auto_decompress=False) as session:
        yield session
