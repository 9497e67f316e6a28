"""PURE. What the tool ledger reads of a request besides its catalogues: the client that sent
it, the model it asks for (for its price) and its session, by a hash that is the same in
every worker and across restarts (sessions are counted per tool, in the state file too).

Must not import aiohttp or prometheus_client.
"""

from __future__ import annotations

import functools
import hashlib
import re
from collections.abc import Mapping
from typing import Final

import orjson

from toolslim.core import owners
from toolslim.observe.drift import session_key

__all__ = ["client_of", "model_of", "session_named", "session_of"]

# A client sends the same User-Agent with every request: its client is found once.
client_of: Final = functools.lru_cache(maxsize=64)(owners.client_of)

_GEMINI_MODEL: Final = re.compile(r"/models/([^/:?]+)")
_MODEL: Final = re.compile(rb'"model"\s*:\s*("(?:[^"\\]|\\.){1,200}")')
_HEAD: Final = 1024
_TAIL: Final = 16 * 1024
_SESSION_HASH: Final = hashlib.blake2b(digest_size=8, person=b"toolslim-ledger")
# How SDKs and agents start a body (JSON.stringify, serde: compact, `model` first).
_COMPACT_START: Final = b'{"model":"'


def model_of(target: str, body: bytes) -> str | None:
    """The model a request asks for: Gemini's path names it, other APIs' `model` member (SDKs
    write it first, some clients last: the body's head and end are searched)."""
    if "/models/" in target:  # what _GEMINI_MODEL needs to match at all
        found = _GEMINI_MODEL.search(target.partition("?")[0])
        if found is not None:
            return found.group(1)
    raw = _compact_model(body)
    if raw is None:
        match = _MODEL.search(body, 0, _HEAD) or _MODEL.search(body, max(0, len(body) - _TAIL))
        if match is None:
            return None
        raw = match.group(1)
    try:
        model = orjson.loads(raw)
    except orjson.JSONDecodeError:
        return None
    return model if isinstance(model, str) and model else None


def _compact_model(body: bytes) -> bytes | None:
    """`_MODEL`'s string in a body that starts `{"model":"` and a name of 1 to 200 bytes
    without an escape (where the pattern's first match is), by two byte searches; None for
    any other body, which the pattern reads."""
    if not body.startswith(_COMPACT_START):
        return None
    start = len(_COMPACT_START)
    end = body.find(b'"', start, min(_HEAD, start + 201))
    if end <= start or body.find(b"\\", start, end) != -1:
        return None
    return body[start - 1 : end + 1]


def session_of(target: str, headers: Mapping[str, str] | None, body: bytes) -> str:
    """The request's session as a short hash (drift.session_key names it; never in clear)."""
    return session_named(session_key(target, headers, body))


def session_named(key: bytes) -> str:
    """`session_of` the request whose `drift.session_key` is `key` (read once per request)."""
    hashed = _SESSION_HASH.copy()  # copied: half the cost of a new keyed hash
    hashed.update(key)
    return hashed.hexdigest()
