"""The catalogues a Responses WebSocket follow-up continues (observe/ledger/chain.py)."""

from __future__ import annotations

import orjson

from toolslim.core.facts import CatalogueFacts
from toolslim.observe.ledger.chain import KEPT, Chain, response_id

TOOLS = (CatalogueFacts(orjson.dumps([{"type": "function", "name": "exec"}])),)


def created(ident: str) -> bytes:
    event = {"type": "response.created", "response": {"id": ident, "object": "response"}}
    return orjson.dumps(event)


def follow_up(previous: str) -> bytes:
    body = {"type": "response.create", "model": "m", "previous_response_id": previous}
    return orjson.dumps({**body, "input": [{"type": "function_call_output", "output": "x"}]})


def test_a_response_created_event_names_its_response() -> None:
    assert response_id(created("resp_1")) == b"resp_1"
    assert response_id(b'{"type":"response.output_text.delta","delta":"x"}') is None


def test_a_follow_up_continues_the_catalogues_of_the_response_it_names() -> None:
    chain = Chain()
    chain.remember(response_id(created("resp_1")), TOOLS)
    chain.remember(b"resp_2", ())

    assert chain.continued(follow_up("resp_1")) == TOOLS
    assert chain.continued(follow_up("resp_2")) == ()
    assert chain.continued(follow_up("resp_unknown")) == ()
    assert chain.continued(b'{"type":"response.create","input":[]}') == ()


def test_a_chain_remembers_only_its_last_responses() -> None:
    chain = Chain()
    for number in range(KEPT + 1):
        chain.remember(f"resp_{number}".encode(), TOOLS)
    chain.remember(None, TOOLS)

    assert chain.continued(follow_up("resp_0")) == ()
    assert chain.continued(follow_up(f"resp_{KEPT}")) == TOOLS
