"""The command line: the only reader of argv and os.environ. Subcommands: serve, compact, report."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Mapping, Sequence
from typing import Any, TextIO

from toolslim import __version__


def _upstream(text: str) -> tuple[str, str]:
    name, sep, url = text.partition("=")
    if not sep or not name or not url:
        raise argparse.ArgumentTypeError(f"--upstream expects NAME=URL, got {text!r}")
    return name, url


def _names(text: str) -> list[str]:
    return [n.strip() for n in text.split(",") if n.strip()]


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="toolslim",
        description="A reverse proxy that losslessly compacts the tool catalogues LLM agents send.",
    )
    parser.add_argument("--version", action="version", version=f"toolslim {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")

    serve = commands.add_parser("serve", help="run the proxy (default: 127.0.0.1:8788)")
    serve.add_argument("--config", metavar="FILE", help="YAML settings (or $TOOLSLIM_CONFIG)")
    serve.add_argument("--host", help="listen address (default 127.0.0.1)")
    serve.add_argument("--port", type=int, help="listen port (default 8788)")
    serve.add_argument(
        "--upstream",
        type=_upstream,
        action="append",
        metavar="NAME=URL",
        help="override one upstream base URL (repeatable)",
    )
    serve.add_argument(
        "--pipeline",
        type=_names,
        metavar="NAME,...",
        help="components to run, in order ('' for pure pass-through)",
    )
    serve.add_argument("--log-level", choices=["debug", "info", "warning", "error"])
    serve.add_argument("--capture", metavar="DIR", help="record each request as JSON Lines")
    serve.add_argument(
        "--admin-token",
        help="bearer token for /stats and /metrics (the dashboard page itself is public) "
        "(prefer $TOOLSLIM_ADMIN_TOKEN: flags show up in `ps`)",
    )

    compact = commands.add_parser(
        "compact", help="compact one request body (or bare tools array) to stdout"
    )
    compact.add_argument("file", nargs="?", default="-", help="input file, or - for stdin")
    compact.add_argument("--pipeline", type=_names, metavar="NAME,...")
    compact.add_argument("--config", metavar="FILE")

    report = commands.add_parser("report", help="replay captures offline and print the savings")
    report.add_argument("files", nargs="+", metavar="FILE")
    report.add_argument("--pipeline", type=_names, metavar="NAME,...")
    report.add_argument("--config", metavar="FILE")
    report.add_argument("--json", action="store_true", help="print JSON instead of tables")
    report.add_argument("--cache-read-multiplier", type=float, default=None)
    report.add_argument("--cache-write-multiplier", type=float, default=None)
    return parser


def main(argv: Sequence[str] | None = None, env: Mapping[str, str] | None = None) -> int:
    """Entry point of the `toolslim` console script and `python -m toolslim`."""
    args = _parser().parse_args(argv)
    env = os.environ if env is None else env
    if args.command is None:
        _parser().print_help(sys.stderr)
        return 2
    if args.command == "serve":
        return _serve(args, env)
    if args.command == "compact":
        return _compact(args, env, sys.stdin.buffer, sys.stdout.buffer, sys.stderr)
    return _report(args, env)


def _settings(args: argparse.Namespace, env: Mapping[str, str], flags: dict[str, Any]) -> Any:
    from toolslim.config import ConfigError, load_settings

    path = getattr(args, "config", None) or env.get("TOOLSLIM_CONFIG")
    try:
        return load_settings(path, flags, env)
    except ConfigError as exc:
        print(f"toolslim: configuration error: {exc}", file=sys.stderr)
        return None


def _serve(args: argparse.Namespace, env: Mapping[str, str]) -> int:
    flags: dict[str, Any] = {
        "host": args.host,
        "port": args.port,
        "upstreams": dict(args.upstream) if args.upstream else None,
        "pipeline": args.pipeline,
        "log_level": args.log_level,
        "capture_dir": args.capture,
        "admin_token": args.admin_token,
    }
    settings = _settings(args, env, {k: v for k, v in flags.items() if v is not None})
    if settings is None:
        return 2
    from toolslim.app import serve

    return serve(settings)


def _pipeline(args: argparse.Namespace, env: Mapping[str, str]) -> Any:
    """The Pipeline the offline commands run: --pipeline, else the configured one."""
    from toolslim.pipeline import Pipeline

    flags = {"pipeline": args.pipeline} if args.pipeline is not None else {}
    settings = _settings(args, env, flags)
    if settings is None:
        return None
    # Settings checked the names and every component's options already.
    return Pipeline(settings.pipeline, memo_size=settings.memo_size, options=settings.components)


def _compact(
    args: argparse.Namespace, env: Mapping[str, str], stdin: Any, stdout: Any, stderr: TextIO
) -> int:
    try:
        if args.file == "-":
            data = stdin.read()
        else:
            with open(args.file, "rb") as handle:
                data = handle.read()
    except OSError as exc:
        print(f"toolslim compact: cannot read {args.file}: {exc.strerror}", file=stderr)
        return 2
    pipeline = _pipeline(args, env)
    if pipeline is None:
        return 2
    from toolslim.compact import compact_input, summary

    output, report, tokens = compact_input(pipeline, data)
    stdout.write(output)
    stdout.flush()
    print(summary(report, tokens), file=stderr)
    return 0


def _report(args: argparse.Namespace, env: Mapping[str, str]) -> int:
    pipeline = _pipeline(args, env)
    if pipeline is None:
        return 2
    from toolslim.report import run_report

    return run_report(
        args.files,
        pipeline,
        as_json=args.json,
        read_multiplier=args.cache_read_multiplier,
        write_multiplier=args.cache_write_multiplier,
        out=sys.stdout,
        err=sys.stderr,
    )
