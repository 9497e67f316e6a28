"""The option table: each option declared once (mitmproxy's options.py habit), the proxy's own
here and the observers' in `observing`, in the order --help and the docs show them.

Parsing (config.load_settings), the error messages, the cli's flags and --help, and the two
files `optiondocs` writes (config.example.yaml, docs/configuration.md) all read it.
"""

from __future__ import annotations

from types import MappingProxyType
from typing import Final

from toolslim.config.checks import (
    DEFAULT_UPSTREAMS,
    Option,
    boolean,
    component_options,
    connections,
    event_loop,
    host,
    integer,
    non_negative,
    pipeline_names,
    port,
    seconds,
    size,
    string,
    upstream,
    upstream_proxy,
    workers,
)

# The observers' defaults are spelled in `observing`; their modules read them from here.
from toolslim.config.observing import DRIFT_MAX_SESSIONS as DRIFT_MAX_SESSIONS
from toolslim.config.observing import OBSERVING
from toolslim.config.observing import READ_MULTIPLIER as READ_MULTIPLIER
from toolslim.config.observing import WRITE_MULTIPLIER as WRITE_MULTIPLIER
from toolslim.core.components import toolbudget
from toolslim.core.pipeline import MEMO_BYTES, MEMO_SIZE

OPTIONS: Final[tuple[Option, ...]] = (
    Option(
        name="host",
        yaml="listen.host",
        env="TOOLSLIM_HOST",
        flag="--host",
        type="host",
        default="127.0.0.1",
        check=host,
        doc="Address to listen on. A non-loopback address requires admin_token, because /stats "
        "and /metrics would be open to the network.",
    ),
    Option(
        name="port",
        yaml="listen.port",
        env="TOOLSLIM_PORT",
        flag="--port",
        type="port",
        default=8788,
        check=port,
        doc="Port to listen on; 0 picks a free port.",
    ),
    Option(
        name="workers",
        yaml="workers",
        env="TOOLSLIM_WORKERS",
        flag="--workers",
        type="count",
        default=1,
        check=workers,
        doc="Worker processes serving the one listening port; auto starts one per CPU this "
        "process may use. Above 1, gunicorn runs them with aiohttp's worker class and "
        "replaces one that dies, and /stats, /metrics and the dashboard of any worker show "
        "the totals of all of them (docs/workers.md).",
    ),
    Option(
        name="event_loop",
        yaml="event_loop",
        env="TOOLSLIM_EVENT_LOOP",
        flag="--event-loop",
        type="loop",
        default="asyncio",
        check=event_loop,
        doc="The event loop: asyncio's own, or uvloop (pip install 'toolslim[uvloop]'). "
        "uvloop did not measure faster here (bench/README.md, Workers), so it is not the "
        "default.",
    ),
    Option(
        name="upstreams",
        yaml="upstreams",
        env=None,
        flag="--upstream",
        type="name=url",
        default=dict(DEFAULT_UPSTREAMS),
        check=upstream,
        per_key=True,
        doc="Named upstream base URLs; each one given sets that upstream and keeps the others. "
        "A URL is http(s), a host, an optional base path (prefixed to every forwarded path), "
        "no query string, fragment or user:password@; a name is lower-case letters, digits, "
        "'-' or '_'. Routing by path: /v1/messages* -> anthropic; /v1/chat/completions, "
        "/v1/responses* -> openai; other /v1/* -> anthropic when the request has an "
        "anthropic-version or x-api-key header, else openai; /v1beta/*, /v1alpha/* -> gemini; "
        "/NAME/... picks upstream NAME and strips the prefix (so extra upstreams added here "
        "are reachable as /NAME/...); anything else -> default_upstream.",
    ),
    Option(
        name="upstream_proxy",
        yaml="upstream_proxy",
        env="TOOLSLIM_UPSTREAM_PROXY",
        flag="--upstream-proxy",
        type="url",
        default=None,
        check=upstream_proxy,
        doc="Forward proxy for every upstream connection, or none for direct ones. Unset "
        "(null), the environment decides, as for curl, httpx and the agents themselves: "
        "https_proxy/HTTPS_PROXY, http_proxy/HTTP_PROXY, ALL_PROXY, NO_PROXY. ~/.netrc is "
        "never read, and a proxy URL's user:password@ is never logged.",
    ),
    Option(
        name="default_upstream",
        yaml="default_upstream",
        env=None,
        flag=None,
        type="name",
        default="anthropic",
        check=string,
        doc="Upstream for paths that no routing rule matches.",
    ),
    Option(
        name="websocket",
        yaml="websocket",
        env="TOOLSLIM_WEBSOCKET",
        flag="--websocket",
        type="bool",
        default=True,
        check=boolean,
        doc="Relay WebSocket upgrades (Codex's default transport); false answers every upgrade "
        "with 426 so clients fall back to HTTP.",
    ),
    Option(
        name="pipeline",
        yaml="pipeline",
        env="TOOLSLIM_PIPELINE",
        flag="--pipeline",
        type="name,...",
        default=["toolschema"],
        check=pipeline_names,
        doc="Components run on each request body, in order; an empty list ([] here, "
        "--pipeline '' as a flag) forwards every body untouched. "
        "Known: toolschema (lossless annotation stripping), tooldefs (lossless: prunes "
        "unreachable $defs/definitions; put it first: [tooldefs, toolschema]), toolorder "
        "(lossless: puts the tools in one canonical order, so that the same tools in another "
        "order reach the provider as the same prompt prefix) and toolbudget "
        "(LOSSY: shrinks oversized schemas; it changes what the model is told, see "
        "docs/components.md before enabling it). Names of the wider design (format, dedup, "
        "failed_run, cmdfilter, cachesplit) are not implemented yet and are rejected.",
    ),
    Option(
        name="components",
        yaml="components",
        env=None,
        flag=None,
        type="mapping",
        default={},
        check=component_options,
        doc="Options per component: component name -> mapping of options. Unknown component "
        "names and unknown or bad options are start-up errors, also for a component not in "
        "the pipeline. Only toolbudget has options: budget_bytes (default "
        f"{toolbudget.DEFAULT_BUDGET_BYTES}) and exclude_tools (default []).",
    ),
    Option(
        name="timeouts.connect",
        yaml="timeouts.connect",
        env=None,
        flag=None,
        type="seconds",
        default=10,
        check=seconds,
        doc="Seconds to open a TCP (+TLS) connection to an upstream; exceeded -> 504.",
    ),
    Option(
        name="timeouts.response_headers",
        yaml="timeouts.response_headers",
        env=None,
        flag=None,
        type="seconds",
        default=600,
        check=seconds,
        doc="Seconds from sending the request to the upstream's response headers; exceeded -> 504.",
    ),
    Option(
        name="timeouts.idle_chunk",
        yaml="timeouts.idle_chunk",
        env=None,
        flag=None,
        type="seconds",
        default=300,
        check=seconds,
        doc="Longest silence (seconds) between two chunks of a response; exceeded -> the "
        "stream ends. There is no total timeout: a stream lasts as long as it keeps flowing. "
        "This and response_headers are checked every quarter of the shorter one, and at least "
        "once a second: a wait is cut at most that much after its limit.",
    ),
    Option(
        name="timeouts.idle_websocket",
        yaml="timeouts.idle_websocket",
        env=None,
        flag=None,
        type="seconds",
        default=3600,
        check=seconds,
        doc="A WebSocket with no message either way for this many seconds is closed with 1001.",
    ),
    Option(
        name="timeouts.client_headers",
        yaml="timeouts.client_headers",
        env=None,
        flag=None,
        type="seconds",
        default=60,
        check=seconds,
        doc="Seconds a client has to send complete request headers, from the moment it "
        "connects or sends the first byte after a keep-alive pause; exceeded -> the "
        "connection is closed (nginx's client_header_timeout).",
    ),
    Option(
        name="timeouts.client_body_idle",
        yaml="timeouts.client_body_idle",
        env=None,
        flag=None,
        type="seconds",
        default=60,
        check=seconds,
        doc="Longest silence (seconds) between two reads of a request body, also one that "
        "streams through; exceeded -> 408 and the connection is closed (nginx's "
        "client_body_timeout).",
    ),
    Option(
        name="timeouts.client_keepalive",
        yaml="timeouts.client_keepalive",
        env=None,
        flag=None,
        type="seconds",
        default=75,
        check=seconds,
        doc="Seconds an idle keep-alive client connection stays open (nginx's keepalive_timeout).",
    ),
    Option(
        name="memo_size",
        yaml="memo_size",
        env=None,
        flag=None,
        type="integer",
        default=MEMO_SIZE,
        check=integer(0),
        doc="Catalogue rewrites remembered (LRU keyed by SHA-256 of the exact bytes); 0 "
        "disables the memo. An agent session sends one catalogue (a few with subagents); each "
        "entry holds a catalogue as sent, rewritten, and rewritten with the body's short rest "
        "for each of up to four sessions that share it (~190 KB for one session on Claude "
        "Code's 65 KB catalogue, ~380 KB for four). Raise it for a proxy many teams share.",
    ),
    Option(
        name="memo_bytes",
        yaml="memo_bytes",
        env=None,
        flag=None,
        type="size",
        default=f"{MEMO_BYTES // 2**20}MiB",
        check=size,
        doc="Most bytes the memo holds, counted per entry as its catalogue, its rewrite and "
        "up to four copies joined to a body's short rest (~400 KB for Claude Code's 65 KB "
        "catalogue): the least recently used entries go first, whichever of `memo_size` and "
        "this bound is reached. The worker thread that takes bodies over 1 MiB keeps a memo "
        "of its own with the same bounds; drift keeps the facts of previous catalogues "
        "within a quarter of it, and the tool ledger its rows and tool facts within another "
        "quarter (/stats `tools.memory`).",
    ),
    Option(
        name="pool_size",
        yaml="pool_size",
        env=None,
        flag=None,
        type="integer",
        default=64,
        check=integer(1),
        doc="Pooled keep-alive connections per upstream host (at least 1).",
    ),
    Option(
        name="max_body_bytes",
        yaml="max_body_bytes",
        env=None,
        flag=None,
        type="size",
        default="32MiB",
        check=size,
        doc="Largest request body the pipeline transforms (bytes, or '32MiB'); a larger body "
        "is streamed through untouched and counted as skipped `too_large` (also applies to "
        "the decoded size of a gzip/deflate/br/zstd request body).",
    ),
    Option(
        name="max_catalogue_bytes",
        yaml="max_catalogue_bytes",
        env=None,
        flag=None,
        type="size",
        default="8MiB",
        check=size,
        doc="Largest (decoded) request body the pipeline looks at for a catalogue; a larger "
        "one is forwarded untouched and counted as skipped `too_large`. Parsing a body holds "
        "the interpreter for about 2 ms per MiB whatever thread does it, so this bounds the "
        "time one request can take from the others. Bodies over 1 MiB (64 KiB compressed) are "
        "decoded and compacted on a worker thread, not on the event loop.",
    ),
    Option(
        name="max_buffered_bytes",
        yaml="max_buffered_bytes",
        env=None,
        flag=None,
        type="size",
        default="256MiB",
        check=size,
        doc="Most request body bytes held in memory at once, over every connection (with "
        "workers, of the whole host: they share it); a body that does not fit streams through "
        "untouched and is counted as skipped `busy` (it is never refused for it).",
    ),
    Option(
        name="max_connections",
        yaml="max_connections",
        env=None,
        flag=None,
        type="integer",
        default="auto",
        check=connections,
        doc="Most client connections open at once; auto is half of what the descriptor limit "
        "(RLIMIT_NOFILE) leaves after 64, since a request being forwarded holds an upstream "
        "connection too (480 at 1,024). At the limit one is closed to make room: the one "
        "that has spent longest sending its request headers, or else the keep-alive one idle "
        "longest; only when every one is handling a request is a new one answered 503. With "
        "workers, a number is the host's, shared equally; auto is each worker's own (the "
        "descriptor limit is per process).",
    ),
    Option(
        name="shutdown_grace",
        yaml="shutdown_grace",
        env=None,
        flag=None,
        type="seconds",
        default=30,
        check=non_negative,
        doc="Seconds in-flight requests and streams get to finish once the proxy stops "
        "accepting (after SIGTERM/SIGINT and shutdown_delay); the rest are cut then, and the "
        "process exits 0 within a second. A second signal exits at once with status 1.",
    ),
    Option(
        name="shutdown_delay",
        yaml="shutdown_delay",
        env=None,
        flag=None,
        type="seconds",
        default=0,
        check=non_negative,
        doc="Seconds the proxy keeps accepting after SIGTERM/SIGINT while /readyz answers 503, "
        "so that load balancers stop sending first (on Kubernetes, a few seconds; set "
        "terminationGracePeriodSeconds above shutdown_delay + shutdown_grace + 1).",
    ),
    *OBSERVING,
)
OPTION: Final = MappingProxyType({option.name: option for option in OPTIONS})


def _yaml_layout() -> dict[str, Option | dict[str, Option]]:
    """Top-level YAML key -> its option, or (a section such as `listen`) sub-key -> option."""
    layout: dict[str, Option | dict[str, Option]] = {}
    for option in OPTIONS:
        key, dot, sub = option.yaml.partition(".")
        if dot:
            section = layout.setdefault(key, {})
            assert isinstance(section, dict)  # a key is a section or an option, never both
            section[sub] = option
        else:
            layout[key] = option
    return layout


LAYOUT: Final = _yaml_layout()
