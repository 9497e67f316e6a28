"""PURE. Server-Sent Events: an incremental, chunk-split-safe decoder, and the observer that
reads token usage and tool calls from a copy of a response's bytes (SSE events or one JSON
body), in one pass.

Stdlib, orjson and the codings and usage rooms only; never imports aiohttp or prometheus_client.
The observer sees a copy and never alters or delays the bytes relayed.
"""

from __future__ import annotations

import codecs
import re
from dataclasses import dataclass
from typing import Final

import orjson

from toolslim.core.catalog import Api
from toolslim.wire import codings
from toolslim.wire.calls import CacheMiss, Call
from toolslim.wire.usage import Usage, UsageReader

__all__ = ["MAX_DECODED", "Event", "SSEDecoder", "UsageObserver"]


@dataclass(frozen=True, slots=True)
class Event:
    """One dispatched SSE event; `event` is "message" when the stream named no type."""

    event: str
    data: str
    id: str = ""


# WHATWG HTML §9.2.6: only CRLF, LF and CR end a line (str.splitlines also splits on U+2028).
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

    def __init__(self, at_start: bool = True) -> None:
        """`at_start` False: the bytes begin after the stream's first byte (at an event
        boundary), where a BOM is no longer dropped."""
        # utf-8-sig drops one leading BOM even split; "replace" is WHATWG's "UTF-8 decode".
        codec = "utf-8-sig" if at_start else "utf-8"
        self._text = codecs.getincrementaldecoder(codec)(errors="replace")
        self._pending: list[str] = []
        self._after_cr = False  # a CR ended the last line: an LF right after it is that break
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
                continue
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


def _mention(
    data: bytes | bytearray, needle: bytes, tails: tuple[bytes, ...] | None, start: int, end: int
) -> int:
    """Where in data[start:end] raw event bytes may hold a usage key with a non-null value, or -1.

    The key is `needle`, or (when tails are given, for several keys sharing that head) `needle`
    and one of `tails`. Only a superset of the test UsageReader.feed makes on each event's data:
    a key the decoded data holds is in the bytes too, and "null" is trusted only on the key's
    own line (between lines the text would gain a "\n" and lose the next line's "data:" prefix).
    """
    at = data.find(needle, start, end)
    while at >= 0:
        after = at + len(needle)
        if tails is not None:
            tail = next((tail for tail in tails if data.startswith(tail, after)), None)
            if tail is None:
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


_JSON_START: Final = frozenset(b"{[")
_BOM: Final = b"\xef\xbb\xbf"
_WHITESPACE: Final = b" \t\r\n"

# Decoded bytes the observer inflates from one coded response before it gives up: a small
# compressed answer can expand without end, and the observer runs on the event loop.
MAX_DECODED: Final = 64 * 1024 * 1024


class UsageObserver:
    """Reads token usage from a copy of the response bytes, never delaying or altering them.

    `text/event-stream` bodies are cut into events by byte search, and only the events whose
    bytes may carry usage are read (straight from their bytes, or through SSEDecoder when
    their line breaks or bytes need it) and parsed; any other body is buffered up
    to `max_buffer` decoded bytes and parsed as JSON (an object, or an array of them as Gemini
    streams without alt=sse). Any surprise (unknown Content-Encoding, bad compression, more
    than `max_decoded` bytes decoded, junk counts, too many bytes) makes finish() return None.

    Chunks are only collected as they pass, and looked at `batch` bytes at a time (and at
    finish()): a streamed answer arrives in dozens of small reads, and searching each one cost
    more than all the proxy's other per-chunk work. Looking at the bytes joined gives the
    same usage as looking at them read by read, unless an event outgrows `max_buffer` (then
    either may give up where the other does not).

    `skim=False` sends every byte of a stream through SSEDecoder and looks at every event: the
    plain reading that the byte search must agree with.
    """

    __slots__ = (
        "_at_start",
        "_available",
        "_batch",
        "_body",
        "_body_size",
        "_call_needles",
        "_decoded",
        "_decoder",
        "_events",
        "_finished",
        "_held",
        "_max_buffer",
        "_max_decoded",
        "_needle",
        "_pending",
        "_pending_size",
        "_reader",
        "_result",
        "_started",
        "_stream",
    )

    def __init__(
        self,
        api: Api,
        content_type: str | None,
        content_encoding: str | None,
        max_buffer: int = 8 * 1024 * 1024,
        batch: int = 64 * 1024,
        *,
        skim: bool = True,
        max_decoded: int = MAX_DECODED,
    ) -> None:
        self._reader = UsageReader(api)
        self._needle = self._reader.needle
        self._call_needles = self._reader.call_needles
        self._max_buffer = max_buffer
        self._max_decoded = max_decoded
        self._batch = batch
        self._pending: list[bytes] = []
        self._pending_size = 0
        media_type = (content_type or "").partition(";")[0].strip().lower()
        self._stream = media_type == "text/event-stream"
        # SSE: the bytes since the last event boundary found. None for a JSON body, without
        # skim, and once every byte goes to the decoder.
        self._held: bytearray | None = bytearray() if self._stream and skim else None
        self._events: SSEDecoder | None = None
        self._at_start = True  # no bytes skipped yet: the decoder must drop a leading BOM
        self._body: list[bytes] = []
        self._body_size = 0
        self._started = False
        self._finished = False
        self._result: Usage | None = None
        self._available = True
        self._decoded = 0
        self._decoder: codings.Decoder | None = None
        if content_encoding:
            try:
                self._decoder = codings.decoder(content_encoding)
            except codings.Unsupported:
                self._available = False

    @property
    def pending(self) -> int:
        """Bytes collected and not looked at yet (at most `batch`)."""
        return self._pending_size

    @property
    def buffered(self) -> int:
        """Decoded bytes held for the unfinished event or the JSON body, so callers can see
        memory stay bounded (characters, for an event inside SSEDecoder)."""
        events = self._events.buffered if self._events is not None else 0
        return len(self._held or b"") + events + self._body_size

    @property
    def calls(self) -> list[Call]:
        """The tool calls the answer made, each once, in order (read by `finish()`)."""
        return self._reader.calls

    @property
    def cache_miss(self) -> CacheMiss | None:
        """Anthropic's cache-miss reason and missed input tokens, if the answer named one."""
        return self._reader.cache_miss

    def feed(self, chunk: bytes) -> None:
        """Observe the next chunk of the body exactly as it travels. Never raises."""
        if not self._available:
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
        if not pending:
            return
        data = pending[0] if len(pending) == 1 else b"".join(pending)
        self._pending = []
        self._pending_size = 0
        try:
            if self._decoder is not None:
                data = self._decoder.decode(data, self._max_decoded - self._decoded)
                self._decoded += len(data)
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
        """The exact path: decode every byte given, read the payloads that carry usage."""
        events = self._events
        if events is None:
            events = self._events = SSEDecoder(self._at_start)
        self._at_start = False
        reader = self._reader
        for event in events.feed(data):
            reader.feed(event.data)
        if not reader.available or events.buffered > self._max_buffer:
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
                cut += 1
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
        at = self._mention(buf, 0, cut)
        if at < 0:
            return
        if buf.find(b"\r", 0, cut) >= 0:
            self._feed_events(bytes(buf[:cut]))
            return
        while at >= 0:
            end = self._read_event(buf, at, cut)
            if not self._available:
                return
            at = self._mention(buf, end, cut)

    def _mention(self, buf: bytes | bytearray, start: int, end: int) -> int:
        """The first place in buf[start:end] that may mention usage or a tool call, or -1."""
        needle, tails = self._needle
        first = _mention(buf, needle, tails, start, end)
        for call in self._call_needles:
            at = _mention(buf, call, None, start, end if first < 0 else first)
            if at >= 0:
                first = at
        return first

    def _read_event(self, buf: bytes | bytearray, at: int, cut: int) -> int:
        """Observe, as SSEDecoder would, the complete LF-delimited event in which a mention of
        usage starts `at`; return where the event ends.

        The usual event has one data line, and the mention is on it: that line's payload goes
        to orjson as it lies, with no line splitting and no str in between. Anything else (more
        data lines, a leading BOM, bytes that are not UTF-8) goes through the decoder.
        """
        line = buf.rfind(b"\n", 0, at) + 1
        eol = buf.find(b"\n", at, cut)  # and ends: `cut` ends a blank line, so it is found
        end = eol + 2 if buf[eol + 1] == 10 else buf.find(b"\n\n", eol, cut) + 2
        start = buf.rfind(b"\n\n", 0, line)
        start = start + 2 if start >= 0 else 0
        if (
            (start == 0 and self._at_start and buf.startswith(_BOM))
            or not buf.startswith(b"data:", line)
            or (end != eol + 2 and buf.find(b"\ndata", eol, end) >= 0)
            or (line > start and buf.find(b"data", start, line - 1) >= 0)
        ):
            self._decode(buf, start, end)
        else:
            value = line + 5 + (buf[line + 5] == 32)  # ":" then at most one space, by the spec
            try:
                obj = orjson.loads(buf[value:eol])
            except orjson.JSONDecodeError:  # maybe not UTF-8, where the decoder reads U+FFFD
                self._decode(buf, start, end)
            else:
                self._reader.observe(obj)
        return end

    def _decode(self, buf: bytes | bytearray, start: int, end: int) -> None:
        """Observe the events in buf[start:end] through the decoder: the exact, slower way
        (which drops a BOM only where the stream starts)."""
        if start:
            self._at_start = False
        self._feed_events(bytes(buf[start:end]))

    def _conclude(self) -> Usage | None:
        if not self._available:
            return None
        if not self._stream and self._body:
            self._reader.feed_body(b"".join(self._body))
        return self._reader.finish()

    def _drop(self) -> None:
        """Stop observing and let go of everything held."""
        self._available = False
        self._pending = []
        self._body = []
        self._body_size = 0
        self._held = None
        self._events = None
        self._decoder = None
