"""The tool ledger's file: SQLite through the standard library, one row per (day, client,
catalogue) and (day, client, tool), so that the ledger survives restarts and `toolslim tools`
reads it with no server running.

Every write adds what a process counted since its last write (an UPSERT that adds), in one
transaction: any number of processes may write one file (the workers of `serve --workers N`
each write their own counts; SQLite's lock orders them), and none overwrites another's. A
file that is not ours, or not a database, is a StateError naming it; it is never rewritten.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import sqlite3
from collections.abc import AsyncIterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Final

from toolslim.observe.ledger.book import SESSIONS_KEPT, Export, ToolLedger, empty
from toolslim.observe.ledger.prices import TIERS

log = logging.getLogger("toolslim.proxy.app")

APPLICATION_ID: Final = 0x746C736D  # "tlsm": PRAGMA application_id marks our files
VERSION: Final = 1  # PRAGMA user_version: the schema below
WRITE_SECONDS: Final = 5.0  # at most this often, and once more at shutdown
BUSY_SECONDS: Final = 10.0  # another process's write is waited for this long

_SCHEMA: Final = """
CREATE TABLE IF NOT EXISTS catalogues (
    digest TEXT NOT NULL, position INTEGER NOT NULL, name TEXT NOT NULL, server TEXT NOT NULL,
    tokens INTEGER NOT NULL, deferred INTEGER NOT NULL, PRIMARY KEY (digest, position));
CREATE TABLE IF NOT EXISTS offers (
    day TEXT NOT NULL, client TEXT NOT NULL, digest TEXT NOT NULL, requests INTEGER NOT NULL,
    read INTEGER NOT NULL, write INTEGER NOT NULL, uncached INTEGER NOT NULL,
    unknown INTEGER NOT NULL, equivalents REAL NOT NULL, usd REAL NOT NULL,
    first REAL NOT NULL, last REAL NOT NULL, PRIMARY KEY (day, client, digest));
CREATE TABLE IF NOT EXISTS sessions (
    day TEXT NOT NULL, client TEXT NOT NULL, digest TEXT NOT NULL, session TEXT NOT NULL,
    PRIMARY KEY (day, client, digest, session));
CREATE TABLE IF NOT EXISTS calls (
    day TEXT NOT NULL, client TEXT NOT NULL, tool TEXT NOT NULL, server TEXT NOT NULL,
    calls INTEGER NOT NULL, last REAL NOT NULL, PRIMARY KEY (day, client, tool));
CREATE TABLE IF NOT EXISTS counts (
    section TEXT NOT NULL, name TEXT NOT NULL, value INTEGER NOT NULL,
    extra INTEGER NOT NULL, PRIMARY KEY (section, name));
"""
# The export sections kept in `counts`: (section, its names' mapping, its total's key).
_NAMED: Final = (("unknown_calls", "names", "total"), ("unpriced", "models", "requests"))
_TOTALS: Final = ("input", "untracked")


class StateError(Exception):
    """The state file cannot be used; the message names it and says why."""


class StateFile:
    """One open state file. Opening checks it is ours (or empty, then makes it ours)."""

    def __init__(self, path: str) -> None:
        self.path = path
        try:
            Path(path).parent.mkdir(parents=True, exist_ok=True)
            self._db = sqlite3.connect(
                path, timeout=BUSY_SECONDS, isolation_level=None, check_same_thread=False
            )
        except (OSError, sqlite3.Error) as exc:
            raise StateError(f"state_file {path}: cannot open it: {exc}") from None
        try:
            self._claim()
        except sqlite3.DatabaseError as exc:
            self._db.close()
            raise StateError(
                f"state_file {path} is not a toolslim state file ({exc}); move it away or "
                "set state_file to another path (or none)"
            ) from None
        except StateError:
            self._db.close()
            raise

    def _claim(self) -> None:
        db = self._db
        (application,) = db.execute("PRAGMA application_id").fetchone()
        (version,) = db.execute("PRAGMA user_version").fetchone()
        tables = db.execute("SELECT count(*) FROM sqlite_master").fetchone()[0]
        if application == 0 and version == 0 and tables == 0:  # new, or empty: make it ours
            db.executescript(
                f"BEGIN IMMEDIATE; {_SCHEMA} PRAGMA application_id = {APPLICATION_ID}; "
                f"PRAGMA user_version = {VERSION}; COMMIT;"
            )
            return
        if application != APPLICATION_ID:
            raise StateError(
                f"state_file {self.path} is another program's SQLite database (application_id "
                f"{application}); toolslim never writes over it: set state_file to another "
                "path (or none)"
            )
        if version != VERSION:
            raise StateError(
                f"state_file {self.path} has schema version {version}; this toolslim reads "
                f"version {VERSION}"
            )

    def close(self) -> None:
        self._db.close()

    def load(self, since: str = "") -> Export:
        """What the file holds, as a ledger export; only days on or after `since` (YYYY-MM-DD).
        Raises StateError if the file cannot be read."""
        try:
            return self._load(since)
        except sqlite3.DatabaseError as exc:
            raise StateError(f"state_file {self.path} cannot be read: {exc}") from None

    def _load(self, since: str) -> Export:
        db, export = self._db, empty()
        for digest, name, server, tokens, deferred in db.execute(
            "SELECT digest, name, server, tokens, deferred FROM catalogues "
            "ORDER BY digest, position"
        ):
            facts = export["catalogues"].setdefault(
                digest, {"names": [], "servers": [], "tokens": [], "deferred": []}
            )
            facts["names"].append(name)
            facts["servers"].append(server)
            facts["tokens"].append(tokens)
            facts["deferred"].append(bool(deferred))
        offers = export["offers"]
        for row in db.execute("SELECT * FROM offers WHERE day >= ?", (since,)):
            day, client, digest, requests, *tiers, equivalents, usd, first, last = row
            offers.setdefault(day, {}).setdefault(client, {})[digest] = {
                "requests": requests,
                "tiers": dict(zip(TIERS, tiers, strict=True)),
                "equivalents": equivalents,
                "usd": usd,
                "first": first,
                "last": last,
                "sessions": [],
            }
        for day, client, digest, session in db.execute(
            "SELECT * FROM sessions WHERE day >= ?", (since,)
        ):
            row = offers.get(day, {}).get(client, {}).get(digest)
            if row is not None and len(row["sessions"]) < SESSIONS_KEPT:
                row["sessions"].append(session)
        for day, client, tool, server, calls, last in db.execute(
            "SELECT * FROM calls WHERE day >= ?", (since,)
        ):
            export["calls"].setdefault(day, {}).setdefault(client, {})[tool] = {
                "server": server,
                "calls": calls,
                "last": last,
            }
        for section, name, value, extra in db.execute("SELECT * FROM counts"):
            _put_count(export, section, name, value, extra)
        return export

    def add(self, delta: Export) -> None:
        """Add `delta` (what was counted since the last write) to the file, in one
        transaction. Raises StateError if it cannot."""
        try:
            self._add(delta)
        except sqlite3.Error as exc:
            with contextlib.suppress(sqlite3.Error):
                self._db.execute("ROLLBACK")
            raise StateError(f"state_file {self.path}: cannot write: {exc}") from None

    def _add(self, delta: Export) -> None:
        db = self._db
        db.execute("BEGIN IMMEDIATE")
        db.executemany(
            "INSERT OR IGNORE INTO catalogues VALUES (?, ?, ?, ?, ?, ?)",
            [
                (digest, position, *values)
                for digest, facts in delta["catalogues"].items()
                for position, values in enumerate(
                    zip(
                        facts["names"],
                        facts["servers"],
                        facts["tokens"],
                        facts["deferred"],
                        strict=True,
                    )
                )
            ],
        )
        offers, sessions = [], []
        for day, clients in delta["offers"].items():
            for client, rows in clients.items():
                for digest, row in rows.items():
                    tiers = [row["tiers"][tier] for tier in TIERS]
                    sums = (row["equivalents"], row["usd"], row["first"], row["last"])
                    offers.append((day, client, digest, row["requests"], *tiers, *sums))
                    sessions += [(day, client, digest, s) for s in row["sessions"]]
        db.executemany(
            "INSERT INTO offers VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) "
            "ON CONFLICT DO UPDATE SET requests = requests + excluded.requests, "
            "read = read + excluded.read, write = write + excluded.write, "
            "uncached = uncached + excluded.uncached, unknown = unknown + excluded.unknown, "
            "equivalents = equivalents + excluded.equivalents, usd = usd + excluded.usd, "
            "first = min(first, excluded.first), last = max(last, excluded.last)",
            offers,
        )
        db.executemany("INSERT OR IGNORE INTO sessions VALUES (?, ?, ?, ?)", sessions)
        db.executemany(
            "INSERT INTO calls VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT DO UPDATE SET "
            "calls = calls + excluded.calls, last = max(last, excluded.last)",
            [
                (day, client, tool, row["server"], row["calls"], row["last"])
                for day, clients in delta["calls"].items()
                for client, rows in clients.items()
                for tool, row in rows.items()
            ],
        )
        db.executemany(
            "INSERT INTO counts VALUES (?, ?, ?, ?) ON CONFLICT DO UPDATE SET "
            "value = value + excluded.value, extra = extra + excluded.extra",
            list(_counts(delta)),
        )
        db.execute("COMMIT")


def _counts(export: Export) -> list[tuple[str, str, int, int]]:
    rows = []
    for section, names, total in _NAMED:
        rows.append((section, "", export[section][total], 0))
        rows += [(section, name, count, 0) for name, count in export[section][names].items()]
    for reason, row in export["cache_miss_reasons"].items():
        rows.append(("cache_miss_reasons", reason, row["requests"], row["missed_tokens"]))
    for section in _TOTALS:
        rows += [(section, key, value, 0) for key, value in export[section].items()]
    return [row for row in rows if row[2] or row[3]]


def _put_count(export: Export, section: str, name: str, value: int, extra: int) -> None:
    for named, names, total in _NAMED:
        if section == named:
            if name:
                export[section][names][name] = value
            else:
                export[section][total] = value
            return
    if section == "cache_miss_reasons":
        export[section][name] = {"requests": value, "missed_tokens": extra}
    elif section in _TOTALS and name in export[section]:
        export[section][name] = value


def since(now: Export, before: Export) -> Export:
    """What the live export `now` counted beyond `before` (an earlier export of the same
    ledger): counts subtracted; sessions, catalogues and times as they are now (idempotent)."""
    delta = empty()
    delta["catalogues"] = {
        d: facts for d, facts in now["catalogues"].items() if d not in before["catalogues"]
    }
    for day, clients in now["offers"].items():
        for client, rows in clients.items():
            for digest, row in rows.items():
                old = before["offers"].get(day, {}).get(client, {}).get(digest)
                if old is not None and old["requests"] == row["requests"]:
                    continue
                if old is None:
                    old = {"requests": 0, "tiers": {}, "equivalents": 0.0, "usd": 0.0}
                delta["offers"].setdefault(day, {}).setdefault(client, {})[digest] = {
                    **row,
                    "requests": row["requests"] - old["requests"],
                    "tiers": {t: row["tiers"][t] - old["tiers"].get(t, 0) for t in TIERS},
                    "equivalents": row["equivalents"] - old["equivalents"],
                    "usd": row["usd"] - old["usd"],
                }
    for day, clients in now["calls"].items():
        for client, rows in clients.items():
            for tool, row in rows.items():
                old = before["calls"].get(day, {}).get(client, {}).get(tool)
                calls = row["calls"] - (old["calls"] if old else 0)
                if calls:
                    delta["calls"].setdefault(day, {}).setdefault(client, {})[tool] = {
                        **row,
                        "calls": calls,
                    }
    for section, names, total in _NAMED:
        delta[section][total] = now[section][total] - before[section][total]
        for name, count in now[section][names].items():
            if count != before[section][names].get(name, 0):
                delta[section][names][name] = count - before[section][names].get(name, 0)
    for reason, row in now["cache_miss_reasons"].items():
        old = before["cache_miss_reasons"].get(reason, {"requests": 0, "missed_tokens": 0})
        if row != old:
            delta["cache_miss_reasons"][reason] = {k: row[k] - old[k] for k in row}
    for section in _TOTALS:
        delta[section] = {k: v - before[section][k] for k, v in now[section].items()}
    return delta


def counted(export: Export) -> Export:
    """What `since` reads of an earlier export: its counts, its catalogues' digests (not their
    tool facts) and no sessions, so that what was written last costs a fraction of the ledger."""
    rows = {
        day: {
            client: {digest: {**row, "sessions": ()} for digest, row in by_digest.items()}
            for client, by_digest in clients.items()
        }
        for day, clients in export["offers"].items()
    }
    return {**export, "catalogues": dict.fromkeys(export["catalogues"]), "offers": rows}


def open_base(path: str | None) -> tuple[StateFile | None, Export | None]:
    """The state file at `path` (None: none) and what it holds. Raises StateError."""
    if path is None:
        return None, None
    state = StateFile(path)
    return state, state.load()


async def keeping(ledger: ToolLedger, state: StateFile) -> AsyncIterator[None]:
    """For app.cleanup_ctx: write the ledger's new counts every WRITE_SECONDS while they
    change, on a thread of its own (never on the loop), and once more at the end."""
    loop = asyncio.get_running_loop()
    writer = ThreadPoolExecutor(1, thread_name_prefix="toolslim-state")
    written = [empty()]

    async def write() -> None:
        live, before = ledger.live(), written[0]
        delta = since(live, before)
        if delta == empty():
            return
        # Taken as written at once: a write the shutdown cancels still runs to its end on
        # the thread, where the last write queues behind it.
        written[0] = counted(live)
        try:
            await loop.run_in_executor(writer, state.add, delta)
        except StateError as exc:
            log.warning("%s", exc)
            written[0] = before  # counted again in the next write's delta

    async def every() -> None:
        while True:
            await asyncio.sleep(WRITE_SECONDS)
            await write()

    task = asyncio.create_task(every())
    yield
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task
    await write()
    writer.shutdown(wait=True)
    state.close()
