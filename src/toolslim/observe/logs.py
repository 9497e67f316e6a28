"""How `toolslim serve` writes its log: logging's own lines, made cheap enough to write one per
request, that never show what an exception's message might quote, and at most one a second of
each flood (stdlib only; nothing here knows about HTTP)."""

from __future__ import annotations

import asyncio
import logging
import re
import time
import traceback
from collections import Counter
from collections.abc import Callable
from types import TracebackType
from typing import Any, Final, TextIO

FORMAT: Final = "%(asctime)s %(levelname)s %(name)s: %(message)s"
# A line waits at most this long, and the lines waiting at most this many characters.
FLUSH_SECONDS: Final = 1.0
FLUSH_CHARS: Final = 64 * 1024


def configure(level: str) -> BatchedLines:
    """Log `toolslim.*` at `level` to stderr in batches; the handler, for its owner to flush."""
    handler = BatchedLines()
    handler.setFormatter(LineFormatter(FORMAT))
    logging.basicConfig(handlers=[handler])
    logging.getLogger("toolslim").setLevel(level.upper())
    # The format shows none of the thread or process (the logging HOWTO's "Optimization"
    # settings); the request lines skip records altogether (BatchedLines.info).
    logging.logThreads = False
    logging.logProcesses = False
    logging.logMultiprocessing = False
    return handler


def describe(exc: BaseException) -> str:
    """An exception as a log line may show it: its type, and an OSError's errno text.

    Never its message: a parse error quotes the raw request (credentials, query strings), and
    a KeyError or ValueError raised over a body quotes the body.
    """
    name = type(exc).__qualname__
    module = type(exc).__module__
    text = name if module == "builtins" else f"{module}.{name}"
    if isinstance(exc, OSError) and exc.errno is not None and exc.strerror:
        text += f" [Errno {exc.errno}] {exc.strerror}"
    return text


def safe_traceback(exc: BaseException) -> str:
    """`traceback.format_exception` with every exception of the chain shown by `describe`:
    the frames (file, line, function, source line) and types, no message."""
    chain: list[tuple[BaseException, str]] = []
    current: BaseException | None = exc
    joint = ""
    while current is not None and all(current is not seen for seen, _ in chain):
        chain.append((current, joint))
        if current.__cause__ is not None:
            current, joint = current.__cause__, _CAUSE
        elif current.__context__ is not None and not current.__suppress_context__:
            current, joint = current.__context__, _CONTEXT
        else:
            current = None
    parts: list[str] = []
    for link, joint in reversed(chain):  # oldest first, as Python prints a chain
        if link.__traceback__ is not None:
            parts.append("Traceback (most recent call last):\n")
            parts.extend(traceback.format_list(traceback.extract_tb(link.__traceback__)))
        parts.append(describe(link) + "\n")
        if joint:
            parts.append(joint)
    return "".join(parts).rstrip("\n")


_CAUSE: Final = "\nThe above exception was the direct cause of the following exception:\n\n"
_CONTEXT: Final = "\nDuring handling of the above exception, another exception occurred:\n\n"


class LineFormatter(logging.Formatter):
    """logging's own line, with its date and time formatted once a second instead of once a
    line (time.strftime was a large part of each request's log call), and tracebacks by
    `safe_traceback`."""

    def formatException(
        self,
        ei: tuple[type[BaseException], BaseException, TracebackType | None]
        | tuple[None, None, None],
    ) -> str:
        _, value, _ = ei
        return "" if value is None else safe_traceback(value)

    _second = -1
    _stamp = ""

    def formatTime(self, record: logging.LogRecord, datefmt: str | None = None) -> str:
        if datefmt is not None:
            return super().formatTime(record, datefmt)
        return self.stamp(record.created, record.msecs)

    def stamp(self, created: float, msecs: float) -> str:
        """`formatTime` of a record made at `created` (seconds since the epoch)."""
        second = int(created)
        if second != self._second:
            self._stamp = time.strftime(self.default_time_format, self.converter(second))
            self._second = second
        msec_format = self.default_msec_format
        return msec_format % (self._stamp, msecs) if msec_format else self._stamp


class BatchedLines(logging.StreamHandler[TextIO]):
    """A StreamHandler that writes its lines in batches, as nginx's `access_log buffer=
    flush=` does: a write and a flush per request line cost a system call each.

    A WARNING or worse goes out at once, behind the lines waiting before it. Otherwise lines
    go out when FLUSH_CHARS wait, or with the first line a second after the last write; the
    owner calls `flush()` about once a second so a quiet server's last lines still appear, and
    logging flushes every handler at exit.
    """

    def __init__(self, stream: TextIO | None = None) -> None:
        super().__init__(stream)
        self._waiting: list[str] = []
        self._chars = 0
        self._written = time.time()  # compared with LogRecord.created, also time.time()

    def emit(self, record: logging.LogRecord) -> None:
        try:
            line = self.format(record) + self.terminator
        except Exception:
            self.handleError(record)
            return
        self._add(line, record.created, record.levelno >= logging.WARNING)

    def info(self, name: str, message: str) -> None:
        """Write the line `emit` writes for an INFO record of logger `name` with this message
        (the FORMAT of `configure`), without making the record.

        For the one line per request: logging's way to it (a LogRecord, a dozen calls through
        Logger, Handler and Formatter) cost more than the rest of the line's work. The caller
        checks the logger's level; `configure` put no filter anywhere that this would skip.
        """
        created = time.time()
        formatter = self.formatter
        assert isinstance(formatter, LineFormatter)
        self.acquire()  # as emit formats: the formatter's stamp is shared with other threads
        try:
            stamp = formatter.stamp(created, (created - int(created)) * 1000)
            self._add(f"{stamp} INFO {name}: {message}{self.terminator}", created, False)
        finally:
            self.release()

    def _add(self, line: str, created: float, urgent: bool) -> None:
        self._waiting.append(line)
        self._chars += len(line)
        if urgent or self._chars >= FLUSH_CHARS or created - self._written >= FLUSH_SECONDS:
            self.flush()

    def flush(self) -> None:
        self.acquire()
        try:
            if self._waiting:
                lines, self._waiting, self._chars = "".join(self._waiting), [], 0
                self._written = time.time()
                self.stream.write(lines)
                self.stream.flush()
        except (OSError, ValueError):  # a closed or broken stderr: the lines have nowhere to go
            pass
        finally:
            self.release()


class Throttle:
    """At most one line a second of each kind, the next one saying how many were not written:
    a flood of malformed requests or failed accepts costs one line a second, not a disk."""

    def __init__(
        self,
        logger: logging.Logger,
        interval: float = FLUSH_SECONDS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._logger = logger
        self._interval = interval
        self._clock = clock
        self._last: dict[str, float] = {}
        self._unwritten: Counter[str] = Counter()

    def log(self, level: int, kind: str, message: str) -> bool:
        """Write `message` unless a line of `kind` went out less than a second ago (then count
        it); whether it was written. `kind` is one of a few fixed words, never data."""
        now = self._clock()
        last = self._last.get(kind)
        if last is not None and now - last < self._interval:
            self._unwritten[kind] += 1
            return False
        self._last[kind] = now
        if unwritten := self._unwritten.pop(kind, 0):
            message += f" ({unwritten} more like it since the last such line)"
        self._logger.log(level, "%s", message)
        return True


# What the event loop's own messages are made of before a repr that may quote data: "Exception
# in callback <Handle ...(b'...')>", "Task exception was never retrieved".
_REPR: Final = re.compile(r"""[<({'"]""")
# asyncio.selector_events reports a failed accept() with this message, once per pending
# connection per retry: 280,572 lines in 18 s at 1,024 descriptors (issue 16).
ACCEPT_FAILED: Final = "socket.accept() out of system resource"


class LoopErrors:
    """The event loop's exception handler while serving: a failed accept at most once a second
    with a count, anything else as its message's head and a safe traceback (the default
    handler prints the reprs of the task, the protocol and the exception, which may quote a
    request)."""

    def __init__(self, logger: logging.Logger, throttle: Throttle) -> None:
        self._logger = logger
        self._throttle = throttle

    def __call__(self, loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
        exc = context.get("exception")
        message = str(context.get("message") or "unexpected error in the event loop")
        if message == ACCEPT_FAILED:
            why = describe(exc) if isinstance(exc, BaseException) else "no reason given"
            self._throttle.log(logging.ERROR, "accept", f"cannot accept a connection: {why}")
            return
        head = _REPR.split(message, maxsplit=1)[0].strip() or "unexpected error in the event loop"
        if isinstance(exc, BaseException):
            self._logger.error("%s", head, exc_info=exc)
        else:
            self._logger.error("%s", head)
