"""How `toolslim serve` writes its log: logging's own lines, made cheap enough to write one per
request (stdlib only; nothing here knows about HTTP)."""

from __future__ import annotations

import logging
import time
from typing import Final, TextIO

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
    # The format shows none of the caller, thread or process, and looking them up was a third
    # of each request's log call (the logging HOWTO's "Optimization" settings).
    logging._srcfile = None
    logging.logThreads = False
    logging.logProcesses = False
    logging.logMultiprocessing = False
    return handler


class LineFormatter(logging.Formatter):
    """logging's own line, with its date and time formatted once a second instead of once a
    line (time.strftime was 4 us of each request's log call, measured in the proxy)."""

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
        Logger, Handler and Formatter) cost the proxy ~20 us per request in situ. The caller
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
