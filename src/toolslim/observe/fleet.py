"""The workers of one host as one: what each worker publishes, the merge that makes the host's
/stats from those states, and the directory in which they meet.

`state_of`, `merge`, `retire` and `view` are PURE (values in, a new value out); `Board` is the
only file I/O, `Member` one worker's use of it. Must not import aiohttp or prometheus_client.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Final

import orjson

from toolslim.config.settings import Settings
from toolslim.observe.counters import merge_catalogues, percentile
from toolslim.observe.health import merge_findings
from toolslim.observe.ledger import render
from toolslim.observe.stats import RECENT_CHANGES, Stats

State = dict[str, Any]  # JSON: {"id", "pid", "latest_at", "snapshot"}, as one worker publishes

PUBLISH_SECONDS: Final = 0.5  # a worker's file is at most this old while it runs
EXITED_SAMPLES: Final = 4096  # per histogram, the recent samples kept of the workers that exited
SERIES_POINTS: Final = 360  # as Stats keeps: an hour of 10-second points
QUANTILES: Final = (50, 90, 99)

# A worker's gauges and capacities: summed over the live workers (each holds its own
# connections, memo and sessions), gone with a worker that exited.
GAUGES: Final = (
    "connections.buffered_bytes",
    "connections.busy",
    "connections.max",
    "connections.max_buffered_bytes",
    "connections.open",
    "drift.sessions",
    "memo.bytes",
    "memo.capacity",
    "memo.max_bytes",
    "memo.size",
    "requests.active_streams",
    "requests.tokens_pending",
    "websockets.active",
)


def state_of(stats: Stats, *, ident: str, pid: int) -> State:
    """What a worker publishes: its snapshot (without the uptime, which `view` derives) with
    each histogram's recent samples, from which merged percentiles are recomputed, and when
    its latest catalogue was compacted (whose P and s the host shows)."""
    snapshot = stats.snapshot()
    del snapshot["uptime_seconds"]
    snapshot["tools"] = stats.tools_state()  # the ledger's counts, rendered by `view`
    timings = snapshot["timings"]
    timings["proxy_overhead_seconds"]["samples"] = list(stats.overhead.recent)
    timings["upstream_ttfb_seconds"]["samples"] = list(stats.ttfb.recent)
    return {"id": ident, "pid": pid, "latest_at": stats.last_tokens_at, "snapshot": snapshot}


def _first(values: list[Any]) -> Any:
    return values[0]


def _latest(values: list[Any]) -> Any:
    """The value of the worker whose latest catalogue is the most recent (`merge` sorts)."""
    return values[-1]


def _histogram(values: list[dict[str, Any]]) -> dict[str, Any]:
    """Buckets, count and sum added; percentiles of every worker's recent samples together."""
    samples = [sample for value in values for sample in value.get("samples", ())]
    ordered = sorted(samples)
    buckets = [
        [bound, sum(value["buckets"][index][1] for value in values)]
        for index, (bound, _) in enumerate(values[0]["buckets"])
    ]
    return {
        "count": sum(value["count"] for value in values),
        "sum": sum(value["sum"] for value in values),
        "buckets": buckets,
        **{f"p{q}": percentile(ordered, q) for q in QUANTILES},
        "samples": samples,
    }


def _series(values: list[dict[str, Any]]) -> dict[str, Any]:
    """Points of the same interval added, oldest first, the newest SERIES_POINTS kept."""
    points: dict[float, dict[str, Any]] = {}
    for value in values:
        for point in value["points"]:
            merged = points.setdefault(point["t"], dict.fromkeys(point, 0) | {"t": point["t"]})
            for key, figure in point.items():
                if key != "t":
                    merged[key] += figure
    return {
        "interval_seconds": values[0]["interval_seconds"],
        "points": [points[t] for t in sorted(points)][-SERIES_POINTS:],
    }


def _recent(values: list[list[dict[str, Any]]]) -> list[dict[str, Any]]:
    """The newest RECENT_CHANGES of every worker's, oldest first."""
    return sorted((c for value in values for c in value), key=lambda c: c["time"])[-RECENT_CHANGES:]


# How the workers' values of a /stats field make the host's; every other number is summed,
# and every other object merged key by key (a key that is data, such as an upstream name,
# sums over the workers that have it).
RULES: Final[dict[str, Callable[[list[Any]], Any]]] = {
    "cache.by_api": merge_catalogues,  # requests per catalogue added, the most requested kept
    "cache.catalogue_tokens": _latest,
    "cache.read_multiplier": _first,  # one setting, the same in every worker
    "cache.tokens_saved_per_request": _latest,
    "cache.warm_break_even_requests": _latest,  # of the same worker's P and s
    "cache.write_multiplier": _first,
    "connections.max_buffered_bytes": max,  # the host's budget, the same in every live worker
    "drift.sessions": max,  # the host's sessions, in one store: a count that never goes down
    "drift.recent": _recent,
    "lint.findings": merge_findings,  # the same finding once, first seen, newest first
    "series": _series,
    "started_at": min,
    "tools": render.merged,  # the tool ledger's rows added, sessions united
    "version": _first,
}


def _merge(path: str, values: list[Any]) -> Any:
    rule = RULES.get(path)
    if rule is not None:
        return rule(values)
    first = values[0]
    if isinstance(first, dict):
        if "buckets" in first:  # a histogram, wherever Stats keeps one
            return _histogram(values)
        keys = dict.fromkeys(key for value in values for key in value)
        return {
            key: _merge(f"{path}.{key}" if path else key, [v[key] for v in values if key in v])
            for key in keys
        }
    if isinstance(first, int | float) and not isinstance(first, bool):
        return sum(values)
    return _latest(values)


def merge(states: Sequence[State]) -> State:
    """One state holding what `states` hold together: exact sums of every counter, histograms
    added bucket by bucket, series added by interval (see RULES). Associative, so the states
    of exited workers fold into one as they go."""
    # The same order whichever worker merges, so float sums agree to the last bit.
    ordered = sorted(states, key=lambda state: (state["latest_at"], state["id"]))
    return {
        "id": "+".join(state["id"] for state in ordered),
        "pid": 0,
        "latest_at": ordered[-1]["latest_at"],
        "snapshot": _merge("", [state["snapshot"] for state in ordered]),
    }


def retire(state: State) -> State:
    """The state of a worker that exited, as it stays in the totals: its counters kept, its
    gauges 0 (its streams and memo went with it), its most recent samples kept."""
    snapshot = {**state["snapshot"], "timings": dict(state["snapshot"]["timings"])}
    for path in GAUGES:
        section, key = path.split(".")
        snapshot[section] = {**snapshot[section], key: 0}
    for name, histogram in snapshot["timings"].items():
        snapshot["timings"][name] = {
            **histogram,
            "samples": histogram["samples"][-EXITED_SAMPLES:],
        }
    return {**state, "snapshot": snapshot}


def view(
    merged: State, live: Sequence[State], exited: int, now: float, answering: int = 0
) -> dict[str, Any]:
    """The host's /stats: `merged` as `Stats.snapshot()` shapes it, plus `workers`: the live
    ones listed (pid, uptime, and their own gauges), how many exited, and which answered."""
    snapshot: dict[str, Any] = render.shown(merged["snapshot"], now)
    head = {
        "version": snapshot["version"],
        "started_at": snapshot["started_at"],
        "uptime_seconds": now - snapshot["started_at"],
    }
    timings = {
        name: {key: value for key, value in histogram.items() if key != "samples"}
        for name, histogram in snapshot["timings"].items()
    }
    workers = {
        "count": len(live),
        "exited": exited,
        "answered_by": answering,
        "list": [
            {
                "pid": state["pid"],
                "started_at": state["snapshot"]["started_at"],
                "uptime_seconds": now - state["snapshot"]["started_at"],
                "requests": state["snapshot"]["requests"]["total"],
                "active_streams": state["snapshot"]["requests"]["active_streams"],
                "memo_size": state["snapshot"]["memo"]["size"],
            }
            for state in sorted(live, key=lambda state: state["pid"])
        ],
    }
    return head | snapshot | {"timings": timings, "workers": workers}


class Board:
    """The directory the workers of one `serve --workers N` share: `worker-<id>.json` per
    worker, each written whole (written aside, then renamed over), and `exited.json`, the
    merged state of the workers that exited, kept by the master.

    Readers never count a worker twice or miss one: `exited.json` names the workers it just
    folded in (their files may linger a moment), and a read that saw it change starts again.
    """

    EXITED: Final = "exited.json"
    BASE: Final = "base.json"  # what the state file held when the master started

    def __init__(self, folder: Path) -> None:
        self.folder = folder

    def put_base(self, state: State) -> None:
        """Keep `state` (base_state) as the totals the workers' counts add to."""
        self._write(self.BASE, orjson.dumps(state))

    def base(self) -> State | None:
        return self._load(self.BASE)

    def publish(self, ident: str, data: bytes) -> None:
        """Replace worker `ident`'s file with `data`, its state as JSON."""
        self._write(f"worker-{ident}.json", data)

    def read(self, own: str) -> tuple[list[State], State | None, int]:
        """The states of the other live workers, the exited ones' merged state (None: none
        exited) and how many exited."""
        for _ in range(10):  # a worker exits at most every few milliseconds: this settles
            first = self._load(self.EXITED) or {"generation": 0}
            others = self._others(own, set(first.get("folded", ())))
            last = self._load(self.EXITED) or {"generation": 0}
            if first["generation"] == last["generation"] and others is not None:
                break
        return others or [], first.get("state"), first.get("count", 0)

    def _others(self, own: str, folded: set[str]) -> list[State] | None:
        states = []
        for path in sorted(self.folder.glob("worker-*.json")):
            ident = path.stem.removeprefix("worker-")
            if ident == own or ident in folded:
                continue
            state = self._load(path.name)
            if state is None:  # folded meanwhile: the caller reads again
                return None
            states.append(state)
        return states

    def retire(self, pid: int) -> None:
        """Fold the state of the worker with this pid, which exited, into `exited.json` (the
        master calls this once the worker is gone, so its file no longer changes)."""
        paths = sorted(self.folder.glob(f"worker-{pid}-*.json"))
        states = [state for path in paths if (state := self._load(path.name)) is not None]
        exited = self._load(self.EXITED) or {"generation": 0, "count": 0, "state": None}
        if states:
            folding = [exited["state"], *states] if exited["state"] else states
            exited = {
                "generation": exited["generation"] + 1,
                "count": exited["count"] + 1,
                "folded": [state["id"] for state in states],
                "state": retire(merge(folding)),
            }
            self._write(self.EXITED, orjson.dumps(exited))
        for pattern in (f"worker-{pid}-*", f".worker-{pid}-*"):  # and a write cut short
            for path in self.folder.glob(pattern):
                path.unlink(missing_ok=True)

    def _write(self, name: str, data: bytes) -> None:
        aside = self.folder / f".{name}.{os.getpid()}"
        aside.write_bytes(data)
        os.replace(aside, self.folder / name)

    def _load(self, name: str) -> dict[str, Any] | None:
        try:
            loaded: dict[str, Any] = orjson.loads((self.folder / name).read_bytes())
        except FileNotFoundError:
            return None
        return loaded


class Member:
    """One worker on the board: publishes its state when it changed, and answers the host's
    /stats from its own live state and the others' files.

    An answer publishes first, so no later answer, from any worker, can show less: the host's
    counters never go down while a worker lives, and a worker that is killed loses only what
    it counted since it last published and no answer showed.
    """

    def __init__(
        self,
        stats: Stats,
        board: Board,
        pid: int | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.stats = stats
        self.board = board
        self.clock = clock
        self.pid = os.getpid() if pid is None else pid
        self.ident = f"{self.pid}-{time.time_ns()}"
        self._published = b""
        self._base = board.base()  # written before the workers start, never changed

    def publish(self) -> State:
        """Write this worker's state unless the board already has it; the state."""
        state = state_of(self.stats, ident=self.ident, pid=self.pid)
        data = orjson.dumps(state)
        if data != self._published:
            self.board.publish(self.ident, data)
            self._published = data
        return state

    def host(self) -> dict[str, Any]:
        """The host's /stats, as of now."""
        own = self.publish()
        others, exited, count = self.board.read(self.ident)
        live = [own, *others]
        states = [*live, exited] if exited is not None else live
        merged = merge(states if self._base is None else [*states, self._base])
        return view(merged, live, count, self.clock(), self.pid)


def base_state(settings: Settings, export: dict[str, Any]) -> State:
    """What the state file held at start, as a state the host's merge adds once (Board.BASE):
    the tool ledger only, with the settings /stats `tools` is rendered with."""
    tools = {
        "ledger": export,
        "unused_after": [settings.ledger_min_requests, settings.ledger_min_sessions],
        "tool_metrics": settings.ledger_tool_metrics,
    }
    return {"id": "base", "pid": 0, "latest_at": 0.0, "snapshot": {"tools": tools}}


def alone(stats: Stats) -> dict[str, Any]:
    """The /stats of a proxy that is its own only worker: its snapshot, plus `workers`."""
    pid = os.getpid()
    state = state_of(stats, ident=str(pid), pid=pid)
    return view(state, [state], 0, stats.clock(), pid)
