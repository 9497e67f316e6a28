"""tests/unit is pure: a test here that opens an internet socket or starts a process fails,
naming what it did (it belongs in tests/proxy or tests/system)."""

from __future__ import annotations

import socket
import subprocess
from typing import Any

import pytest


@pytest.fixture(autouse=True)
def no_sockets_and_no_processes(monkeypatch: pytest.MonkeyPatch) -> None:
    opening = socket.socket.__init__

    def open_socket(self: socket.socket, family: int = -1, *args: Any, **kwargs: Any) -> None:
        # An event loop's own wake-up pair is AF_UNIX, and a socket made from a descriptor
        # (fileno) is one that already exists: both stay allowed.
        fileno = kwargs.get("fileno", args[2] if len(args) > 2 else None)
        if family in (-1, socket.AF_INET, socket.AF_INET6) and fileno is None:  # -1: AF_INET
            raise AssertionError("a unit test opened an internet socket: move it to tests/proxy")
        opening(self, family, *args, **kwargs)

    def start(self: subprocess.Popen[Any], args: Any, *rest: Any, **kwargs: Any) -> None:
        raise AssertionError(f"a unit test started {args!r}: move it to tests/system")

    monkeypatch.setattr(socket.socket, "__init__", open_socket)
    monkeypatch.setattr(subprocess.Popen, "__init__", start)
