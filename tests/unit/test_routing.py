"""routing: the requests refused before routing, since they cannot be forwarded faithfully."""

from __future__ import annotations

import pytest

from toolslim.wire.routing import inexact_header, refusal

# --- requests that cannot be forwarded faithfully -------------------------------------------


@pytest.mark.parametrize(
    "target",
    [
        "/gemini/../_ctl/stats",
        "/v1/./messages",
        "/v1/messages/..",
        "/v1/%2e%2E/messages",
        "/v1/.%2e/x",
        "/%2e",
        "/v1/..;/admin",
        "/v1\\..\\admin",
        "/v1%2f..%2fadmin",
        "/v1%5C..%5Cadmin?x=1",
    ],
)
def test_a_path_with_a_dot_segment_raw_or_percent_encoded_is_refused(target: str) -> None:
    reason = refusal(target, [])
    assert reason is not None and ". or .. segments" in reason


@pytest.mark.parametrize(
    "target",
    ["/v1/messages", "/v1/files/a.b", "/v1/...", "/v1/.well-known", "/v1/x..y", "/v1?p=/../"],
)
def test_dots_inside_a_segment_or_in_the_query_are_not_dot_segments(target: str) -> None:
    assert refusal(target, []) is None


def test_a_header_whose_bytes_are_not_utf8_is_refused_naming_the_header_not_its_value() -> None:
    # The server decodes header bytes with surrogateescape: b"sk-\xff\xfekey" arrives so.
    value = b"sk-\xff\xfekey".decode("utf-8", "surrogateescape")
    reason = refusal("/v1/messages", [("Accept", "*/*"), ("x-api-key", value)])
    assert reason is not None
    assert "x-api-key" in reason and "sk-" not in reason
    assert inexact_header([("x-api-key", value)]) == "x-api-key"


def test_obs_text_that_is_utf8_is_forwardable() -> None:
    assert inexact_header([("x-title", "ünïcödé ✓"), ("x-api-key", "sk-plain")]) is None
