"""PURE. Content codings (RFC 9110 §8.4): one table of decoders serving both the one-shot
decode of a request body and the incremental decode of a response copy, both bounded in output.

Stdlib only (brotli and zstandard are imported when a body uses them); never imports aiohttp or
prometheus_client.
"""

from __future__ import annotations

import importlib
import zlib
from collections.abc import Callable, Mapping
from typing import Any, Final, Protocol

__all__ = [
    "CODINGS",
    "CodingError",
    "Decoder",
    "TooLarge",
    "Undecodable",
    "Unsupported",
    "decode",
    "decoder",
]


class CodingError(Exception):
    """A body that could not be decoded; the subclass says why."""


class Unsupported(CodingError):
    """A coding not in CODINGS, or whose optional module is not installed."""


class TooLarge(CodingError):
    """The decoded bytes would exceed the limit the caller gave."""


class Undecodable(CodingError):
    """Corrupt, truncated, or followed by bytes the coding does not allow."""


class Decoder(Protocol):
    """An incremental decoder of one coded stream."""

    def decode(self, data: bytes, limit: int) -> bytes:
        """The output of the next input bytes; TooLarge if it would exceed `limit` bytes."""
        ...

    def finish(self) -> None:
        """Check that the stream ended where a coded stream may end; Undecodable if not."""
        ...


# Input is fed in windows that start small for each member and double: zlib and zstandard
# copy all input left after a member's end into `unused_data`, so this keeps each copy within
# twice the member's size, and decoding linear however many tiny members a body holds.
_FIRST_WINDOW: Final = 64
_MAX_WINDOW: Final = 1 << 20
# zstd has no output cap per call: a block of up to 128 KiB costs 4 input bytes (RFC 8878
# §3.1.1.2), so an input window of n bytes yields at most about n << 15 bytes.
_ZSTD_GROWTH_SHIFT: Final = 15


class _Members:
    """Members one after another: gzip (RFC 1952 §2.2) and zstd frames (RFC 8878 §3.1).

    `bounded`: a member's decompress takes a max_length (zlib's does, zstandard's does not).
    """

    __slots__ = ("_bounded", "_member", "_new", "_window")

    def __init__(self, new: Callable[[], Any], bounded: bool, empty_ok: bool) -> None:
        self._new = new
        self._bounded = bounded
        self._member: Any = None if empty_ok else new()
        self._window = _FIRST_WINDOW

    def decode(self, data: bytes, limit: int) -> bytes:
        parts: list[bytes] = []
        size = 0
        view = memoryview(data)
        at = 0
        end = len(data)
        while at < end:
            member = self._member
            if member is None or member.eof:
                member = self._member = self._new()
                self._window = _FIRST_WINDOW
            window = self._window
            if self._bounded:
                piece = view[at : at + window]
                part: bytes = member.decompress(piece, limit + 1 - size)
            else:
                window = min(window, max(_FIRST_WINDOW, (limit - size) >> _ZSTD_GROWTH_SHIFT))
                piece = view[at : at + window]
                part = member.decompress(piece)
            size += len(part)
            if size > limit:  # also when max_length stopped zlib short of the piece's end
                raise TooLarge
            parts.append(part)
            if member.eof:
                at += len(piece) - len(member.unused_data)
            else:
                at += len(piece)
                self._window = min(self._window * 2, _MAX_WINDOW)
        return parts[0] if len(parts) == 1 else b"".join(parts)

    def finish(self) -> None:
        if self._member is not None and not self._member.eof:
            raise Undecodable("truncated")


def _gzip() -> Decoder:
    return _Members(lambda: zlib.decompressobj(16 + zlib.MAX_WBITS), True, empty_ok=False)


def _zstd() -> Decoder:
    # One context serves each frame in turn; an empty body has no frame, and that is whole.
    context = importlib.import_module("zstandard").ZstdDecompressor()
    return _Members(context.decompressobj, False, empty_ok=True)


def _zlib_wrapped(head: bytes) -> bool:
    """Whether the first two bytes are a zlib header (RFC 1950 §2.2): CM 8, CINFO <= 7, FCHECK.

    A raw deflate stream starts so only if a stored block's padding bits are set, which no
    encoder does: the header alone tells the two apart, however the bytes are split.
    """
    cmf, flg = head[0], head[1]
    return cmf & 0x0F == 8 and cmf >> 4 <= 7 and (cmf << 8 | flg) % 31 == 0


class _Deflate:
    """HTTP deflate should be zlib-wrapped (RFC 9110 §8.4.1.2), but some peers send it raw."""

    __slots__ = ("_head", "_trailing", "_z")

    def __init__(self) -> None:
        self._head = b""
        self._trailing = False
        self._z: Any = None

    def decode(self, data: bytes, limit: int) -> bytes:
        if self._z is None:
            self._head += data
            if len(self._head) < 2:
                return b""
            data, self._head = self._head, b""
            wbits = zlib.MAX_WBITS if _zlib_wrapped(data) else -zlib.MAX_WBITS
            self._z = zlib.decompressobj(wbits)
        elif self._z.eof:
            # Not handed on: zlib would append each piece to unused_data, a copy every time.
            self._trailing = self._trailing or bool(data)
            return b""
        out: bytes = self._z.decompress(data, limit + 1)
        if len(out) > limit:
            raise TooLarge
        self._trailing = bool(self._z.unused_data)
        return out

    def finish(self) -> None:
        if self._z is None or not self._z.eof:
            raise Undecodable("truncated")
        if self._trailing:
            raise Undecodable("trailing data")


class _Brotli:
    """br (RFC 7932): one stream, with the output of each call capped by the library."""

    __slots__ = ("_d",)

    def __init__(self) -> None:
        self._d: Any = importlib.import_module("brotli").Decompressor()

    def decode(self, data: bytes, limit: int) -> bytes:
        out: bytes = self._d.process(data, output_buffer_limit=limit + 1)
        if len(out) > limit or not self._d.can_accept_more_data():
            raise TooLarge
        return out

    def finish(self) -> None:
        if not self._d.is_finished():
            raise Undecodable("truncated")


# Content-Encoding token -> factory of its decoder; "identity" (no coding) is not a decoder.
CODINGS: Final[Mapping[str, Callable[[], Decoder]]] = {
    "br": _Brotli,
    "deflate": _Deflate,
    "gzip": _gzip,
    "x-gzip": _gzip,
    "zstd": _zstd,
}


def _open(coding: str) -> Decoder:
    factory = CODINGS.get(coding)
    if factory is None:
        raise Unsupported(coding)
    try:
        return factory()
    except ImportError as exc:
        raise Unsupported(f"{coding} needs a module that is not installed") from exc


def _undecodable(exc: Exception) -> Undecodable:
    # Each library raises its own type (zlib.error, brotli.error, ZstdError) on hostile bytes.
    return Undecodable(f"{type(exc).__name__}: {exc}")


def decode(content_encoding: str, data: bytes, limit: int) -> bytes:
    """A whole body decoded per its Content-Encoding value (one coding, any case).

    "" and "identity" return `data` itself. Raises Unsupported, TooLarge (more than `limit`
    decoded bytes) or Undecodable; nothing else.
    """
    coding = content_encoding.strip().lower()
    if not coding or coding == "identity":
        return data
    stream = _open(coding)
    try:
        out = stream.decode(data, limit)
        stream.finish()
    except CodingError:
        raise
    except Exception as exc:
        raise _undecodable(exc) from exc
    return out


class _Chain:
    """Codings undone in the reverse of the order they were listed (RFC 9110 §8.4)."""

    __slots__ = ("_decoders",)

    def __init__(self, decoders: list[Decoder]) -> None:
        self._decoders = decoders

    def decode(self, data: bytes, limit: int) -> bytes:
        try:
            for stage in self._decoders:
                if not data:
                    return b""
                data = stage.decode(data, limit)
        except CodingError:
            raise
        except Exception as exc:
            raise _undecodable(exc) from exc
        return data

    def finish(self) -> None:
        try:
            for stage in self._decoders:
                stage.finish()
        except CodingError:
            raise
        except Exception as exc:
            raise _undecodable(exc) from exc


def decoder(content_encoding: str | None) -> Decoder | None:
    """An incremental decoder for a Content-Encoding value, or None when it names no coding.

    Several codings may be listed; each stage's output is bounded by the same `limit`. Raises
    Unsupported; its decode() and finish() raise only CodingError.
    """
    tokens = [token.strip().lower() for token in (content_encoding or "").split(",")]
    stages = [_open(token) for token in reversed(tokens) if token and token != "identity"]
    return _Chain(stages) if stages else None
