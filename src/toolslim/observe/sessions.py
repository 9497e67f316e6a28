"""The drift sessions the workers of one host share (`drift.Sessions` in a SQLite file in their
directory), so that a session's catalogue changes are the same whichever workers its requests
reach. Must not import aiohttp or prometheus_client.

One write statement per request that carries a catalogue (11-14 us in a tight loop, about
55 us between real requests: bench/drift_bench.py --workers 2). It observes and never
forwards: a failing store costs that request's drift tracking, logged, and nothing else.
"""

from __future__ import annotations

import logging
import secrets
import sqlite3
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Final, TypeVar

import orjson

from toolslim.config.options import DRIFT_MAX_SESSIONS
from toolslim.core.facts import DIGEST_SIZE
from toolslim.observe import logs
from toolslim.observe.drift import KEPT_BYTES, Kept, Listed, Seen, visited

log = logging.getLogger("toolslim.observe.sessions")
T = TypeVar("T")

FILE: Final = "drift.sqlite"
# A worker waits this long for another's write (each lasts microseconds) before it gives up
# on one request's drift. It waits here, in short naps, not in SQLite's busy handler, whose
# first sleep is a whole millisecond of the event loop for a lock held some 10-50 us.
BUSY_SECONDS: Final = 0.05
_NAP_SECONDS: Final = 0.00005

_SCHEMA: Final = """
CREATE TABLE meta (key TEXT PRIMARY KEY, value) WITHOUT ROWID;
CREATE TABLE sessions (
    id BLOB PRIMARY KEY, recent BLOB, cached INTEGER, seen INTEGER,
    before BLOB, before_cached INTEGER  -- what `recent` and `cached` were before the last visit
) WITHOUT ROWID;
CREATE TABLE catalogues (identity BLOB PRIMARY KEY, tools BLOB, size INTEGER, seen INTEGER)
    WITHOUT ROWID;
CREATE INDEX catalogues_by_seen ON catalogues (seen);
"""


# A visit: the session's recent catalogues with this one first (drift.visited), its cache
# read when the request said one, and what it was before, returned.
_VISIT: Final = (
    "UPDATE sessions SET before = recent, before_cached = cached,"
    " recent = visited(recent, ?), cached = coalesce(?, cached), seen = ?"
    " WHERE id = ? RETURNING before, before_cached"
)


_KEPT: Final = "SELECT 1 FROM catalogues WHERE identity = ?"
_SALT: Final = "SELECT value FROM meta WHERE key = 'salt'"


def create(path: Path) -> None:
    """Make the store, with the salt every worker's session hashes use (the master, before
    it starts workers)."""
    with _connect(path) as connection:
        connection.execute("PRAGMA journal_mode=WAL")
        connection.executescript(_SCHEMA)
        connection.executemany(
            "INSERT INTO meta VALUES (?, ?)",
            [("salt", secrets.token_bytes(16)), ("sessions", 0), ("kept_bytes", 0)],
        )
    connection.close()


def _connect(path: Path) -> sqlite3.Connection:
    connection = sqlite3.connect(path, timeout=0, isolation_level=None)
    # A cache of hashes in a temporary directory: a crash may lose it, never corrupt a write
    # in progress for the others (WAL, which `create` set for good), and nothing waits for
    # the disk.
    connection.execute("PRAGMA synchronous=OFF")
    connection.create_function("visited", 2, _visited, deterministic=True)
    return connection


def opened(path: Path, max_sessions: int = DRIFT_MAX_SESSIONS) -> SharedSessions | None:
    """A worker's connection to the store, or None (with a warning: that worker's drift is
    then its own) when the store cannot be opened."""
    try:
        return SharedSessions(path, max_sessions)
    except sqlite3.Error as exc:
        log.warning(
            "cannot open the workers' shared drift store (%s: %s); this worker tracks drift "
            "on its own",
            type(exc).__name__,
            exc,
        )
        return None


def _visited(recent: bytes, identity: bytes) -> bytes:
    if recent[:DIGEST_SIZE] == identity:  # the usual request: the session's last catalogue
        return recent
    return b"".join(visited(_identities(recent), identity))


class SharedSessions:
    """One worker's connection to the host's store: `max_sessions` sessions (least recently
    visited go first) and the tools of catalogues within `kept_bytes`, over every worker."""

    def __init__(
        self, path: Path, max_sessions: int = DRIFT_MAX_SESSIONS, kept_bytes: int = KEPT_BYTES
    ) -> None:
        self.max_sessions = max(1, max_sessions)
        self.kept_bytes = kept_bytes
        self._db = _connect(path)
        try:
            (self.salt,) = _patiently(self._db.execute, _SALT).fetchone()
        except BaseException:
            self._db.close()
            raise
        self._throttle = logs.Throttle(log)

    def __len__(self) -> int:
        try:
            row = self._db.execute("SELECT value FROM meta WHERE key = 'sessions'").fetchone()
        except sqlite3.Error as exc:
            self._failed(exc)
            return 0
        return int(row[0])

    def visit(self, session: bytes, identity: bytes, cached: int | None) -> Seen | None:
        now = time.monotonic_ns()  # one clock for every process of the host
        try:
            for _ in range(2):
                # One statement, so one short write lock: what the session was comes back
                # from the columns the update copies it to.
                row = _patiently(self._update, identity, cached, now, session)
                if row is not None:
                    return _identities(row[0]), int(row[1])
                if _patiently(self._insert, session, identity, cached or 0, now):
                    return None
                # Another worker's request of this new session came in first: visit it.
        except sqlite3.Error as exc:
            self._failed(exc)
        return None

    def _update(
        self, identity: bytes, cached: int | None, now: int, session: bytes
    ) -> tuple[bytes, int] | None:
        row: tuple[bytes, int] | None = self._db.execute(
            _VISIT, (identity, cached, now, session)
        ).fetchone()
        return row

    def _insert(self, session: bytes, identity: bytes, cached: int, now: int) -> bool:
        """A new session, unless another worker made it meanwhile (then False)."""
        db = self._db
        db.execute("BEGIN IMMEDIATE")
        try:
            added = db.execute(
                "INSERT INTO sessions VALUES (?, ?, ?, ?, x'', 0) ON CONFLICT DO NOTHING",
                (session, identity, cached, now),
            ).rowcount
            if added:
                self._count_new()
            db.execute("COMMIT")
        except BaseException:
            db.execute("ROLLBACK")
            raise
        return bool(added)

    def _count_new(self) -> None:
        """In the transaction: one session more; beyond `max_sessions`, the least recently
        visited go."""
        db = self._db
        (count,) = db.execute(
            "UPDATE meta SET value = value + 1 WHERE key = 'sessions' RETURNING value"
        ).fetchone()
        if count > self.max_sessions:
            # A sixteenth of the bound at a time: one scan for many new sessions, and no
            # index on `seen` for every visit to update.
            over = count - self.max_sessions + self.max_sessions // 16
            db.execute(
                "DELETE FROM sessions WHERE id IN (SELECT id FROM sessions ORDER BY seen LIMIT ?)",
                (over,),
            )
            db.execute("UPDATE meta SET value = value - ? WHERE key = 'sessions'", (over,))

    def keep(self, identity: bytes, tools: Sequence[Listed]) -> None:
        try:  # usually another worker kept it already: a read, not a write
            if self._db.execute(_KEPT, (identity,)).fetchone() is not None:
                return
        except sqlite3.Error as exc:
            self._failed(exc)
            return
        blob = orjson.dumps([[t.names, [d.hex() for d in t.digests], t.servers] for t in tools])
        try:
            _patiently(self._add, identity, blob)
        except sqlite3.Error as exc:
            self._failed(exc)

    def _add(self, identity: bytes, blob: bytes) -> None:
        db = self._db
        db.execute("BEGIN IMMEDIATE")
        try:
            added = db.execute(
                "INSERT OR IGNORE INTO catalogues VALUES (?, ?, ?, ?)",
                (identity, blob, len(blob), time.monotonic_ns()),
            ).rowcount
            if added:
                self._count_kept(identity, len(blob))
            db.execute("COMMIT")
        except BaseException:
            db.execute("ROLLBACK")
            raise

    def _count_kept(self, identity: bytes, size: int) -> None:
        """In the transaction: `size` bytes more kept, the oldest catalogues gone beyond
        `kept_bytes` (the one just kept always stays)."""
        db = self._db
        (total,) = db.execute(
            "UPDATE meta SET value = value + ? WHERE key = 'kept_bytes' RETURNING value", (size,)
        ).fetchone()
        while total > self.kept_bytes:
            row = db.execute(
                "DELETE FROM catalogues WHERE identity = (SELECT identity FROM catalogues "
                "WHERE identity != ? ORDER BY seen LIMIT 1) RETURNING size",
                (identity,),
            ).fetchone()
            if row is None:
                break
            total -= row[0]
        db.execute("UPDATE meta SET value = ? WHERE key = 'kept_bytes'", (total,))

    def kept(self, identity: bytes) -> tuple[Listed, ...] | None:
        try:
            row = self._db.execute(
                "SELECT tools FROM catalogues WHERE identity = ?", (identity,)
            ).fetchone()
        except sqlite3.Error as exc:
            self._failed(exc)
            return None
        if row is None:
            return None
        return tuple(
            Kept(tuple(names), tuple(bytes.fromhex(d) for d in digests), tuple(servers))
            for names, digests, servers in orjson.loads(row[0])
        )

    def close(self) -> None:
        self._db.close()

    def _failed(self, exc: sqlite3.Error) -> None:
        self._throttle.log(
            logging.WARNING,
            "drift-store",
            f"the workers' shared drift store failed ({type(exc).__name__}: {exc}); this "
            "request's catalogue change is not tracked",
        )


def _patiently(call: Callable[..., T], *args: Any) -> T:
    """`call(*args)`, again after a short nap while another worker holds the write lock, for
    up to BUSY_SECONDS (then the busy error goes to the caller)."""
    deadline = time.monotonic() + BUSY_SECONDS
    nap = _NAP_SECONDS
    while True:
        try:
            return call(*args)
        except sqlite3.OperationalError as exc:
            if exc.sqlite_errorcode != sqlite3.SQLITE_BUSY or time.monotonic() > deadline:
                raise
        time.sleep(nap)
        nap = min(2 * nap, 0.001)


def _identities(recent: bytes) -> list[bytes]:
    return [recent[at : at + DIGEST_SIZE] for at in range(0, len(recent), DIGEST_SIZE)]
