"""PURE. The catalogues a Responses WebSocket request continues: Codex sends a follow-up (a
tool's output) with `previous_response_id` and no tools of its own, and the upstream puts the
earlier request's input, its catalogue included, back in the prompt. One Chain per connection.

Must not import aiohttp or prometheus_client.
"""

from __future__ import annotations

import re
from collections import OrderedDict
from typing import Final

from toolslim.core.facts import CatalogueFacts

KEPT: Final = 16  # responses per connection whose catalogues are remembered
_HEAD: Final = 1024  # bytes searched: OpenAI writes the id first, Codex the previous id 4th
# `response.created`'s `{"response": {"id": ...` and a request's top-level previous id; a
# miss (another order, a longer head) only means the request is counted without them.
_RESPONSE_ID: Final = re.compile(rb'"response"\s*:\s*\{\s*"id"\s*:\s*"([^"\\]{1,200})"')
_PREVIOUS_ID: Final = re.compile(rb'"previous_response_id"\s*:\s*"([^"\\]{1,200})"')

Catalogues = tuple[CatalogueFacts, ...]


def response_id(event: bytes) -> bytes | None:
    """The id of the response a `response.created` event opens, else None."""
    found = _RESPONSE_ID.search(event, 0, _HEAD)
    return found.group(1) if found is not None else None


class Chain:
    """The catalogues in the prompt of the last KEPT responses of one connection, by id."""

    __slots__ = ("_kept",)

    def __init__(self) -> None:
        self._kept: OrderedDict[bytes, Catalogues] = OrderedDict()

    def remember(self, ident: bytes | None, catalogues: Catalogues) -> None:
        """The response `ident` was made with `catalogues` in its prompt."""
        if ident is None:
            return
        self._kept[ident] = catalogues
        self._kept.move_to_end(ident)
        if len(self._kept) > KEPT:
            self._kept.popitem(last=False)

    def continued(self, message: bytes) -> Catalogues:
        """The catalogues a `response.create` without its own continues: those of the
        response its `previous_response_id` names, if remembered; else none."""
        found = _PREVIOUS_ID.search(message, 0, _HEAD)
        return self._kept.get(found.group(1), ()) if found is not None else ()
