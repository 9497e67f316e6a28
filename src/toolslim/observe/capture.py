"""Request capture for `toolslim serve --capture DIR`: JSON Lines written by one background
thread, credentials redacted, rotated by size; each line can carry the tool calls its answer
made. `record()`, `hold()` and `Held.answered()` never block and never raise.

Must not import aiohttp: the app hands plain values in.
"""

from __future__ import annotations

import base64
import hashlib
import logging
import queue
import re
import threading
from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import BinaryIO, NamedTuple
from urllib.parse import unquote_plus

import orjson

from toolslim.core.owners import server_of

log = logging.getLogger("toolslim.observe.capture")

VERSION = 1
REDACTED = "[redacted]"
FILE_PREFIX = "toolslim-capture-"
MIB = 1024 * 1024

# A header or query parameter whose lower-cased name contains one of these is redacted: this
# covers authorization, x-api-key, x-goog-api-key, api-key, (set-)cookie, proxy-authorization,
# and Gemini's `?key=`, `api_key`, `access_token`.
CREDENTIAL_PARTS = (
    "auth",
    "cookie",
    "credential",
    "key",
    "password",
    "secret",
    "token",
)

_FILE_NAME = re.compile(r"^toolslim-capture-(\d{8}T\d{6}Z)-(\d+)\.jsonl$")

Headers = Mapping[str, str] | Iterable[tuple[str, str]]
# A tool call as the answer names it: (name, Responses namespace or None).
Call = tuple[str, str | None]


class _Request(NamedTuple):
    ts: str
    method: str
    path: str
    query: str
    upstream: str
    headers: list[tuple[str, str]]
    body: bytes
    forwarded: bytes
    calls: Sequence[Call] | None = None  # None: the answer was not read (or not awaited)


_STOP = object()


def is_credential(name: str) -> bool:
    """Whether a header or query parameter named `name` carries a credential."""
    lower = name.lower()
    return any(part in lower for part in CREDENTIAL_PARTS)


def redact_headers(headers: Iterable[tuple[str, str]]) -> dict[str, str]:
    """Lower-cased names, credentials replaced; repeated headers joined with ", " (RFC 9110
    §5.3) so the JSON object never holds the same key twice."""
    out: dict[str, str] = {}
    for name, value in headers:
        key = str(name).lower()
        shown = REDACTED if is_credential(key) else str(value)
        out[key] = f"{out[key]}, {shown}" if key in out else shown
    return out


def redact_query(query: str) -> str:
    """The query string with credential parameters' values replaced; other bytes untouched."""
    query = query.removeprefix("?")
    if not query:
        return ""
    parts = []
    for part in query.split("&"):
        name, sep, _ = part.partition("=")
        decoded = unquote_plus(name).lower()
        if is_credential(decoded):
            part = f"{name}={REDACTED}" if sep else f"{name}"
        parts.append(part)
    return "&".join(parts)


def _encoded(field: str, data: bytes) -> dict[str, str]:
    """`{field: text}` when the bytes are UTF-8, else `{field_base64: ...}`."""
    try:
        return {field: data.decode("utf-8")}
    except UnicodeDecodeError:
        return {f"{field}_base64": base64.b64encode(data).decode("ascii")}


def capture_line(request: _Request, *, store_bodies: bool) -> bytes:
    """One JSON Lines record (with its newline) for a proxied request."""
    line: dict[str, object] = {
        "v": VERSION,
        "ts": request.ts,
        "method": request.method,
        "path": request.path,
        "query": redact_query(request.query),
        "upstream": request.upstream,
        "headers": redact_headers(request.headers),
        "body_sha256": hashlib.sha256(request.body).hexdigest(),
        "body_bytes": len(request.body),
        "forwarded_sha256": hashlib.sha256(request.forwarded).hexdigest(),
        "forwarded_bytes": len(request.forwarded),
    }
    if store_bodies:
        line.update(_encoded("body", request.body))
        if request.forwarded != request.body:
            line.update(_encoded("forwarded", request.forwarded))
    if request.calls is not None:
        line["calls"] = [_call(name, namespace) for name, namespace in request.calls]
    return orjson.dumps(line) + b"\n"


def _call(name: str, namespace: str | None) -> dict[str, str]:
    """One tool call of the answer: its name (and namespace) as the answer spells them, and
    the MCP server that owns it (`builtin` for the client's own tools)."""
    call = {"name": name, "server": server_of(name, namespace)}
    if namespace is not None:
        call["namespace"] = namespace
    return call


class Held:
    """A request `Recorder.hold()` took, written once its answer is read: `answered()` queues
    it with the answer's tool calls. A request never answered is never written."""

    __slots__ = ("_recorder", "_request")

    def __init__(self, recorder: Recorder, request: _Request) -> None:
        self._recorder = recorder
        self._request: _Request | None = request

    def answered(self, calls: Iterable[Call] | None) -> None:
        """Queue the request with the tool calls its answer made (`[]`: none; None: the answer
        was not read, as for a request that is no model call). Once; never raises."""
        request, self._request = self._request, None
        if request is None:
            return
        try:
            found = None if calls is None else [(str(n), ns) for n, ns in calls]
        except Exception:  # a request is still worth its line without its calls
            found = None
        self._recorder._enqueue(request._replace(calls=found))


class Recorder:
    """Appends each recorded request to `DIR/toolslim-capture-<start>-<n>.jsonl`.

    `record()` only enqueues (a full queue drops and counts in `dropped`); one writer thread,
    started on the first record, serializes, redacts and writes. `close()` flushes and joins.
    """

    def __init__(
        self,
        directory: str | Path,
        *,
        max_bytes: int = 64 * MIB,
        store_bodies: bool = True,
        keep_files: int = 10,
        queue_size: int = 1024,
        max_pending_bytes: int = 256 * MIB,
    ) -> None:
        if max_bytes < 1:
            raise ValueError(f"max_bytes must be at least 1, got {max_bytes}")
        if keep_files < 1:
            raise ValueError(f"keep_files must be at least 1, got {keep_files}")
        if queue_size < 1:
            raise ValueError(f"queue_size must be at least 1, got {queue_size}")
        self.directory = Path(directory)
        self.directory.mkdir(parents=True, exist_ok=True)  # fail at start-up, not per request
        self.max_bytes = max_bytes
        self.store_bodies = store_bodies
        self.keep_files = keep_files
        self.max_pending_bytes = max_pending_bytes
        self.dropped = 0  # requests not recorded: queue full, closed, or failed to enqueue
        self.written = 0  # lines written
        self.errors = 0  # lines lost to a serialization or disk error
        self._start = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
        self._queue: queue.Queue[object] = queue.Queue(queue_size)
        self._lock = threading.Lock()
        self._pending = 0  # body bytes waiting in the queue: bodies can be megabytes each
        self._closed = False
        self._thread: threading.Thread | None = None
        self._file: BinaryIO | None = None
        self._file_bytes = 0
        self._index = 0
        self._logged: set[str] = set()

    def record(
        self,
        *,
        method: str,
        path: str,
        query: str,
        upstream: str,
        headers: Headers,
        body: bytes,
        forwarded: bytes,
    ) -> None:
        """Queue one request for writing, with no answer read; returns at once, never raises."""
        held = self.hold(
            method=method,
            path=path,
            query=query,
            upstream=upstream,
            headers=headers,
            body=body,
            forwarded=forwarded,
        )
        if held is not None:
            held.answered(None)

    def hold(
        self,
        *,
        method: str,
        path: str,
        query: str,
        upstream: str,
        headers: Headers,
        body: bytes,
        forwarded: bytes,
    ) -> Held | None:
        """Take one request now (its time is now), to be queued by `Held.answered()` with the
        tool calls of its answer; None when it could not be taken (counted as dropped)."""
        try:
            pairs = list(headers.items() if isinstance(headers, Mapping) else headers)
            ts = datetime.now(UTC).isoformat(timespec="microseconds").replace("+00:00", "Z")
            return Held(self, _Request(ts, method, path, query, upstream, pairs, body, forwarded))
        except Exception:  # the request path must never see a capture failure
            with self._lock:
                self.dropped += 1
            self._log_once("enqueue", "capture: could not queue a request", exc_info=True)
            return None

    def _enqueue(self, request: _Request) -> None:
        try:
            size = len(request.body) + len(request.forwarded)
            with self._lock:
                if self._closed or self._pending + size > self.max_pending_bytes:
                    self.dropped += 1
                    return
                self._ensure_thread()
                self._queue.put_nowait(request)
                self._pending += size
        except queue.Full:
            with self._lock:
                self.dropped += 1
        except Exception:  # the request path must never see a capture failure
            with self._lock:
                self.dropped += 1
            self._log_once("enqueue", "capture: could not queue a request", exc_info=True)

    def close(self, timeout: float = 5.0) -> None:
        """Stop accepting records, write what is queued, close the file, join the writer."""
        with self._lock:
            self._closed = True
            thread = self._thread
        if thread is None:
            return
        try:
            self._queue.put(_STOP, timeout=timeout)
        except queue.Full:
            self._log_once("close", "capture: writer did not drain its queue before close")
        thread.join(timeout)

    def _ensure_thread(self) -> None:
        if self._thread is None:
            # Not a daemon: a daemon is killed mid-write at exit. close() stops it, and it
            # also stops by itself once the main thread has ended and the queue is empty.
            thread = threading.Thread(target=self._run, name="toolslim-capture")
            thread.start()
            self._thread = thread

    def _run(self) -> None:
        try:
            while True:
                try:
                    item = self._queue.get(timeout=0.5)
                except queue.Empty:
                    self._flush()
                    if not threading.main_thread().is_alive():
                        return
                    continue
                if item is _STOP:
                    return
                assert isinstance(item, _Request)
                with self._lock:
                    self._pending -= len(item.body) + len(item.forwarded)
                self._write(item)
                if self._queue.empty():
                    self._flush()
        finally:
            self._close_file()

    def _write(self, request: _Request) -> None:
        try:
            line = capture_line(request, store_bodies=self.store_bodies)
            if self._file is not None and self._file_bytes + len(line) > self.max_bytes:
                self._close_file()
            if self._file is None:
                self._open_next()
            assert self._file is not None
            self._file.write(line)
            self._file_bytes += len(line)
            self.written += 1
        except Exception:
            self.errors += 1
            self._log_once("write", "capture: could not write a request", exc_info=True)
            self._close_file()  # reopen a fresh file next time rather than append to a torn one

    def _open_next(self) -> None:
        while True:
            self._index += 1
            path = self.directory / f"{FILE_PREFIX}{self._start}-{self._index:04d}.jsonl"
            try:
                self._file = path.open("xb")  # never append to another run's file
                break
            except FileExistsError:
                continue
        self._file_bytes = 0
        self._prune()

    def _prune(self) -> None:
        """Keep the newest `keep_files` capture files in the directory (this run's and older)."""
        found = []
        for path in self.directory.iterdir():
            match = _FILE_NAME.match(path.name)
            if match is not None:
                found.append(((match.group(1), int(match.group(2))), path))
        found.sort()
        for _, path in found[: max(0, len(found) - self.keep_files)]:
            try:
                path.unlink()
            except OSError:
                self._log_once("prune", f"capture: could not delete {path}", exc_info=True)

    def _flush(self) -> None:
        if self._file is not None:
            try:
                self._file.flush()
            except OSError:
                self._log_once("flush", "capture: could not flush", exc_info=True)

    def _close_file(self) -> None:
        if self._file is not None:
            try:
                self._file.close()
            except OSError:
                self._log_once("close", "capture: could not close", exc_info=True)
            self._file = None

    def _log_once(self, kind: str, message: str, *, exc_info: bool = False) -> None:
        if kind not in self._logged:
            self._logged.add(kind)
            log.warning(message, exc_info=exc_info)
