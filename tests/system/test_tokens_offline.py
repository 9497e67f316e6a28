"""Token counting reads tiktoken's packaged encoding: a child process whose every socket call
fails still counts."""

from __future__ import annotations

from child import python_output


def test_token_counting_never_touches_the_network() -> None:
    code = (
        "import socket\n"
        "def refuse(*a, **k):\n"
        "    raise OSError('network used')\n"
        "socket.socket = refuse\n"
        "socket.create_connection = refuse\n"
        "socket.getaddrinfo = refuse\n"
        "from toolslim.core.tokens import count_tokens\n"
        "print(count_tokens(b'hello world'))\n"
    )
    assert int(python_output(code)) == 2
