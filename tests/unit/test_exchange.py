"""exchange: what a model call is (only those owe a usage)."""

from __future__ import annotations

import pytest

from proxy_harness import settings_for
from toolslim.observe.exchange import Exchange, Transport, is_model_call
from toolslim.wire.routing import route_request

# --- what a model call is: only those owe a usage -------------------------------------------


@pytest.mark.parametrize(
    ("method", "target", "transport", "asks_a_model"),
    [
        ("POST", "/v1/messages?beta=true", "http", True),
        ("POST", "/anthropic/v1/messages", "http", True),
        ("POST", "/v1/chat/completions", "http", True),
        ("POST", "/v1beta/openai/chat/completions", "http", True),
        ("POST", "/v1/responses", "http", True),
        ("WS", "/v1/responses", "websocket", True),
        ("POST", "/v1beta/models/gemini-2.5-pro:generateContent", "http", True),
        ("POST", "/v1beta/models/gemini-2.5-pro:streamGenerateContent?alt=sse", "http", True),
        ("HEAD", "/", "http", False),
        ("GET", "/", "http", False),
        ("HEAD", "/v1/messages", "http", False),
        ("GET", "/v1/models", "http", False),
        ("GET", "/v1beta/models", "http", False),
        ("GET", "/v1/responses/resp_123", "http", False),
        ("POST", "/v1/messages/count_tokens", "http", False),
        ("POST", "/v1/messages/batches", "http", False),
        ("POST", "/v1beta/models/gemini-2.5-pro:countTokens", "http", False),
        ("POST", "/v1/embeddings", "http", False),
    ],
)
def test_a_model_call_is_a_post_to_an_api_s_generation_path_or_a_response_create(
    method: str, target: str, transport: Transport, asks_a_model: bool
) -> None:
    route = route_request(target, {}, settings_for("http://127.0.0.1:9"))
    exchange = Exchange(route, method, target.partition("?")[0], 0.0, transport)
    assert is_model_call(exchange) is asks_a_model
