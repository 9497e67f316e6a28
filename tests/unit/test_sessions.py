"""sessions: the drift sessions the workers of a host share. Trackers of two workers on one
store see each session's requests as one tracker that saw them all would, whichever worker
each request reaches; the store is bounded like one tracker's."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

import orjson
from hypothesis import given, settings
from hypothesis import strategies as st

from toolslim.core.facts import CatalogueFacts
from toolslim.observe import sessions
from toolslim.observe.drift import Change, Tracker
from toolslim.observe.sessions import SharedSessions
from toolslim.wire.usage import Usage


def tool(name: str, text: str = "") -> dict[str, Any]:
    schema = {"type": "object", "properties": {"path": {"type": "string"}}}
    return {"name": name, "description": f"{name} things{text}", "input_schema": schema}


READ, BASH, EDIT, GIT_LOG = tool("Read"), tool("Bash"), tool("Edit"), tool("mcp__git__git_log")
CATALOGUES = [
    [READ, BASH],
    [BASH, READ],
    [READ, BASH, EDIT],
    [READ],
    [READ, BASH, GIT_LOG],
    [READ, tool("Bash", " changed")],
]


def facts(catalogue: list[dict[str, Any]]) -> CatalogueFacts:
    return CatalogueFacts(orjson.dumps(catalogue))


def store(folder: Path) -> Path:
    path = folder / sessions.FILE
    sessions.create(path)
    return path


def workers(path: Path, count: int = 2, **bounds: int) -> list[Tracker]:
    """The trackers of `count` workers, each on its own connection to the one store."""
    return [Tracker(sessions=SharedSessions(path, **bounds)) for _ in range(count)]


def observe(
    tracker: Tracker, session: bytes, catalogue: list[dict[str, Any]], usage: Usage | None = None
) -> Change | None:
    return tracker.observe(session, "anthropic", [facts(catalogue)], usage, 1.0)


def test_a_change_is_seen_by_the_worker_whose_request_carries_it_naming_the_tools(
    tmp_path: Path,
) -> None:
    first, second = workers(store(tmp_path))
    assert observe(first, b"s", [READ, BASH]) is None
    change = observe(second, b"s", [READ, BASH, GIT_LOG])  # it never read the previous one
    assert change is not None
    assert (change.kind, change.tools, change.servers) == (
        "added",
        ("mcp__git__git_log",),
        ("git",),
    )
    assert observe(first, b"s", [READ, BASH, GIT_LOG]) is None  # nor is it seen again


def test_every_worker_names_a_session_by_the_same_hash(tmp_path: Path) -> None:
    first, second = workers(store(tmp_path))
    headers = {"x-claude-code-session-id": "0b4e"}
    assert first.session("/v1/messages", headers, b"{}") == second.session(
        "/v1/messages", headers, b"{}"
    )
    assert first.salt != Tracker().salt  # and no other store's


def test_what_the_provider_charged_for_a_change_uses_the_cache_read_another_worker_saw(
    tmp_path: Path,
) -> None:
    first, second = workers(store(tmp_path))
    observe(first, b"s", [READ], Usage(10, 5, 9_000, 0))  # 9,000 read from the cache
    change = observe(second, b"s", [READ, EDIT], Usage(3_300, 5, 200, 0))
    assert change is not None and change.cache_write_tokens_after == 3_300


def test_the_store_keeps_max_sessions_over_all_workers_the_least_recently_seen_going_first(
    tmp_path: Path,
) -> None:
    first, second = workers(store(tmp_path), max_sessions=3)
    for index in range(10):
        observe((first, second)[index % 2], f"s{index}".encode(), [READ])
    assert len(first) == len(second) == 3
    assert observe(second, b"s0", [BASH]) is None  # forgotten: a first catalogue again
    change = observe(first, b"s9", [BASH])
    assert change is not None and change.kind == "mixed"


def test_kept_tools_are_bounded_and_a_change_against_forgotten_ones_is_mixed_naming_none(
    tmp_path: Path,
) -> None:
    path = store(tmp_path)
    first, second = (
        Tracker(kept_bytes=1, sessions=SharedSessions(path, kept_bytes=1)) for _ in range(2)
    )
    observe(first, b"a", [READ])
    observe(first, b"b", [BASH])  # pushes READ's tools out of the store and of first
    change = observe(second, b"a", [READ, EDIT])
    assert change is not None and (change.kind, change.tools) == ("mixed", ())


def test_a_store_that_fails_costs_the_request_its_drift_tracking_and_nothing_else(
    tmp_path: Path,
) -> None:
    path = store(tmp_path)
    shared = SharedSessions(path)
    tracker = Tracker(sessions=shared)
    observe(tracker, b"s", [READ])
    shared.close()  # every statement fails from now on
    assert observe(tracker, b"s", [READ, EDIT]) is None
    assert len(tracker) == 0


requests = st.lists(
    st.tuples(
        st.integers(0, 1),  # the worker the request reaches
        st.sampled_from([b"s1", b"s2", b"s3"]),
        st.integers(0, len(CATALOGUES) - 1),
    ),
    max_size=30,
)


@settings(max_examples=40, deadline=None)
@given(requests)
def test_two_workers_on_one_store_see_the_changes_one_process_sees(
    traffic: list[tuple[int, bytes, int]],
) -> None:
    with tempfile.TemporaryDirectory() as folder:
        pair = workers(store(Path(folder)))
        alone = Tracker()
        for worker, session, catalogue in traffic:
            shared = observe(pair[worker], session, CATALOGUES[catalogue])
            single = observe(alone, session, CATALOGUES[catalogue])
            assert (shared is None) == (single is None)
            if shared is not None and single is not None:
                assert (shared.kind, shared.tools, shared.servers) == (
                    single.kind,
                    single.tools,
                    single.servers,
                )
        assert len(pair[0]) == len(pair[1]) == len(alone)


def test_a_large_store_forgets_a_sixteenth_of_its_bound_at_a_time_the_least_recent_first(
    tmp_path: Path,
) -> None:
    first, second = workers(store(tmp_path), max_sessions=64)
    for index in range(200):
        observe((first, second)[index % 2], f"s{index}".encode(), [READ])
        assert len(first) <= 64
    assert len(first) >= 64 - 64 // 16
    remembered = [observe(first, f"s{index}".encode(), [BASH]) for index in range(140, 200)]
    assert all(change is not None for change in remembered)  # the 60 most recent


def test_a_worker_that_cannot_open_the_store_gets_none_and_tracks_drift_on_its_own(
    tmp_path: Path,
) -> None:
    broken = tmp_path / sessions.FILE
    broken.write_bytes(b"not a database, " * 512)
    assert sessions.opened(broken) is None
    tracker = Tracker(sessions=sessions.opened(broken))
    observe(tracker, b"s", [READ])
    change = observe(tracker, b"s", [READ, EDIT])
    assert change is not None and change.kind == "added"
