"""PURE. The usage readers: the token usage each API reports, read from its JSON events one at
a time, whether they came as SSE events, WebSocket messages or one JSON body; the tool calls
the answer makes (calls.py) are read in the same pass, from the same parsed events.

Stdlib and orjson only; never imports aiohttp or prometheus_client.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Mapping
from dataclasses import dataclass
from typing import Any, Final

import orjson

from toolslim.core.catalog import Api
from toolslim.wire.calls import (
    CALL_KEYS,
    FINDERS,
    MAX_CALLS,
    CacheMiss,
    Call,
    Finder,
    cache_miss_of,
)

__all__ = [
    "API_NAMES",
    "CALL_NEEDLES",
    "KEYS",
    "PROVIDERS",
    "Needle",
    "Usage",
    "UsageReader",
    "read_event",
]


@dataclass(slots=True)  # one per response: not frozen, see pipeline.RunReport
class Usage:
    """Token usage one upstream response reported, normalised across providers."""

    input_tokens: int = 0  # plain (uncached) input tokens billed at full price
    output_tokens: int = 0
    cache_read_input_tokens: int = 0
    cache_creation_input_tokens: int = 0


def _count(usage: Mapping[str, Any], key: str, inner: str | None = None) -> int:
    """The count at usage[key] (or usage[key][inner]): missing or null is 0; anything but a
    non-negative int is junk."""
    value = usage.get(key)
    if inner is not None and value is not None:
        if not isinstance(value, dict):
            raise ValueError(f"{key} is not an object")
        value = value.get(inner)
    if type(value) is int and value >= 0:
        return value
    if value is None:
        return 0
    raise ValueError(f"{key} is {value!r}, not a token count")


def _minus(total: int, part: int) -> int:
    if part > total:
        raise ValueError(f"cached tokens {part} exceed the input tokens {total}")
    return total - part


def _read_anthropic(usage: Mapping[str, Any]) -> Usage:
    # Anthropic's input_tokens already excludes cache reads and writes.
    return Usage(  # in the field order of Usage
        _count(usage, "input_tokens"),
        _count(usage, "output_tokens"),
        _count(usage, "cache_read_input_tokens"),
        _count(usage, "cache_creation_input_tokens"),
    )


def _cached_apart(
    total: str, cached: tuple[str, str | None], outputs: tuple[str, ...]
) -> Callable[[Mapping[str, Any]], Usage]:
    """A reader for a usage object that counts cached input inside its input total (OpenAI,
    Gemini): the plain input is the total less the cached part."""
    key, inner = cached

    def read(usage: Mapping[str, Any]) -> Usage:
        hit = _count(usage, key, inner)
        output = 0
        for name in outputs:
            output += _count(usage, name)
        return Usage(
            input_tokens=_minus(_count(usage, total), hit),
            output_tokens=output,
            cache_read_input_tokens=hit,
        )

    return read


_read_openai_chat = _cached_apart(
    "prompt_tokens", ("prompt_tokens_details", "cached_tokens"), ("completion_tokens",)
)
_read_openai_responses = _cached_apart(
    "input_tokens", ("input_tokens_details", "cached_tokens"), ("output_tokens",)
)
_read_gemini = _cached_apart(
    "promptTokenCount",
    ("cachedContentTokenCount", None),
    ("candidatesTokenCount", "thoughtsTokenCount"),
)


Found = tuple[Mapping[str, Any], bool]  # (the usage object, whether it is the final word)


def _object(value: Any) -> Mapping[str, Any] | None:
    return value if isinstance(value, dict) else None


def _find_anthropic(obj: Mapping[str, Any]) -> Found | None:
    kind = obj.get("type")
    if kind == "message_start":
        # Provisional: output_tokens is a placeholder until message_delta brings the count.
        usage = _object((_object(obj.get("message")) or {}).get("usage"))
        return None if usage is None else (usage, False)
    if kind in ("message", "message_delta"):
        usage = _object(obj.get("usage"))
        return None if usage is None else (usage, True)
    return None


def _find_openai_chat(obj: Mapping[str, Any]) -> Found | None:
    usage = _object(obj.get("usage"))
    if usage is None or ("prompt_tokens" not in usage and "completion_tokens" not in usage):
        return None
    return usage, True


# The events that end a response, and carry it whole; Codex's Responses WebSocket may say
# "response.done" where the SSE stream says "response.completed".
_RESPONSES_FINAL: Final = frozenset(
    {"response.completed", "response.done", "response.failed", "response.incomplete"}
)


def _find_openai_responses(obj: Mapping[str, Any]) -> Found | None:
    if obj.get("type") in _RESPONSES_FINAL:
        response = _object(obj.get("response"))
    else:
        response = obj if obj.get("object") == "response" else None
    usage = _object(response.get("usage")) if response is not None else None
    return None if usage is None else (usage, True)


def _find_gemini(obj: Mapping[str, Any]) -> Found | None:
    usage = _object(obj.get("usageMetadata"))
    return None if usage is None else (usage, True)


@dataclass(frozen=True, slots=True)
class _Provider:
    """How one API reports usage: the quoted JSON `key` a payload carrying usage must contain,
    how to `find` the usage object, whether later reports `merge` field by field (or replace
    the earlier), and how to `read` the counts."""

    name: str
    key: str
    find: Callable[[Mapping[str, Any]], Found | None]
    merge: bool
    read: Callable[[Mapping[str, Any]], Usage]


_ANTHROPIC = _Provider("anthropic", '"usage"', _find_anthropic, True, _read_anthropic)
_GEMINI = _Provider("gemini", '"usageMetadata"', _find_gemini, False, _read_gemini)
_OPENAI_CHAT = _Provider("openai-chat", '"usage"', _find_openai_chat, False, _read_openai_chat)
_OPENAI_RESPONSES = _Provider(
    "openai-responses", '"usage"', _find_openai_responses, False, _read_openai_responses
)

# api -> providers whose shapes to look for. Their shapes do not collide, so "other" tries all.
PROVIDERS: Final[Mapping[Api, tuple[_Provider, ...]]] = {
    "anthropic": (_ANTHROPIC,),
    "gemini": (_GEMINI,),
    "openai-chat": (_OPENAI_CHAT,),
    "openai-responses": (_OPENAI_RESPONSES,),
    "other": (_ANTHROPIC, _GEMINI, _OPENAI_CHAT, _OPENAI_RESPONSES),
}
API_NAMES: Final[tuple[Api, ...]] = tuple(sorted(PROVIDERS))


def _mentions(data: str, key: str) -> bool:
    """Whether `key` occurs with a non-null value: a cheap test before parsing a payload.

    OpenAI chat streams say `"usage":null` in every chunk but the last, so skip those.
    """
    start = data.find(key)
    while start >= 0:
        end = start + len(key)
        if not data[end : end + 16].lstrip(" \t\r\n:").startswith("null"):
            return True
        start = data.find(key, end)
    return False


# A byte search's target: a head, and the tails one of which follows it (None: head is the key).
Needle = tuple[bytes, tuple[bytes, ...] | None]


def _keys(providers: tuple[_Provider, ...]) -> tuple[tuple[str, ...], Needle]:
    """The JSON keys that betray usage, and the one needle that finds them all in bytes (their
    common head, as '"usage' for '"usage"' and '"usageMetadata"')."""
    keys = tuple(dict.fromkeys(p.key for p in providers))
    if len(keys) == 1:
        return keys, (keys[0].encode(), None)
    head = keys[0]
    while not all(key.startswith(head) for key in keys):
        head = head[:-1]
    if not head:  # a byte search would then find an empty needle everywhere, for ever
        raise ValueError(f"usage keys {keys} share no first character")
    return keys, (head.encode(), tuple(key[len(head) :].encode() for key in keys))


KEYS: Final[Mapping[Api, tuple[tuple[str, ...], Needle]]] = {
    api: _keys(providers) for api, providers in PROVIDERS.items()
}
# api -> the JSON keys that betray a tool call (calls.CALL_KEYS), for a byte search each.
CALL_NEEDLES: Final[Mapping[Api, tuple[bytes, ...]]] = {
    api: tuple(dict.fromkeys(CALL_KEYS[p.name].encode() for p in providers))
    for api, providers in PROVIDERS.items()
}


@dataclass(frozen=True, slots=True)
class _Reading:
    """What a reader of one API looks for, made once per API: its providers, the needles a
    byte search finds usage and calls by, the keys a text test finds both by, the call
    finders, and whether the answers may carry Anthropic's cache diagnostics."""

    providers: tuple[_Provider, ...]
    needle: Needle
    call_needles: tuple[bytes, ...]
    keys: tuple[str, ...]
    finders: tuple[Finder, ...]
    diagnosed: bool


def _reading(api: Api) -> _Reading:
    providers = PROVIDERS[api]
    usage_keys, needle = KEYS[api]
    calls = CALL_NEEDLES[api]
    return _Reading(
        providers,
        needle,
        calls,
        usage_keys + tuple(call.decode() for call in calls),
        tuple(FINDERS[p.name] for p in providers),
        _ANTHROPIC in providers,
    )


_READINGS: Final[Mapping[str, _Reading]] = {api: _reading(api) for api in PROVIDERS}


class UsageReader:
    """Reads one response's usage from its JSON events, given one at a time, in order; and,
    from the same events, the tool calls it makes (each counted once, at most MAX_CALLS) and
    Anthropic's cache-miss diagnostics.

    Never raises: an event that mentions usage but does not parse, or counts that are junk,
    make finish() return None (and `available` False, for the first). Calls read before that
    stay read: each one is a fact of the answer.
    """

    __slots__ = (
        "_diagnosed",
        "_final",
        "_finders",
        "_provider",
        "_providers",
        "_raw",
        "_seen",
        "available",
        "cache_miss",
        "call_needles",
        "calls",
        "keys",
        "needle",
    )

    def __init__(self, api: Api) -> None:
        """`api` names whose shapes to look for; a name outside Api reads as "other"."""
        reading = _READINGS.get(api) or _READINGS["other"]
        self._providers = reading.providers
        self.needle = reading.needle
        self.call_needles = reading.call_needles
        self.keys = reading.keys
        self._finders = reading.finders
        self._diagnosed = reading.diagnosed
        self._provider: _Provider | None = None
        self._raw: dict[str, Any] = {}
        self._final = False
        self._seen: set[Hashable] = set()
        self.available = True
        self.calls: list[Call] = []  # in the order the answer makes them
        self.cache_miss: CacheMiss | None = None

    def feed(self, data: str | bytes) -> None:
        """One event's JSON text, parsed only if it mentions a usage or tool-call key with a
        value."""
        if not self.available:
            return
        text = data if isinstance(data, str) else data.decode("utf-8", "replace")
        for key in self.keys:
            if _mentions(text, key):
                try:
                    obj = orjson.loads(text)
                except orjson.JSONDecodeError:
                    self.available = False
                else:
                    self.observe(obj)
                return

    def feed_body(self, data: bytes) -> None:
        """A whole JSON body: one object, or an array of them (as Gemini streams without
        alt=sse)."""
        if not self.available:
            return
        try:
            value = orjson.loads(data)
        except orjson.JSONDecodeError:
            self.available = False
            return
        for obj in value if isinstance(value, list) else [value]:
            self.observe(obj)

    def observe(self, obj: Any) -> None:
        """One event already parsed from JSON; anything but an object is no event of usage."""
        if not isinstance(obj, dict) or not self.available:
            return
        for finder in self._finders:
            for key, call in finder(obj):
                if len(self.calls) >= MAX_CALLS:
                    break
                if key is not None:
                    if key in self._seen:
                        continue
                    self._seen.add(key)
                self.calls.append(call)
        if self._diagnosed and (miss := cache_miss_of(obj)) is not None:
            self.cache_miss = miss
        for provider in self._providers:
            found = provider.find(obj)
            if found is None:
                continue
            usage, self._final = found
            if provider.merge and provider is self._provider:
                raw = self._raw
                for name, value in usage.items():
                    if value is not None:
                        raw[name] = value
            else:
                self._provider, self._raw = provider, dict(usage)
            return

    def finish(self) -> Usage | None:
        """The usage the events reported, or None when they gave no final, readable report."""
        if not self.available or self._provider is None or not self._final:
            return None
        try:
            return self._provider.read(self._raw)
        except ValueError:
            return None


def read_event(api: Api, event: str | bytes) -> Usage | None:
    """The usage one JSON event reports on its own (a WebSocket message such as Responses'
    `response.completed`), or None."""
    reader = UsageReader(api)
    reader.feed(event)
    return reader.finish()
