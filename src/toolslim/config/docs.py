"""PURE. The two files derived from the option table: config.example.yaml (every option at its
default, its doc as comments) and docs/configuration.md (one table row per option)."""

from __future__ import annotations

import textwrap
from typing import Final

from toolslim.config.checks import Option, yaml_text
from toolslim.config.options import LAYOUT, OPTIONS


def _spellings(option: Option) -> list[str]:
    """How to set `option` besides the file, as the example's comments and docs say it."""
    spellings = []
    if option.flag is not None and option.type == "bool":
        spellings.append(f"{option.flag}/--no-{option.flag.removeprefix('--')}")
    elif option.flag is not None and option.per_key:
        spellings.append(f"{option.flag} {option.type.upper()}")
    elif option.flag is not None:
        spellings.append(option.flag)
    if option.env is not None:
        spellings.append(option.env)
    return spellings


def _comment(text: str, indent: str) -> list[str]:
    lines = textwrap.wrap(
        text, width=100 - len(indent) - 2, break_long_words=False, break_on_hyphens=False
    )
    return [f"{indent}# {line}" for line in lines]


_EXAMPLE_HEADER: Final = (
    "toolslim configuration: every key with its default. Pass it with `toolslim serve --config "
    "FILE` (or TOOLSLIM_CONFIG=FILE). Precedence: flags > environment > this file > defaults. "
    "An unknown key is an error; so is a bad value in any layer, even one a flag overrides "
    "(the message names the key and the value). Generated from toolslim.config.settings.OPTIONS."
)


def render_example() -> str:
    """config.example.yaml: every option at its default, its doc and spellings as comments."""
    lines = _comment(_EXAMPLE_HEADER, "")
    for key, entry in LAYOUT.items():
        lines.append("")
        options = {key: entry} if isinstance(entry, Option) else entry
        indent = "" if isinstance(entry, Option) else "  "
        if indent:
            lines.append(f"{key}:")
        for sub, option in options.items():
            spellings = ", ".join(_spellings(option))
            lines += _comment(f"{option.doc} ({spellings})" if spellings else option.doc, indent)
            if option.per_key and option.default:
                lines.append(f"{indent}{sub}:")
                lines += [f"{indent}  {k}: {yaml_text(v)}" for k, v in option.default.items()]
            else:
                lines.append(f"{indent}{sub}: {option.default_text}")
    return "\n".join(lines) + "\n"


_DOCS_HEADER: Final = """\
# Configuration

Settings come from flags, then environment variables, then a YAML file (`--config FILE` or
`TOOLSLIM_CONFIG`), then the defaults. Every given value is validated once at start-up, also one
that a later layer overrides; an unknown key or a bad value stops the proxy with an error that
names the key, variable or flag and repeats the value (never a secret). `toolslim report` reads
the same file and takes `--pipeline` and the two `--cache-*-multiplier` flags.

This table and [config.example.yaml](../config.example.yaml) are generated from
`toolslim.config.settings.OPTIONS`; a test holds them equal.

| YAML key | Type | Default | Flag, environment | What it does |
|---|---|---|---|---|
"""


def render_docs() -> str:
    """docs/configuration.md: one table row per option."""
    rows = []
    for option in OPTIONS:
        default = "`" + option.default_text.replace("|", "\\|") + "`"
        spellings = ", ".join(f"`{s}`" for s in _spellings(option))
        doc = option.doc.replace("*", "\\*")  # /v1/messages* is a path, not emphasis
        rows.append(f"| `{option.yaml}` | {option.type} | {default} | {spellings} | {doc} |")
    return _DOCS_HEADER + "\n".join(rows) + "\n"
