"""websocket: a Responses WebSocket message's type is its top-level `type` member alone."""

from __future__ import annotations

import pytest

from toolslim.proxy.websocket import event_type


@pytest.mark.parametrize(
    ("message", "kind"),
    [
        (b'{"type":"response.create","model":"m"}', b"response.create"),
        (b' { "type" : "error", "status": 429}', b"error"),
        (b'{"model":"m","type":"response.create"}', b"response.create"),  # type not first
        (b'{"model":"m","input":[{"type":"response.create"}]}', None),  # nested, not its type
        (b"[1, 2]", None),
        (b"not json", None),
    ],
)
def test_a_messages_type_is_its_top_level_type_member(message: bytes, kind: bytes | None) -> None:
    assert event_type(message) == kind
