"""Without the optional codecs (brotli, zstandard) a body or a stream in their coding is
unsupported, never an error; each case runs in a child whose imports hide the modules."""

from __future__ import annotations

import pytest

from child import python_output


@pytest.mark.parametrize("module", ["brotli", "zstandard"])
def test_a_coding_whose_module_is_not_installed_is_unsupported(module: str) -> None:
    code = (
        f"import sys; sys.modules[{module!r}] = None\n"
        "from toolslim.wire import codings\n"
        "coding = {'brotli': 'br', 'zstandard': 'zstd'}[" + repr(module) + "]\n"
        "for attempt in (lambda: codings.decode(coding, b'x', 9), "
        "lambda: codings.decoder(coding)):\n"
        "    try:\n"
        "        attempt()\n"
        "    except codings.Unsupported:\n"
        "        print('unsupported')\n"
    )
    assert python_output(code) == "unsupported\nunsupported\n"


def test_the_module_imports_without_aiohttp_prometheus_client_or_the_optional_codecs() -> None:
    code = (
        "import sys\n"
        "for name in ('aiohttp', 'prometheus_client', 'brotli', 'zstandard'):\n"
        "    sys.modules[name] = None\n"
        "import gzip\n"
        "from toolslim.wire import codings\n"
        "print(codings.decode('gzip', gzip.compress(b'ok'), 2).decode())\n"
    )
    assert python_output(code) == "ok\n"


def test_a_stream_in_a_coding_whose_module_is_missing_is_left_unread() -> None:
    code = (
        "import sys; sys.modules['brotli'] = None; sys.modules['zstandard'] = None\n"
        "from toolslim.wire.sse import UsageObserver\n"
        "o = UsageObserver('anthropic', 'text/event-stream', 'br'); o.feed(b'x')\n"
        "assert o.finish() is None\n"
        "o = UsageObserver('anthropic', 'text/event-stream', 'zstd'); o.feed(b'x')\n"
        "assert o.finish() is None\n"
    )
    python_output(code)
