"""The observers' options, rows of the option table (`options.OPTIONS` ends with them): the log,
the admin token over /stats and /metrics, the capture, the savings arithmetic, drift and the
tool ledger. Each default is spelled here once; the observe package reads it from here.
"""

from __future__ import annotations

from typing import Final

from toolslim.config.checks import (
    LOG_LEVELS,
    Option,
    boolean,
    integer,
    log_level,
    model_prices,
    non_negative,
    optional_string,
    positive,
    size,
    state_file,
    token,
)

READ_MULTIPLIER: Final = 0.1  # cache read, x base input price
WRITE_MULTIPLIER: Final = 1.25  # 5-minute cache write, x base input price
DRIFT_MAX_SESSIONS: Final = 10_000

OBSERVING: Final[tuple[Option, ...]] = (
    Option(
        name="log_level",
        yaml="log_level",
        env="TOOLSLIM_LOG_LEVEL",
        flag="--log-level",
        type="level",
        default="info",
        check=log_level,
        doc=f"One of {', '.join(LOG_LEVELS[:-1])} or {LOG_LEVELS[-1]}. At info, one line per "
        "request on stderr, never a credential or a body. Lines are written in batches: "
        "within about a second, a warning or worse at once with the lines before it.",
    ),
    Option(
        name="admin_token",
        yaml="admin_token",
        env="TOOLSLIM_ADMIN_TOKEN",
        flag="--admin-token",
        type="token",
        default=None,
        check=token,
        doc="Bearer token required on /stats and /metrics (the dashboard page itself is "
        "public); prefer TOOLSLIM_ADMIN_TOKEN to the flag, which shows up in `ps`. At least 16 "
        "printable ASCII characters, no spaces; the proxied API paths never need it.",
    ),
    Option(
        name="capture_dir",
        yaml="capture_dir",
        env="TOOLSLIM_CAPTURE_DIR",
        flag="--capture",
        type="dir",
        default=None,
        check=optional_string,
        doc="Directory where each request is recorded as JSON Lines for `toolslim report`; "
        "null records nothing.",
    ),
    Option(
        name="capture_max_bytes",
        yaml="capture_max_bytes",
        env=None,
        flag=None,
        type="size",
        default="256MiB",
        check=size,
        doc="Largest total size of the capture directory (bytes, or '256MiB').",
    ),
    Option(
        name="cache_read_multiplier",
        yaml="cache.read_multiplier",
        env=None,
        flag="--cache-read-multiplier",
        type="number",
        default=READ_MULTIPLIER,
        check=positive,
        doc="Price of a cache read per token, as a multiple of a normal input token's (> 0). "
        "It and write_multiplier drive the savings arithmetic of /stats and `toolslim report`.",
    ),
    Option(
        name="cache_write_multiplier",
        yaml="cache.write_multiplier",
        env=None,
        flag="--cache-write-multiplier",
        type="number",
        default=WRITE_MULTIPLIER,
        check=non_negative,
        doc="Price of a (5-minute) cache write per token, as a multiple of a normal input "
        "token's (>= 0).",
    ),
    Option(
        name="drift_max_sessions",
        yaml="drift.max_sessions",
        env=None,
        flag=None,
        type="integer",
        default=DRIFT_MAX_SESSIONS,
        check=integer(1),
        doc="Sessions whose recent catalogues drift tracking remembers (an LRU of hashes; the "
        "least recently seen session goes first), to tell which catalogue changes within a "
        "session break the provider's prompt cache (/stats drift, docs/drift.md); with "
        "workers, the host's, in one store they share. Drift needs a pipeline with at least "
        "one component.",
    ),
    Option(
        name="state_file",
        yaml="state_file",
        env="TOOLSLIM_STATE_FILE",
        flag="--state-file",
        type="path",
        default="auto",
        check=state_file,
        doc="SQLite file (an absolute path) where `toolslim serve` keeps the tool ledger (/stats "
        "tools) across restarts, in daily buckets, written every few seconds and at shutdown; "
        "auto is $XDG_STATE_HOME/toolslim/state.sqlite3 (else ~/.local/state/...), none keeps "
        "nothing. A file that is not toolslim's stops the start, naming it.",
    ),
    Option(
        name="prices",
        yaml="prices",
        env=None,
        flag=None,
        type="mapping",
        default={},
        check=model_prices,
        doc="Model prices for the tool ledger's USD, model -> {input, cache_read, cache_write} "
        "in USD per million tokens, over the prices of the genai-prices package (a model "
        "neither knows is counted unpriced).",
    ),
    Option(
        name="ledger_min_requests",
        yaml="ledger.min_requests",
        env=None,
        flag=None,
        type="integer",
        default=50,
        check=integer(1),
        doc="Requests a tool must be offered in, never called, to be listed as unused.",
    ),
    Option(
        name="ledger_min_sessions",
        yaml="ledger.min_sessions",
        env=None,
        flag=None,
        type="integer",
        default=3,
        check=integer(1),
        doc="Sessions those requests must come from for a tool to be listed as unused.",
    ),
    Option(
        name="ledger_tool_metrics",
        yaml="ledger.tool_metrics",
        env=None,
        flag=None,
        type="bool",
        default=False,
        check=boolean,
        doc="Also export /metrics series per tool (toolslim_tool_costliest_*, for the 50 "
        "costliest tools /stats lists); per MCP server the tool series always are.",
    ),
)
