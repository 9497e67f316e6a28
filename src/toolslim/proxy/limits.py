"""Client connection limits: how connections are let in and held to nginx-like limits, so that
a slow, idle or hostile client can never lock out one that sends its request promptly.

aiohttp runs each connection; `ConnectionLimits` wraps its protocol to see a connection open,
send bytes and close, and it marks the time a request is being handled (`handling`). It holds: a
time for a client to send complete request headers, a keep-alive idle time, the number of
open connections (at the limit a slow or idle one makes room), a budget for buffered request
bodies, and aiohttp's server log, which would quote a malformed request.
"""

from __future__ import annotations

import asyncio
import logging
import resource
import socket
import sys
from collections import OrderedDict
from dataclasses import dataclass
from enum import Enum
from typing import Any, Final, cast

from aiohttp import web
from aiohttp.http_exceptions import HttpProcessingError

from toolslim.config.settings import DEFAULTS, Settings
from toolslim.observe import logs
from toolslim.observe.stats import ConnectionClose, Stats
from toolslim.proxy.budget import Budget, BufferBudget

log = logging.getLogger("toolslim.proxy.limits")

# The settings' defaults (config.OPTIONS): nginx's client_header_timeout, client_body_timeout
# (the gap between two reads) and keepalive_timeout.
HEADERS_SECONDS: Final[float] = DEFAULTS["timeouts.client_headers"]
BODY_IDLE_SECONDS: Final[float] = DEFAULTS["timeouts.client_body_idle"]
KEEPALIVE_SECONDS: Final[float] = DEFAULTS["timeouts.client_keepalive"]
MAX_BUFFERED_BYTES: Final[int] = DEFAULTS["max_buffered_bytes"]
# Descriptors kept for everything that is not a connection: the listener, the event loop's
# own, stderr, capture files, the threads' wake-up pipes, the tokenizer's files.
FILES_RESERVED: Final = 64
_UNLIMITED_FILES: Final = 1 << 20  # what RLIM_INFINITY counts as

# At the limit with nothing idle to close: the answer before closing (it is written before
# the request is read, so it names no API and has no error shape).
_REFUSED: Final = (
    b"HTTP/1.1 503 Service Unavailable\r\nContent-Type: text/plain\r\nContent-Length: 41\r\n"
    b"Connection: close\r\n\r\ntoolslim is at its connection limit; retry"
)


@dataclass(frozen=True, slots=True)
class ClientLimits:
    """Seconds and counts clients are held to. `max_connections` None derives it from
    the process's descriptor limit (`derived_max_connections`)."""

    headers: float = HEADERS_SECONDS
    body_idle: float = BODY_IDLE_SECONDS
    keepalive: float = KEEPALIVE_SECONDS
    max_connections: int | None = None
    max_buffered_bytes: int = MAX_BUFFERED_BYTES

    @classmethod
    def of(cls, settings: Settings) -> ClientLimits:
        """One serving process's limits: with workers, each gets its share of a configured
        `max_connections` (auto derives from each worker's own descriptor limit, which is per
        process), while `max_buffered_bytes` stays the host's (see `HostBudget`)."""
        timeouts = settings.timeouts
        connections = settings.max_connections
        if connections is not None:
            connections = max(1, connections // max(1, settings.workers))
        return cls(
            timeouts.client_headers,
            timeouts.client_body_idle,
            timeouts.client_keepalive,
            connections,
            settings.max_buffered_bytes,
        )


def derived_max_connections(files: int | None = None) -> int:
    """Client connections that `files` descriptors (default: RLIMIT_NOFILE's soft limit)
    allow: half of what the reserve leaves, since a request being forwarded holds an upstream
    connection too."""
    if files is None:
        files = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    if files == resource.RLIM_INFINITY or files < 0:
        files = _UNLIMITED_FILES
    return max(1, (files - FILES_RESERVED) // 2)


class State(Enum):
    READING = "reading"  # has not sent complete request headers yet (or nothing at all)
    BUSY = "busy"  # a request is being handled (a WebSocket: for as long as it is open)
    IDLE = "idle"  # keep-alive, between requests
    CLOSING = "closing"  # closed by the limits, not yet gone


class Connection(asyncio.Protocol):
    """One client connection: aiohttp's protocol inside, its limits' state around it.
    Every call is handed on; the limits only watch (and closes the transport)."""

    __slots__ = ("_limits", "inner", "since", "state", "transport")

    def __init__(self, limits: ConnectionLimits, inner: asyncio.Protocol) -> None:
        self._limits = limits
        self.inner: asyncio.Protocol | None = inner
        self.transport: asyncio.Transport | None = None
        self.state = State.READING
        self.since = 0.0  # when it entered its state (the limits' loop clock)

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # A stream transport (write, close), whatever its class: uvloop's are not asyncio's.
        self.transport = cast(asyncio.Transport, transport)
        if not self._limits.arrived(self):
            self.inner = None  # refused: aiohttp never hears of it
            return
        assert self.inner is not None
        self.inner.connection_made(transport)

    def data_received(self, data: bytes) -> None:
        if self.state is State.IDLE:
            self._limits.reading(self)
        if self.inner is not None:
            self.inner.data_received(data)

    def eof_received(self) -> bool | None:
        return self.inner.eof_received() if self.inner is not None else None

    def connection_lost(self, exc: Exception | None) -> None:
        self._limits.gone(self)
        if self.inner is not None:
            self.inner.connection_lost(exc)

    def pause_writing(self) -> None:
        if self.inner is not None:
            self.inner.pause_writing()

    def resume_writing(self) -> None:
        if self.inner is not None:
            self.inner.resume_writing()


class ConnectionLimits:
    """The client connections of one serving process, and the limits they are held to.

    `listen` serves aiohttp's server through the limits; `handling` (from the app's middleware)
    marks each request's handling. Connections that have not sent complete request headers and idle
    keep-alive ones wait in two queues, oldest first: a round every `period` seconds closes
    those past their limit, and at the connection limit the oldest of them makes room (see
    `_make_room`).
    """

    def __init__(self, limits: ClientLimits, stats: Stats, budget: Budget | None = None) -> None:
        self.limits = limits
        self.stats = stats
        self.max_connections = limits.max_connections or derived_max_connections()
        # A worker's is the host's, shared with the other workers.
        self.budget: Budget = budget or BufferBudget(limits.max_buffered_bytes)
        self.open = 0  # connections let in and not closed yet
        self.busy = 0  # of them, handling a request
        self.draining = False
        self._reading: OrderedDict[Connection, None] = OrderedDict()
        self._idle: OrderedDict[Connection, None] = OrderedDict()
        self._quiet: asyncio.Event | None = None  # set when nothing is busy while draining
        self._servers: list[asyncio.Server] = []
        self._loop: asyncio.AbstractEventLoop | None = None
        self._timer: asyncio.TimerHandle | None = None
        self.period = min(1.0, limits.headers / 4, limits.keepalive / 4)
        self._throttle = logs.Throttle(log)

    # --- serving -----------------------------------------------------------------------------

    async def listen(
        self,
        server: web.Server,
        host: str | None = None,
        port: int = 0,
        *,
        sock: socket.socket | None = None,
        backlog: int = 1024,
    ) -> None:
        """Accept connections on host:port (each address it resolves to), or on a listening
        `sock` (taken over: closed when listening stops), for aiohttp's `server` (an
        AppRunner's `.server`), through the limits."""
        loop = self._loop = asyncio.get_running_loop()

        def factory() -> Connection:
            return Connection(self, server())

        if sock is None:
            socks = listening(loop, host, port, backlog)
        else:
            socks = [sock if isinstance(sock, PacedListener) else PacedListener(loop, sock)]
        for listener in socks:
            self._servers.append(await loop.create_server(factory, sock=listener, backlog=backlog))
        if self._timer is None:
            self._timer = loop.call_later(self.period, self._round)

    def gauges(self) -> dict[str, int]:
        """The connections now, as Stats reads them (stats.CONNECTION_GAUGES)."""
        return {
            "open": self.open,
            "busy": self.busy,
            "max": self.max_connections,
            "buffered_bytes": self.budget.own,  # the workers' add up to the host's
            "max_buffered_bytes": self.budget.capacity,
        }

    @property
    def addresses(self) -> list[Any]:
        """The addresses listened on (host, port, ...)."""
        return [s.getsockname() for server in self._servers for s in server.sockets]

    def stop_listening(self) -> None:
        """Accept no more connections (those open stay)."""
        for server in self._servers:
            server.close()

    def drain(self) -> None:
        """Shutdown: close every connection that is not handling a request now. (Those that
        are close once their response is written: aiohttp's `Server.pre_shutdown`.)"""
        self.draining = True
        for queue in (self._reading, self._idle):
            while queue:
                connection, _ = queue.popitem(last=False)
                self._close(connection)

    async def quiet(self) -> None:
        """Return once no connection is handling a request (call after `drain`)."""
        if self.busy:
            self._quiet = asyncio.Event()
            await self._quiet.wait()

    def close(self) -> None:
        """Stop the rounds (the end of serving)."""
        self.stop_listening()
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def handler_args(self) -> dict[str, Any]:
        """What aiohttp's protocol is built with: the log that never quotes a request, and
        its own keep-alive timer as a backstop that the limits' rounds always beat."""
        return {
            "logger": ServerLog(log, self._throttle),
            "keepalive_timeout": self.limits.keepalive + self.limits.headers,
        }

    def handling(self, request: web.Request) -> Connection | None:
        """Mark the request's connection busy while the request is handled, until `handled`;
        the connection, or None for one that did not come through the limits (as in tests
        that serve the app themselves) or is closing. The app's one middleware calls both."""
        transport = request.transport
        connection = transport.get_protocol() if transport is not None else None
        if not isinstance(connection, Connection) or connection.state is State.CLOSING:
            return None
        self._busy(connection)
        return connection

    def handled(self, connection: Connection) -> None:
        """The request `handling` marked is handled (its response returned)."""
        self._done(connection)

    # --- what the connections report -------------------------------------------------------

    def arrived(self, connection: Connection) -> bool:
        """A new connection: let it in (making room at the limit), or refuse it."""
        if self.draining:
            self._refuse(connection)
            return False
        if self.open >= self.max_connections and not self._make_room():
            self._refuse(connection)
            return False
        self.open += 1
        self._enter(connection, State.READING, self._reading)
        return True

    def reading(self, connection: Connection) -> None:
        """An idle connection sent the first bytes of its next request."""
        if connection in self._idle:  # (when draining it is in no queue: aiohttp closes it)
            del self._idle[connection]
            self._enter(connection, State.READING, self._reading)

    def gone(self, connection: Connection) -> None:
        """The connection closed, by either side."""
        state = connection.state
        if state is State.CLOSING:  # closed by the limits, and counted then
            return
        self._reading.pop(connection, None)
        self._idle.pop(connection, None)
        if state is State.BUSY:
            self._not_busy()
        self.open -= 1
        connection.state = State.CLOSING

    def _busy(self, connection: Connection) -> None:
        if connection.state is State.READING:
            del self._reading[connection]
        elif connection.state is State.IDLE:  # a pipelined request, parsed while busy
            del self._idle[connection]
        else:
            return
        connection.state = State.BUSY
        self.busy += 1

    def _done(self, connection: Connection) -> None:
        if connection.state is not State.BUSY:
            return  # closed meanwhile
        self._not_busy()
        if self.draining:
            # Not closed here: aiohttp writes a returned response after this, then closes.
            connection.state = State.IDLE
        else:
            self._enter(connection, State.IDLE, self._idle)

    def _not_busy(self) -> None:
        self.busy -= 1
        if not self.busy and self._quiet is not None:
            self._quiet.set()

    # --- closing -----------------------------------------------------------------------------

    def _enter(
        self, connection: Connection, state: State, queue: OrderedDict[Connection, None]
    ) -> None:
        connection.state = state
        connection.since = self._now()
        queue[connection] = None

    def _now(self) -> float:
        loop = self._loop or asyncio.get_running_loop()
        return loop.time()

    def _make_room(self) -> bool:
        """Close the connection that has spent longest sending its request headers, or when
        every one has sent them, the one idle longest between requests.

        Not the oldest of both: one turn of the loop accepts up to a backlog of connections,
        so under a flood of them, a keep-alive client between two quick requests would be
        older than every newcomer. A client that has sent a whole request is the one that
        proved it is prompt.
        """
        queue = self._reading or self._idle
        if not queue:
            return False
        oldest, _ = queue.popitem(last=False)
        self._close(oldest, "evicted")
        self._throttle.log(
            logging.WARNING,
            "evicted",
            f"at the connection limit ({self.max_connections}): closed the connection that "
            "waited longest without a request (raise the descriptor limit or max_connections)",
        )
        return True

    def _refuse(self, connection: Connection) -> None:
        self.stats.record_connection_closed("refused")
        connection.state = State.CLOSING
        if connection.transport is not None:
            connection.transport.write(_REFUSED)
            connection.transport.close()
        if not self.draining:
            self._throttle.log(
                logging.WARNING,
                "refused",
                f"at the connection limit ({self.max_connections}) with every connection "
                "busy: refused a new one with 503",
            )

    def _close(self, connection: Connection, reason: ConnectionClose | None = None) -> None:
        """Close a connection the limits have taken out of its queue."""
        connection.state = State.CLOSING
        self.open -= 1
        if reason is not None:
            self.stats.record_connection_closed(reason)
        if connection.transport is not None:
            connection.transport.close()

    def _round(self) -> None:
        """Close the connections past their limit: the queues are oldest first."""
        loop = self._loop
        assert loop is not None
        now = loop.time()
        rounds: tuple[tuple[dict[Connection, None], float, ConnectionClose], ...] = (
            (self._reading, self.limits.headers, "headers_timeout"),
            (self._idle, self.limits.keepalive, "keepalive_timeout"),
        )
        for queue, limit, reason in rounds:
            while queue:
                connection = next(iter(queue))
                if connection.since + limit > now:
                    break
                del queue[connection]
                self._close(connection, reason)
        self._timer = loop.call_later(self.period, self._round)


# Connections accepted per turn of the event loop; the rest wait in the kernel's queue for the
# next turn. asyncio accepts up to a whole backlog in one callback, each with a protocol, a
# parser and a task to make, so a burst of connects would stall every client (figures in
# bench/README.md). nginx accepts one per event by default (multi_accept off).
ACCEPTS_PER_TURN: Final = 8


class PacedListener(socket.socket):
    """A listening socket whose accept() says "nothing pending" after ACCEPTS_PER_TURN
    connections in one turn of the loop (the loop's accept callback stops there, and the
    socket is still readable next turn). uvloop accepts in C and is not paced."""

    def __init__(self, loop: asyncio.AbstractEventLoop, sock: socket.socket) -> None:
        super().__init__(sock.family, sock.type, sock.proto, sock.detach())
        self._loop = loop
        self._accepted = 0

    def accept(self) -> tuple[socket.socket, Any]:
        if self._accepted >= ACCEPTS_PER_TURN:
            raise BlockingIOError
        if not self._accepted:
            self._loop.call_soon(self._next_turn)
        accepted = super().accept()
        self._accepted += 1
        return accepted

    def _next_turn(self) -> None:
        self._accepted = 0


def listening(
    loop: asyncio.AbstractEventLoop, host: str | None, port: int, backlog: int
) -> list[PacedListener]:
    """A bound, listening, paced socket for each address `host` resolves to (as asyncio's
    create_server binds them: SO_REUSEADDR, IPv6 sockets IPv6 only)."""
    found = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    socks: list[PacedListener] = []
    try:
        for family, kind, proto, _, address in dict.fromkeys(found):
            sock = socket.socket(family, kind, proto)
            socks.append(PacedListener(loop, sock))
            socks[-1].setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            if family == socket.AF_INET6:
                socks[-1].setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
            socks[-1].bind(address)
            socks[-1].listen(backlog)
            socks[-1].setblocking(False)
    except OSError:
        for sock in socks:
            sock.close()
        raise
    return socks


class ServerLog(logging.LoggerAdapter[logging.Logger]):
    """Stands in for aiohttp's server logger, which logs a malformed request's raw bytes
    (credentials, query strings) with a traceback at ERROR: a malformed request is one short
    line, at most one a second; anything else is its message and a traceback without
    exception messages (logs.safe_traceback)."""

    def __init__(self, logger: logging.Logger, throttle: logs.Throttle) -> None:
        super().__init__(logger, {})
        self._throttle = throttle

    def log(self, level: int, msg: object, *args: object, **kwargs: Any) -> None:
        exc = _exception(kwargs.get("exc_info"))
        text = str(msg) % args if args else str(msg)  # aiohttp's: fixed words and an address
        if isinstance(exc, HttpProcessingError):
            status = exc.code or 400
            line = f"malformed request ({type(exc).__name__}), answered {status}"
            if " from " in text:
                line += " to" + text[text.index(" from ") + 5 :]
            self._throttle.log(logging.INFO, "malformed", line)
        elif level >= logging.WARNING:
            self.logger.log(level, "%s", text, exc_info=exc)
        else:
            self.logger.log(level, "%s", text)


def _exception(exc_info: object) -> BaseException | None:
    if isinstance(exc_info, BaseException):
        return exc_info
    if isinstance(exc_info, tuple) and len(exc_info) == 3:
        value = exc_info[1]
        return value if isinstance(value, BaseException) else None
    if exc_info:
        return sys.exc_info()[1]
    return None


CONNECTION_LIMITS: Final = web.AppKey("connection_limits", ConnectionLimits)
