"""PURE. The tool-call readers: the tool calls each API's answer makes, and Anthropic's cache
diagnostics, read from the same parsed JSON events the usage readers see (usage.UsageReader
calls these: one pass over an answer).

Stdlib only; never imports aiohttp or prometheus_client.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable, Iterator, Mapping
from typing import Any, Final

__all__ = ["CALL_KEYS", "FINDERS", "MAX_CALLS", "CacheMiss", "Call", "Found", "cache_miss_of"]

MAX_CALLS: Final = 256  # calls one answer is read for; the rest are not counted
Call = tuple[str, str | None]  # (name, Responses namespace or None) as the answer names them
CacheMiss = tuple[str, int]  # (Anthropic's cache_miss_reason type, cache_missed_input_tokens)
# One call found in an event: a key that names it within its answer (the same call seen again,
# as a stream repeats items in its final event, has the same key; None: always new) and it.
Found = tuple[Hashable, Call]

# Anthropic content blocks that call a tool: the client's tools, the provider's own (web
# search, code execution), and MCP connector tools (named with their server).
_ANTHROPIC_BLOCKS: Final = frozenset({"tool_use", "server_tool_use", "mcp_tool_use"})


def _dict(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, dict) else {}


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _anthropic_block(key: Hashable, block: Any) -> tuple[Found, ...]:
    block = _dict(block)
    name = block.get("name")
    if block.get("type") not in _ANTHROPIC_BLOCKS or not isinstance(name, str):
        return ()
    server = block.get("server_name")
    return ((key, (name, f"mcp__{server}" if isinstance(server, str) and server else None)),)


def _anthropic(obj: Mapping[str, Any]) -> Iterable[Found]:
    """`content_block_start` of a stream (keyed by its index), or a whole `message`'s content."""
    kind = obj.get("type")
    if kind == "content_block_start":
        return _anthropic_block(("block", obj.get("index")), obj.get("content_block"))
    if kind == "message":
        return [
            found
            for index, block in enumerate(_list(obj.get("content")))
            if isinstance(block, dict) and block.get("type") in _ANTHROPIC_BLOCKS  # calls only
            for found in _anthropic_block(("block", index), block)
        ]
    return ()


def _openai_chat(obj: Mapping[str, Any]) -> Iterator[Found]:
    """A completion's `message.tool_calls`, or a chunk's `delta.tool_calls`: a streamed call
    spreads over many chunks that share its `index`, the first of them naming it."""
    for position, choice in enumerate(_list(obj.get("choices"))):
        choice = _dict(choice)
        at = choice.get("index", position)
        streamed = "delta" in choice
        calls = _list(_dict(choice.get("delta" if streamed else "message")).get("tool_calls"))
        for order, call in enumerate(calls):
            call = _dict(call)
            name = _dict(call.get("function")).get("name")
            if isinstance(name, str) and name:
                index = call.get("index", order) if streamed else order
                yield ("choice", at, index if isinstance(index, int) else order), (name, None)


def _responses_item(key: Hashable, item: Any) -> Iterator[Found]:
    """An output item that calls a tool: `function_call` and `custom_tool_call` (the client's
    tools, with their namespace), `mcp_call` (named with its server label), and each
    built-in's `<type>_call` (named by the built-in's type, as the catalogue names it)."""
    item = _dict(item)
    kind = item.get("type")
    if not isinstance(kind, str) or not kind.endswith("_call"):
        return
    ident = item.get("id")
    key = ("item", ident) if isinstance(ident, str) and ident else key
    name = item.get("name")
    if kind in ("function_call", "custom_tool_call") and isinstance(name, str):
        namespace = item.get("namespace")
        yield key, (name, namespace if isinstance(namespace, str) and namespace else None)
    elif kind == "mcp_call" and isinstance(name, str):
        label = item.get("server_label")
        yield key, (name, f"mcp__{label}" if isinstance(label, str) and label else None)
    elif kind not in ("function_call", "custom_tool_call", "mcp_call"):
        yield key, (kind.removesuffix("_call"), None)


_OUTPUT_ITEM: Final = frozenset({"response.output_item.added", "response.output_item.done"})
_RESPONSE_EVENTS: Final = frozenset(
    {"response.completed", "response.done", "response.failed", "response.incomplete"}
)


def _openai_responses(obj: Mapping[str, Any]) -> Iterator[Found]:
    """An output item event (keyed by the item's id, else its output index), or the output of
    a whole response (a JSON body, or a stream's final event repeating its items)."""
    kind = obj.get("type")
    if kind in _OUTPUT_ITEM:
        yield from _responses_item(("index", obj.get("output_index")), obj.get("item"))
        return
    response = _dict(obj.get("response")) if kind in _RESPONSE_EVENTS else obj
    if response.get("object") != "response" and kind not in _RESPONSE_EVENTS:
        return
    for index, item in enumerate(_list(response.get("output"))):
        yield from _responses_item(("index", index), item)


def _gemini(obj: Mapping[str, Any]) -> Iterator[Found]:
    """`functionCall` parts; each streamed chunk holds new parts only, so none repeats."""
    for candidate in _list(obj.get("candidates")):
        for part in _list(_dict(_dict(candidate).get("content")).get("parts")):
            name = _dict(_dict(part).get("functionCall")).get("name")
            if isinstance(name, str) and name:
                yield None, (name, None)


Finder = Callable[[Mapping[str, Any]], Iterable[Found]]

# Provider name (usage.PROVIDERS) -> its call finder, and the JSON text every event that
# carries a call holds: `"type":"tool_use"` (and server_/mcp_), `"tool_calls"`, `"<x>_call"`
# item types, `"functionCall"`. A superset test: an event without its key is never parsed
# for calls.
FINDERS: Final[Mapping[str, Finder]] = {
    "anthropic": _anthropic,
    "gemini": _gemini,
    "openai-chat": _openai_chat,
    "openai-responses": _openai_responses,
}
CALL_KEYS: Final[Mapping[str, str]] = {
    "anthropic": '_use"',
    "gemini": '"functionCall"',
    "openai-chat": '"tool_calls"',
    "openai-responses": '_call"',
}


def cache_miss_of(obj: Mapping[str, Any]) -> CacheMiss | None:
    """Anthropic's cache diagnostics in a `message_start` event or a whole `message`:
    `diagnostics.cache_miss_reason.type` and its `cache_missed_input_tokens`; None when the
    answer names no reason (none requested, none found, or still being compared)."""
    kind = obj.get("type")
    if kind == "message_start":
        message = _dict(obj.get("message"))
    elif kind == "message":
        message = obj
    else:
        return None
    diagnostics = message.get("diagnostics")
    if not isinstance(diagnostics, dict):  # the usual answer: none requested
        return None
    reason = _dict(diagnostics.get("cache_miss_reason"))
    kind = reason.get("type")
    if not isinstance(kind, str) or not kind:
        return None
    missed = reason.get("cache_missed_input_tokens")
    return kind[:64], missed if type(missed) is int and missed >= 0 else 0
