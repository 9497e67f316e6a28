"""A request's session key, read once from its body, hashes to the same sessions drift and the
tool ledger name when each reads the body itself."""

from __future__ import annotations

from toolslim.observe import drift
from toolslim.observe.ledger import who

BODY = b'{"model":"claude-sonnet-4-5","messages":[],"tools":[],"metadata":{"user_id":"u1"}}'
HEADERS = {"user-agent": "claude-cli/2.0.0 (external, cli)"}


def test_the_ledger_names_the_session_from_the_key_as_from_the_body() -> None:
    key = drift.session_key("/v1/messages", HEADERS, BODY)
    assert who.session_named(key) == who.session_of("/v1/messages", HEADERS, BODY)


def test_drift_names_the_session_from_the_key_as_from_the_body() -> None:
    tracker = drift.Tracker()
    key = drift.session_key("/v1/messages", HEADERS, BODY)
    assert tracker.session_named(key) == tracker.session("/v1/messages", HEADERS, BODY)


def test_other_sessions_get_other_names() -> None:
    other = BODY.replace(b'"u1"', b'"u2"')
    first = drift.session_key("/v1/messages", HEADERS, BODY)
    second = drift.session_key("/v1/messages", HEADERS, other)
    assert who.session_named(first) != who.session_named(second)
