"""The tool ledger's session names are the same in every worker and across restarts (the
state file keeps them): a keyed hash of the session key alone, whatever was hashed before."""

from __future__ import annotations

import hashlib

import pytest

from toolslim.observe.ledger import who


@pytest.mark.parametrize("key", [b"", b'"user_id"\0"session-1"', b"x" * 5000])
def test_a_session_name_is_the_keyed_hash_of_its_key_alone(key: bytes) -> None:
    expected = hashlib.blake2b(key, digest_size=8, person=b"toolslim-ledger").hexdigest()
    who.session_named(b"another session first")
    assert who.session_named(key) == expected
    assert who.session_named(key) == expected
