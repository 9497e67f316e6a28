"""Tests for toolslim.wire.apis: each API's paths in one table, read by routing, by the ledger's
model-call test and by the names an upstream may not take."""

from __future__ import annotations

import pytest

from toolslim.config.settings import (
    DEFAULT_UPSTREAMS,
    RESERVED_NAMES,
    ConfigError,
    Settings,
    load_settings,
)
from toolslim.wire.apis import APIS, MODEL_CALLS, VERSIONS, api_of
from toolslim.wire.routing import ADMIN_ROUTES, route_request


@pytest.mark.parametrize("api", [api for api, paths in APIS.items() if paths.names])
def test_the_path_that_names_an_api_routes_to_it_and_its_upstream(api: str) -> None:
    path = APIS[api].names  # type: ignore[index]
    assert api_of(path) == api
    route = route_request(path, {}, Settings())
    assert (route.api, route.upstream.name) == (api, APIS[api].upstream)  # type: ignore[index]


def test_a_path_only_starting_like_an_exact_one_names_no_api() -> None:
    exact = [paths.names for paths in APIS.values() if paths.exact]
    assert exact
    assert all(api_of(path + "/more") == "other" for path in exact)


@pytest.mark.parametrize(("first", "upstream"), [(k, v) for k, v in VERSIONS.items() if v])
def test_a_first_segment_that_implies_an_upstream_routes_there(first: str, upstream: str) -> None:
    assert route_request(f"/{first}/models", {}, Settings()).upstream.name == upstream


def test_every_api_but_other_says_how_its_model_calls_end() -> None:
    assert set(MODEL_CALLS) == set(APIS)
    assert all(MODEL_CALLS[api] for api in MODEL_CALLS)


def test_the_reserved_upstream_names_are_the_admin_routes_and_the_first_segments() -> None:
    assert sorted(RESERVED_NAMES) == [
        "dashboard",
        "healthz",
        "metrics",
        "readyz",
        "stats",
        "v1",
        "v1alpha",
        "v1beta",
    ]
    assert set(ADMIN_ROUTES) | set(VERSIONS) == RESERVED_NAMES


@pytest.mark.parametrize("name", sorted(set(ADMIN_ROUTES) | set(VERSIONS)))
def test_an_upstream_named_like_a_route_of_the_proxy_is_refused_at_start_up(name: str) -> None:
    with pytest.raises(ConfigError, match=f"upstream name '{name}'"):
        load_settings(None, {"upstreams": {name: "http://127.0.0.1:9"}}, {})


def test_every_upstream_a_path_implies_is_configured_by_default() -> None:
    implied = {paths.upstream for paths in APIS.values()} | {u for u in VERSIONS.values() if u}
    assert implied <= set(DEFAULT_UPSTREAMS)
