"""Incremental Server-Sent Events decoding and token-usage extraction from response bytes.

PURE: stdlib and orjson only (brotli and zstandard are imported lazily, when a response uses
them); never imports aiohttp or prometheus_client. It observes a copy and never alters bytes.
"""

from __future__ import annotations

import codecs
import importlib
import re
import zlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Final

import orjson

__all__ = ["API_NAMES", "Event", "SSEDecoder", "Usage", "UsageObserver"]


@dataclass(slots=True)  # one per response: not frozen, see pipeline.RunReport
class Usage:
    """Token usage one upstream response reported, normalised across providers."""

    input_tokens: int = 0  # plain (uncached) input tokens billed at full price
    output_tokens: int = 0
    cache_read_input_tokens: int = 0
    cache_creation_input_tokens: int = 0


@dataclass(frozen=True, slots=True)
class Event:
    """One dispatched SSE event; `event` is "message" when the stream named no type."""

    event: str
    data: str
    id: str = ""


# WHATWG HTML §9.2.6: a line ends at CRLF, a lone LF or a lone CR, and nothing else
# (str.splitlines would also split on U+2028, form feeds and friends).
_LINE_BREAK: Final = re.compile(r"\r\n|\r|\n")


class SSEDecoder:
    """Incremental Server-Sent Events decoder (WHATWG EventSource parsing rules).

    Bytes may be split anywhere: inside a UTF-8 character, between the CR and LF of one line
    break, inside a leading BOM. An event still unfinished when the bytes stop is never emitted.
    """

    __slots__ = (
        "_after_cr",
        "_data",
        "_data_held",
        "_event",
        "_last_id",
        "_pending",
        "_pending_held",
        "_text",
    )

    def __init__(self) -> None:
        # utf-8-sig drops one leading BOM even when its bytes arrive split; "replace" is the
        # WHATWG "UTF-8 decode" the spec asks for.
        self._text = codecs.getincrementaldecoder("utf-8-sig")(errors="replace")
        self._pending: list[str] = []  # pieces of a line whose end has not arrived yet
        self._after_cr = (
            False  # the last break seen was a CR: an LF right after it is the same break
        )
        self._event = ""
        self._data: list[str] = []
        self._last_id = ""
        self._data_held = 0
        self._pending_held = 0

    @property
    def buffered(self) -> int:
        """Characters held for the unfinished line and event, so callers can bound memory."""
        return self._data_held + self._pending_held

    def feed(self, chunk: bytes) -> list[Event]:
        """Decode the next bytes of the stream; return the events they complete, in order."""
        text = self._text.decode(chunk)
        if not text:
            return []
        if self._after_cr:
            self._after_cr = False
            if text[0] == "\n":
                text = text[1:]
                if not text:
                    return []
        if "\n" not in text and "\r" not in text:
            self._pending.append(text)
            self._pending_held += len(text)
            return []
        if self._pending:
            self._pending.append(text)
            text = "".join(self._pending)
        lines = _LINE_BREAK.split(text)
        rest = lines.pop()
        self._pending = [rest] if rest else []
        self._pending_held = len(rest)
        self._after_cr = not rest and text[-1] == "\r"
        return self._lines(lines)

    def _lines(self, lines: list[str]) -> list[Event]:
        events: list[Event] = []
        for line in lines:
            if not line:
                if self._data:
                    events.append(
                        Event(self._event or "message", "\n".join(self._data), self._last_id)
                    )
                    self._data = []
                    self._data_held = 0
                self._event = ""
                continue
            field, _, value = line.partition(":")
            if not field:
                continue  # a comment line
            if value[:1] == " ":
                value = value[1:]
            if field == "data":
                self._data.append(value)
                self._data_held += len(value)
            elif field == "event":
                self._event = value
            elif field == "id" and "\x00" not in value:
                self._last_id = value
            # "retry" only matters to a reconnecting client; unknown fields are ignored by spec.
        return events


class _Gzip:
    """gzip, member after member: RFC 1952 §2.2 lets a body hold several."""

    __slots__ = ("_z",)

    def __init__(self) -> None:
        self._z = zlib.decompressobj(16 + zlib.MAX_WBITS)

    def __call__(self, data: bytes) -> bytes:
        out: list[bytes] = []
        while data:
            if self._z.eof:
                self._z = zlib.decompressobj(16 + zlib.MAX_WBITS)
            out.append(self._z.decompress(data))
            data = self._z.unused_data
        return b"".join(out)


class _Deflate:
    """HTTP deflate should be zlib-wrapped (RFC 9110 §8.4.1.2), but some servers send it raw."""

    __slots__ = ("_head", "_z")

    def __init__(self) -> None:
        self._head = b""
        self._z: Any = None

    def __call__(self, data: bytes) -> bytes:
        if self._z is None:
            self._head += data
            if len(self._head) < 2:
                return b""
            data, self._head = self._head, b""
            cmf, flg = data[0], data[1]
            wrapped = cmf & 0x0F == 8 and cmf >> 4 <= 7 and (cmf << 8 | flg) % 31 == 0
            self._z = zlib.decompressobj(zlib.MAX_WBITS if wrapped else -zlib.MAX_WBITS)
        out: bytes = self._z.decompress(data)
        return out


def _brotli() -> Callable[[bytes], bytes]:
    decompressor = importlib.import_module("brotli").Decompressor()
    process: Callable[[bytes], bytes] = decompressor.process
    return process


def _zstd() -> Callable[[bytes], bytes]:
    dctx = importlib.import_module("zstandard").ZstdDecompressor()
    try:
        obj = dctx.decompressobj(read_across_frames=True)
    except TypeError:  # zstandard < 0.22 reads one frame only
        obj = dctx.decompressobj()
    decompress: Callable[[bytes], bytes] = obj.decompress
    return decompress


# Content-Encoding token -> factory of an incremental decoder. "identity" decodes to itself.
DECODERS: Final[Mapping[str, Callable[[], Callable[[bytes], bytes]]]] = {
    "br": _brotli,
    "deflate": _Deflate,
    "gzip": _Gzip,
    "x-gzip": _Gzip,
    "zstd": _zstd,
}


def _decoders(content_encoding: str | None) -> list[Callable[[bytes], bytes]]:
    """Decoders to apply in order; codings are listed in the order they were applied."""
    codings = [c.strip().lower() for c in (content_encoding or "").split(",")]
    return [DECODERS[c]() for c in reversed(codings) if c and c != "identity"]


def _count(usage: Mapping[str, Any], key: str, inner: str | None = None) -> int:
    """The count at usage[key] (or usage[key][inner]): missing or null is 0; anything but a
    non-negative int is junk."""
    value = usage.get(key)
    if inner is not None and value is not None:
        if not isinstance(value, dict):  # parsed JSON: an object is a dict (and no ABC check)
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
    return Usage(
        input_tokens=_count(usage, "input_tokens"),
        output_tokens=_count(usage, "output_tokens"),
        cache_read_input_tokens=_count(usage, "cache_read_input_tokens"),
        cache_creation_input_tokens=_count(usage, "cache_creation_input_tokens"),
    )


def _read_openai_chat(usage: Mapping[str, Any]) -> Usage:
    cached = _count(usage, "prompt_tokens_details", "cached_tokens")
    return Usage(
        input_tokens=_minus(_count(usage, "prompt_tokens"), cached),
        output_tokens=_count(usage, "completion_tokens"),
        cache_read_input_tokens=cached,
    )


def _read_openai_responses(usage: Mapping[str, Any]) -> Usage:
    cached = _count(usage, "input_tokens_details", "cached_tokens")
    return Usage(
        input_tokens=_minus(_count(usage, "input_tokens"), cached),
        output_tokens=_count(usage, "output_tokens"),
        cache_read_input_tokens=cached,
    )


def _read_gemini(usage: Mapping[str, Any]) -> Usage:
    cached = _count(usage, "cachedContentTokenCount")
    return Usage(
        input_tokens=_minus(_count(usage, "promptTokenCount"), cached),
        output_tokens=_count(usage, "candidatesTokenCount") + _count(usage, "thoughtsTokenCount"),
        cache_read_input_tokens=cached,
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


_RESPONSES_FINAL: Final = frozenset(
    {"response.completed", "response.failed", "response.incomplete"}
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
    """How one API reports usage: the key that betrays it, where it sits, how to read it."""

    name: str
    key: str  # quoted JSON key that a payload carrying usage must contain
    find: Callable[[Mapping[str, Any]], Found | None]
    merge: bool  # later reports override field by field (else a later report replaces)
    read: Callable[[Mapping[str, Any]], Usage]


_ANTHROPIC = _Provider("anthropic", '"usage"', _find_anthropic, True, _read_anthropic)
_GEMINI = _Provider("gemini", '"usageMetadata"', _find_gemini, False, _read_gemini)
_OPENAI_CHAT = _Provider("openai-chat", '"usage"', _find_openai_chat, False, _read_openai_chat)
_OPENAI_RESPONSES = _Provider(
    "openai-responses", '"usage"', _find_openai_responses, False, _read_openai_responses
)

# api -> providers whose shapes to look for. Their shapes do not collide, so "other" tries all.
PROVIDERS: Final[Mapping[str, tuple[_Provider, ...]]] = {
    "anthropic": (_ANTHROPIC,),
    "gemini": (_GEMINI,),
    "openai-chat": (_OPENAI_CHAT,),
    "openai-responses": (_OPENAI_RESPONSES,),
    "other": (_ANTHROPIC, _GEMINI, _OPENAI_CHAT, _OPENAI_RESPONSES),
}
API_NAMES: Final = tuple(sorted(PROVIDERS))


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


def _mention(
    data: bytes | bytearray, needle: bytes, tails: tuple[bytes, ...] | None, start: int, end: int
) -> int:
    """Where in data[start:end] raw event bytes may hold a usage key with a non-null value, or -1.

    The key is `needle`, or (when tails are given, for several keys sharing that head) `needle`
    and one of `tails`. Only a superset test of `_mentions` over each event's data: a key the
    decoded data holds is in the bytes too, and "null" is trusted only on the key's own line
    (between lines the text would gain a "\n" and lose the next line's "data:" prefix).
    """
    at = data.find(needle, start, end)
    while at >= 0:
        after = at + len(needle)
        if tails is not None:
            tail = next((tail for tail in tails if data.startswith(tail, after)), None)
            if tail is None:  # some other key that starts the same way
                at = data.find(needle, after, end)
                continue
            after += len(tail)
        # ":null" first: OpenAI chat chunks say so, all but the last; ":{" is the usual hit.
        if not data.startswith(b":null", after) and (
            data.startswith(b":{", after)
            or not data[after : after + 16].lstrip(b" \t:").startswith(b"null")
        ):
            return at
        at = data.find(needle, after, end)
    return -1


_UTF8 = codecs.getincrementaldecoder("utf-8")


def _mid_stream_decoder() -> SSEDecoder:
    """A decoder for bytes that start at an event boundary after the stream's first byte."""
    decoder = SSEDecoder()
    decoder._text = _UTF8(errors="replace")  # a BOM is only dropped at the very start
    return decoder


Needle = tuple[bytes, tuple[bytes, ...] | None]  # what _mention searches for


def _keys(providers: tuple[_Provider, ...]) -> tuple[tuple[str, ...], Needle]:
    """The JSON keys that betray usage, and the one needle that finds them all in bytes."""
    keys = tuple(dict.fromkeys(p.key for p in providers))
    if len(keys) == 1:
        return keys, (keys[0].encode(), None)
    head = keys[0]  # their common head: '"usage' for '"usage"' and '"usageMetadata"'
    while not all(key.startswith(head) for key in keys):
        head = head[:-1]
    if not head:  # _mention would then find an empty needle everywhere, for ever
        raise ValueError(f"usage keys {keys} share no first character")
    return keys, (head.encode(), tuple(key[len(head) :].encode() for key in keys))


# api -> (JSON keys that betray usage, the needle that finds them in bytes), worked out once.
KEYS: Final = {api: _keys(providers) for api, providers in PROVIDERS.items()}

_JSON_START: Final = frozenset(b"{[")
_BOM: Final = b"\xef\xbb\xbf"
_WHITESPACE: Final = b" \t\r\n"


class UsageObserver:
    """Reads token usage from a copy of the response bytes, never delaying or altering them.

    `text/event-stream` bodies are cut into events by byte search, and only the events whose
    bytes may carry usage are read (straight from their bytes, or through SSEDecoder when
    their line breaks or bytes need it) and parsed; any other body is buffered up
    to `max_buffer` decoded bytes and parsed as JSON (an object, or an array of them as Gemini
    streams without alt=sse). Any surprise (unknown Content-Encoding, bad compression, junk
    counts, too many bytes) makes finish() return None.

    Chunks are only collected as they pass, and looked at `batch` bytes at a time (and at
    finish()): a streamed answer arrives in dozens of small reads, and searching each one cost
    more than all the proxy's other per-chunk work. Looking at the bytes joined gives the
    same usage as looking at them read by read, unless an event outgrows `max_buffer` (then
    either may give up where the other does not).
    """

    __slots__ = (
        "_at_start",
        "_available",
        "_batch",
        "_body",
        "_body_size",
        "_decoders",
        "_events",
        "_final",
        "_finished",
        "_held",
        "_keys",
        "_max_buffer",
        "_needle",
        "_pending",
        "_pending_size",
        "_provider",
        "_providers",
        "_raw",
        "_result",
        "_started",
        "_stream",
    )

    def __init__(
        self,
        api: str,
        content_type: str | None,
        content_encoding: str | None,
        max_buffer: int = 8 * 1024 * 1024,
        batch: int = 64 * 1024,
    ) -> None:
        api = api if api in PROVIDERS else "other"
        self._providers = PROVIDERS[api]
        self._keys, self._needle = KEYS[api]
        self._max_buffer = max_buffer
        self._batch = batch
        self._pending: list[bytes] = []  # chunks collected since they were last looked at
        self._pending_size = 0
        media_type = (content_type or "").partition(";")[0].strip().lower()
        self._stream = media_type == "text/event-stream"
        # SSE: the bytes since the last event boundary found. None for a JSON body, and once
        # every byte goes to the decoder.
        self._held: bytearray | None = bytearray() if self._stream else None
        self._events: SSEDecoder | None = None  # made when the first event needs decoding
        self._at_start = True  # no bytes skipped yet: the decoder must drop a leading BOM
        self._body: list[bytes] = []
        self._body_size = 0
        self._started = False  # seen the first non-blank byte of a JSON body
        self._provider: _Provider | None = None
        self._raw: dict[str, Any] = {}
        self._final = False
        self._finished = False
        self._result: Usage | None = None
        self._available = True
        try:
            self._decoders = _decoders(content_encoding) if content_encoding else []
        except Exception:  # unknown coding, or its library is not installed
            self._decoders = []
            self._available = False

    def feed(self, chunk: bytes) -> None:
        """Observe the next chunk of the body exactly as it travels. Never raises."""
        if not self._available:  # also once finished: finish() drops everything
            return
        self._pending.append(chunk)
        self._pending_size += len(chunk)
        if self._pending_size > self._batch:
            self._look()

    def finish(self) -> Usage | None:
        """The usage the response reported, or None when it could not be read. Never raises."""
        if not self._finished:
            self._finished = True
            self._look()
            try:
                self._result = self._conclude()
            except Exception:
                self._result = None
            self._drop()
        return self._result

    def _look(self) -> None:
        """Look at the chunks collected so far, as one."""
        pending = self._pending
        if not pending:  # also once unavailable: _drop() empties it and feed() stops adding
            return
        data = pending[0] if len(pending) == 1 else b"".join(pending)
        self._pending = []
        self._pending_size = 0
        try:
            for decode in self._decoders:
                data = decode(data)
            if not data:
                return
            if self._held is not None:
                self._feed_boundaries(self._held, data)
            elif self._stream:
                self._feed_events(data)
            else:
                self._feed_body(data)
        except Exception:
            self._drop()

    def _feed_body(self, data: bytes) -> None:
        if not self._started:
            head = data.lstrip(_WHITESPACE)
            if not head:
                return
            if head[0] not in _JSON_START:
                self._drop()  # HTML error pages, downloads: no usage, so do not buffer them
                return
            self._started = True
        self._body_size += len(data)
        if self._body_size > self._max_buffer:
            self._drop()
            return
        self._body.append(data)

    def _feed_events(self, data: bytes) -> None:
        """The exact path: decode every byte given, parse the payloads that carry usage."""
        events = self._events
        if events is None:
            events = self._events = SSEDecoder() if self._at_start else _mid_stream_decoder()
        self._at_start = False
        for event in events.feed(data):
            self._observe_data(event.data)
        if events.buffered > self._max_buffer:
            self._drop()

    def _feed_boundaries(self, held: bytearray, data: bytes) -> None:
        """The fast path: find the last event boundary by byte search, and hand the complete
        events before it to _feed_usage_events, which reads only those that may carry usage.

        A boundary leaves SSEDecoder clean (no line, data or type pending; any UTF-8 character
        complete), so skipping whole events changes nothing it would report. A CR there may
        still pair with an LF that starts the next bytes: a blank line there is a no-op.
        """
        if held:
            start = len(held) - 1  # held has no boundary, but its last byte may begin one
            held += data
            buf: bytes | bytearray = held
        else:
            start = 0
            buf = data
        size = len(buf)
        # Two line-break bytes in a row, except CR LF, end a blank line (WHATWG: a line ends
        # at CRLF, LF or CR); none of the CR pairs can end after an LF LF at the very end.
        end = buf.rfind(b"\n\n", start)
        if end != size - 2 and buf.find(b"\r", start) >= 0:
            end = max(end, buf.rfind(b"\r\r", start), buf.rfind(b"\n\r", start))
        if end >= 0:
            cut = end + 2
            if cut < size and buf[cut] == 10 and buf[end + 1] == 13:
                cut += 1  # the LF of that last CRLF
            self._feed_usage_events(buf, cut)
            if not self._available:
                return
            self._at_start = False
            if buf is held:
                del held[:cut]
            elif cut < size:
                held += memoryview(data)[cut:]
        elif buf is not held:
            held += data
        if len(held) > self._max_buffer:
            # SSEDecoder.buffered counts at most these bytes, so only now can it exceed the
            # budget: from this event's start on, let the decoder see every byte.
            self._held = None
            self._feed_events(bytes(held))

    def _feed_usage_events(self, buf: bytes | bytearray, cut: int) -> None:
        """Decode, of the complete events before `cut`, only those whose bytes may carry usage.

        With LF line breaks an event ends at the first LF LF after any of its bytes and starts
        after the last one before; each such event is read on its own, straight from its bytes
        or, when only the decoder can say, by a decoder (clean at every boundary). A stream
        chunk read under load often holds the whole answer, and decoding its 30 deltas cost
        more than everything else the proxy does per request.
        With CR line breaks the edges are subtler: every event before `cut` is decoded.
        """
        needle, tails = self._needle
        at = _mention(buf, needle, tails, 0, cut)
        if at < 0:
            return
        if buf.find(b"\r", 0, cut) >= 0:
            self._feed_events(bytes(buf[:cut]))
            return
        while at >= 0:
            end = self._read_event(buf, at, cut)
            if not self._available:
                return
            at = _mention(buf, needle, tails, end, cut)

    def _read_event(self, buf: bytes | bytearray, at: int, cut: int) -> int:
        """Observe, as SSEDecoder would, the complete LF-delimited event in which a mention of
        usage starts `at`; return where the event ends.

        The usual event has one data line, and the mention is on it: that line's payload goes
        to orjson as it lies, with no line splitting and no str in between. Anything else (more
        data lines, a leading BOM, bytes that are not UTF-8) goes through the decoder.
        """
        line = buf.rfind(b"\n", 0, at) + 1  # where the mention's line starts
        eol = buf.find(b"\n", at, cut)  # and ends: `cut` ends a blank line, so it is found
        # The event ends at the first blank line: most often right after this line.
        end = eol + 2 if buf[eol + 1] == 10 else buf.find(b"\n\n", eol, cut) + 2
        start = buf.rfind(b"\n\n", 0, line) + 2  # 1: no boundary before it
        start = start if start > 1 else 0
        if (
            (start == 0 and self._at_start and buf.startswith(_BOM))
            or not buf.startswith(b"data:", line)
            or (end != eol + 2 and buf.find(b"\ndata", eol, end) >= 0)  # a data line after it
            or (line > start and buf.find(b"data", start, line - 1) >= 0)  # or maybe before
        ):
            self._decode(buf, start, end)
        else:
            value = line + 5 + (buf[line + 5] == 32)  # ":" then at most one space, by the spec
            try:
                obj = orjson.loads(buf[value:eol])
            except orjson.JSONDecodeError:  # maybe not UTF-8, where the decoder reads U+FFFD
                self._decode(buf, start, end)
            else:
                self._observe(obj)
        return end

    def _decode(self, buf: bytes | bytearray, start: int, end: int) -> None:
        """Observe the events in buf[start:end] through the decoder: the exact, slower way."""
        if start:
            self._at_start = False  # only the stream's very first byte may start a BOM
        self._feed_events(bytes(buf[start:end]))

    def _observe_data(self, data: str) -> None:
        """Parse one event's data if it carries usage (a cheap test before the parse)."""
        for key in self._keys:
            if _mentions(data, key):
                self._observe(orjson.loads(data))
                return

    def _conclude(self) -> Usage | None:
        if not self._available:
            return None
        if not self._stream and self._body:
            value = orjson.loads(b"".join(self._body))
            for obj in value if isinstance(value, list) else [value]:
                self._observe(obj)
        if self._provider is None or not self._final:
            return None
        return self._provider.read(self._raw)

    def _observe(self, obj: Any) -> None:
        if not isinstance(obj, dict):
            return
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

    def _drop(self) -> None:
        """Stop observing and let go of everything held."""
        self._available = False
        self._pending = []
        self._body = []
        self._held = None
        self._events = None
        self._decoders = []
