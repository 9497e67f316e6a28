"""The serving log: logging's own lines, timestamps formatted once a second, written in batches."""

from __future__ import annotations

import io
import logging
from unittest import mock

import pytest

from toolslim.observe import logs
from toolslim.observe.logs import FORMAT, BatchedLines, LineFormatter

NOW = 1_796_032_222.0


def record(message: str, level: int = logging.INFO, at: float = NOW) -> logging.LogRecord:
    made = logging.LogRecord("toolslim.proxy.app", level, __file__, 1, message, None, None)
    made.created = at
    made.msecs = (at - int(at)) * 1000
    return made


def handler_at(stream: io.StringIO, written: float = NOW) -> BatchedLines:
    with mock.patch("time.time", return_value=written):  # as if it last wrote at `written`
        handler = BatchedLines(stream)
    handler.setFormatter(logging.Formatter("%(levelname)s %(message)s"))
    return handler


def test_log_lines_carry_the_same_timestamp_as_loggings_own_formatter() -> None:
    ours, theirs = LineFormatter(FORMAT), logging.Formatter(FORMAT)
    for offset in (0.0, 0.0004, 0.5, 0.9996, 1.0, 1.25, 61.999, 3600.5, 0.25):  # also backwards
        line = record("m", at=NOW + offset)
        assert ours.format(line) == theirs.format(line)


def test_info_lines_wait_until_a_second_after_the_last_write() -> None:
    stream = io.StringIO()
    handler = handler_at(stream)
    handler.handle(record("one", at=NOW + 0.2))
    handler.handle(record("two", at=NOW + 0.9))
    assert stream.getvalue() == ""
    handler.handle(record("three", at=NOW + 1.0))
    assert stream.getvalue() == "INFO one\nINFO two\nINFO three\n"


def test_a_warning_goes_out_at_once_behind_the_lines_waiting_before_it() -> None:
    stream = io.StringIO()
    handler = handler_at(stream)
    handler.handle(record("request", at=NOW + 0.1))
    handler.handle(record("component failed", logging.WARNING, at=NOW + 0.2))
    assert stream.getvalue() == "INFO request\nWARNING component failed\n"


def test_lines_go_out_once_a_batch_is_full() -> None:
    stream = io.StringIO()
    handler = handler_at(stream)
    line = "x" * 1000
    fit = logs.FLUSH_CHARS // 1006  # "INFO " + line + "\n" is 1006 characters
    for _ in range(fit):
        handler.handle(record(line, at=NOW + 0.1))
    assert stream.getvalue() == ""
    handler.handle(record(line, at=NOW + 0.1))  # now over FLUSH_CHARS
    assert stream.getvalue() == f"INFO {line}\n" * (fit + 1)


def test_flush_writes_what_waits_and_nothing_twice() -> None:
    stream = io.StringIO()
    handler = handler_at(stream)
    handler.handle(record("one", at=NOW + 0.1))
    handler.flush()
    handler.flush()
    assert stream.getvalue() == "INFO one\n"


class Broken(io.StringIO):
    def write(self, text: str) -> int:
        raise BrokenPipeError("stderr is gone")


def test_a_broken_stream_drops_the_lines_and_never_raises() -> None:
    handler = handler_at(Broken())
    handler.handle(record("one", at=NOW + 0.1))
    handler.handle(record("two", logging.ERROR, at=NOW + 0.2))  # would raise if not caught
    handler.flush()
    repaired = io.StringIO()
    handler.setStream(repaired)
    handler.flush()
    assert repaired.getvalue() == ""  # dropped, not kept waiting for a stream that works


def test_a_line_that_cannot_be_formatted_is_reported_not_raised(
    capsys: pytest.CaptureFixture[str],
) -> None:
    stream = io.StringIO()
    handler = handler_at(stream)
    bad = logging.LogRecord("toolslim.proxy.app", logging.INFO, __file__, 1, "%d", ("x",), None)
    handler.handle(bad)  # logging.raiseExceptions: a traceback on stderr, never an exception
    handler.flush()
    assert stream.getvalue() == ""
    assert "TypeError" in capsys.readouterr().err


async def test_serving_flushes_a_quiet_servers_lines_about_once_a_second(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import asyncio

    from toolslim.serve.serving import flush_every_second

    monkeypatch.setattr(logs, "FLUSH_SECONDS", 0.05)
    stream = io.StringIO()
    handler = handler_at(stream, written=NOW + 10)  # no line will find a second gone by
    handler.handle(record("last request", at=NOW + 10.01))
    assert stream.getvalue() == ""
    flushing = asyncio.create_task(flush_every_second(handler))
    try:
        await asyncio.sleep(0.3)
    finally:
        flushing.cancel()
    assert stream.getvalue() == "INFO last request\n"


@pytest.mark.parametrize("at", [NOW, NOW + 0.0004, NOW + 0.9996, NOW + 61.25])
def test_an_info_line_written_directly_is_the_line_logging_writes(
    at: float, monkeypatch: pytest.MonkeyPatch
) -> None:
    direct, through_logging = io.StringIO(), io.StringIO()
    handlers = [BatchedLines(direct), BatchedLines(through_logging)]
    for handler in handlers:
        handler.setFormatter(LineFormatter(FORMAT))
    # logging reads the clock as time.time() (3.11) or time.time_ns() (3.12+): both read `at`
    monkeypatch.setattr(logs.time, "time", lambda: at)
    monkeypatch.setattr(logs.time, "time_ns", lambda: round(at * 1e9))
    message = "POST /v1/messages status=200 100% done"
    handlers[0].info("toolslim.proxy.app", message)
    handlers[1].handle(
        logging.LogRecord("toolslim.proxy.app", logging.INFO, __file__, 1, "%s", (message,), None)
    )
    for handler in handlers:
        handler.flush()
    assert direct.getvalue() == through_logging.getvalue()
    assert direct.getvalue().endswith(
        " INFO toolslim.proxy.app: POST /v1/messages status=200 100% done\n"
    )


# --- nothing a request carries, whatever fails -------------------------------------------


def test_a_traceback_shows_frames_and_types_but_no_exception_message() -> None:
    stream = io.StringIO()
    handler = BatchedLines(stream)
    handler.setFormatter(LineFormatter(FORMAT))
    logger = logging.getLogger("toolslim.test_logs.traceback")
    logger.addHandler(handler)
    logger.propagate = False
    secret = "sk-ant-" + "0123456789"  # only the frames' source lines are code
    try:
        try:
            {}[secret]
        except KeyError as exc:
            raise ValueError(f"x-api-key: {secret}") from exc
    except ValueError:
        logger.exception("failed on %s", "/v1/messages")
    finally:
        logger.removeHandler(handler)
    handler.flush()
    text = stream.getvalue()
    assert "ERROR toolslim.test_logs.traceback: failed on /v1/messages" in text
    assert "Traceback (most recent call last):" in text
    assert "\nKeyError\n" in text and text.rstrip().endswith("ValueError")
    assert "direct cause" in text
    assert secret not in text


def test_an_os_error_is_described_by_its_errno_not_its_message() -> None:
    assert logs.describe(FileNotFoundError(2, "No such file or directory", "/secret")) == (
        "FileNotFoundError [Errno 2] No such file or directory"
    )
    assert logs.describe(ValueError("sk-ant-secret")) == "ValueError"


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_a_flood_is_one_line_a_second_and_the_next_line_counts_the_rest(
    caplog: pytest.LogCaptureFixture,
) -> None:
    clock = Clock()
    throttle = logs.Throttle(logging.getLogger("toolslim.test"), clock=clock)
    with caplog.at_level(logging.INFO, "toolslim.test"):
        written = [throttle.log(logging.INFO, "malformed", "malformed request") for _ in range(5)]
        clock.now += 1.0
        throttle.log(logging.INFO, "malformed", "malformed request")
        throttle.log(logging.INFO, "accept", "cannot accept")  # each kind has its own second
    assert written == [True, False, False, False, False]
    assert [r.getMessage() for r in caplog.records] == [
        "malformed request",
        "malformed request (4 more like it since the last such line)",
        "cannot accept",
    ]


async def test_failed_accepts_are_one_line_a_second_and_other_loop_errors_quote_no_repr(
    caplog: pytest.LogCaptureFixture,
) -> None:
    import asyncio

    logger = logging.getLogger("toolslim.test_loop")
    clock = Clock()
    handler = logs.LoopErrors(logger, logs.Throttle(logger, clock=clock))
    loop = asyncio.get_running_loop()
    full = OSError(24, "Too many open files")
    with caplog.at_level(logging.INFO, "toolslim.test_loop"):
        for _ in range(1000):
            handler(loop, {"message": logs.ACCEPT_FAILED, "exception": full})
        handler(
            loop,
            {
                "message": "Exception in callback <Handle data_received(b'x-api-key: sk-secret')>",
                "exception": ValueError("sk-secret"),
            },
        )
    messages = [r.getMessage() for r in caplog.records]
    assert messages == [
        "cannot accept a connection: OSError [Errno 24] Too many open files",
        "Exception in callback",
    ]
