"""The command line: the only reader of argv and os.environ. Subcommands: serve, compact,
report, lint, tools.

Option flags and their --help come from `config.OPTIONS`; their values go to `load_settings`
as given, so a bad one is reported like a bad YAML value, naming the flag.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Collection, Mapping, Sequence
from typing import Any, TextIO

from toolslim import __version__
from toolslim.config.settings import OPTIONS, ConfigError, Option, Settings, load_settings
from toolslim.core.pipeline import Pipeline

# The options each offline command takes as flags (serve takes every option that has a flag).
_COMPACT_FLAGS: tuple[str, ...] = ("pipeline",)
_REPORT_FLAGS: tuple[str, ...] = ("pipeline", "cache_read_multiplier", "cache_write_multiplier")


def _pair(option: Option) -> Callable[[str], tuple[str, str]]:
    metavar = option.type.upper()

    def parse(text: str) -> tuple[str, str]:
        key, sep, value = text.partition("=")
        if not sep or not key or not value:
            raise argparse.ArgumentTypeError(f"{option.flag} expects {metavar}, got {text!r}")
        return key, value

    return parse


def _help(option: Option) -> str:
    key = option.type.upper().partition("=")[0]
    where = [f"{option.yaml}.{key}" if option.per_key else option.yaml]
    where += [f"${option.env}"] if option.env else []
    tail = "repeatable" if option.per_key else f"default {option.default_text}"
    return f"{option.summary} ({', '.join(where)}; {tail})".replace("%", "%%")


def _add_flags(parser: argparse.ArgumentParser, names: Collection[str] | None) -> None:
    """Add the flag of each option in `names` (None: every option that has one)."""
    for option in OPTIONS:
        if option.flag is None or (names is not None and option.name not in names):
            continue
        if option.type == "bool":
            parser.add_argument(
                option.flag,
                dest=option.name,
                action=argparse.BooleanOptionalAction,
                help=_help(option),
            )
        elif option.per_key:
            parser.add_argument(
                option.flag,
                dest=option.name,
                type=_pair(option),
                action="append",
                metavar=option.type.upper(),
                help=_help(option),
            )
        else:
            parser.add_argument(
                option.flag, dest=option.name, metavar=option.type.upper(), help=_help(option)
            )


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="toolslim",
        description="A reverse proxy that losslessly compacts the tool catalogues LLM agents send.",
    )
    parser.add_argument("--version", action="version", version=f"toolslim {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")

    serve = commands.add_parser("serve", help="run the proxy (default: 127.0.0.1:8788)")
    serve.add_argument("--config", metavar="FILE", help="YAML settings (or $TOOLSLIM_CONFIG)")
    _add_flags(serve, None)

    compact = commands.add_parser(
        "compact", help="compact one request body (or bare tools array) to stdout"
    )
    compact.add_argument("file", nargs="?", default="-", help="input file, or - for stdin")
    compact.add_argument("--config", metavar="FILE", help="YAML settings (or $TOOLSLIM_CONFIG)")
    _add_flags(compact, _COMPACT_FLAGS)

    report = commands.add_parser("report", help="replay captures offline and print the savings")
    report.add_argument(
        "files",
        nargs="+",
        metavar="FILE",
        help="a capture (JSON Lines from serve --capture) or a request body (JSON); other"
        " files are skipped, each named on stderr with why",
    )
    report.add_argument("--config", metavar="FILE", help="YAML settings (or $TOOLSLIM_CONFIG)")
    report.add_argument(
        "--json", action="store_true", help="print a JSON list, one object per file, not tables"
    )
    report.add_argument(
        "--verbose",
        action="store_true",
        help="also name each capture line that was skipped, by its number, and why",
    )
    _add_flags(report, _REPORT_FLAGS)

    lint = commands.add_parser("lint", help="name the tools a provider will refuse, and the fix")
    lint.add_argument(
        "files",
        nargs="+",
        metavar="FILE",
        help="request bodies, captures, bare tools arrays, MCP tools/list results",
    )
    lint.add_argument(
        "--provider",
        action="append",
        choices=("anthropic", "openai", "gemini"),
        help="check for this provider (repeatable; default: all three)",
    )
    lint.add_argument("--json", action="store_true", help="print a JSON list of findings")

    tools = commands.add_parser(
        "tools", help="what each tool and MCP server costs, from the state file of serve"
    )
    tools.add_argument(
        "--state",
        metavar="FILE",
        help="the state file (default: state_file, as serve uses it)",
    )
    tools.add_argument("--since", metavar="Nd|DATE", help="only the last N days, or from DATE")
    tools.add_argument("--json", action="store_true", help="print /stats `tools` as JSON")
    tools.add_argument("--config", metavar="FILE", help="YAML settings (or $TOOLSLIM_CONFIG)")
    return parser


def _load(args: argparse.Namespace, env: Mapping[str, str]) -> Settings:
    """The Settings of a parsed command line; raises ConfigError."""
    flags: dict[str, Any] = {}
    for option in OPTIONS:
        value = getattr(args, option.name, None)
        if value is not None:
            flags[option.name] = dict(value) if option.per_key else value
    return load_settings(args.config or env.get("TOOLSLIM_CONFIG"), flags, env)


def serve_settings(argv: Sequence[str], env: Mapping[str, str]) -> Settings:
    """The Settings `toolslim serve ARGV` runs with, in environment `env`; raises ConfigError.

    A malformed command line exits through argparse (status 2), as `main` does.
    """
    return _load(_parser().parse_args(["serve", *argv]), env)


def main(argv: Sequence[str] | None = None, env: Mapping[str, str] | None = None) -> int:
    """Entry point of the `toolslim` console script and `python -m toolslim`."""
    args = _parser().parse_args(argv)
    env = os.environ if env is None else env
    if args.command is None:
        _parser().print_help(sys.stderr)
        return 2
    if args.command == "lint":  # takes no settings
        from toolslim.offline.lint import run

        return run(args.files, args.provider or (), args.json, sys.stdout, sys.stderr)
    try:
        settings = _load(args, env)
    except ConfigError as exc:
        print(f"toolslim: configuration error: {exc}", file=sys.stderr)
        return 2
    if args.command == "serve":
        from toolslim.serve.serving import serve

        return serve(settings)
    if args.command == "compact":
        return _compact(args.file, settings, sys.stdin.buffer, sys.stdout.buffer, sys.stderr)
    if args.command == "tools":
        from toolslim.offline.tools import run_tools

        return run_tools(
            args.state or settings.state_file,
            since=args.since,
            as_json=args.json,
            unused_after=(settings.ledger_min_requests, settings.ledger_min_sessions),
            out=sys.stdout,
            err=sys.stderr,
        )
    return _report(args, settings)


def _pipeline(settings: Settings) -> Pipeline:
    """The Pipeline the offline commands run: --pipeline, else the configured one."""
    # Settings checked the names and every component's options already.
    return Pipeline(
        settings.pipeline,
        memo_size=settings.memo_size,
        memo_bytes=settings.memo_bytes,
        options=settings.components,
    )


def _compact(file: str, settings: Settings, stdin: Any, stdout: Any, stderr: TextIO) -> int:
    try:
        if file == "-":
            data = stdin.read()
        else:
            with open(file, "rb") as handle:
                data = handle.read()
    except OSError as exc:
        print(f"toolslim compact: cannot read {file}: {exc.strerror}", file=stderr)
        return 2
    from toolslim.offline.compact import compact_input, summary

    output, report, tokens = compact_input(_pipeline(settings), data)
    stdout.write(output)
    stdout.flush()
    print(summary(report, tokens), file=stderr)
    return 0


def _report(args: argparse.Namespace, settings: Settings) -> int:
    from toolslim.offline.report import run_report

    return run_report(
        args.files,
        _pipeline(settings),
        as_json=args.json,
        read_multiplier=settings.cache_read_multiplier,
        write_multiplier=settings.cache_write_multiplier,
        out=sys.stdout,
        err=sys.stderr,
        verbose=args.verbose,
    )
