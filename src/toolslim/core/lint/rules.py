"""PURE. The lint rules as one table: which providers each applies to, how bad breaking it is,
its check, its message and its fix. Every rule comes from the provider's documentation or from
the provider's own error message as users quote it; docs/lint.md cites each beside its id.

Severity: `rejected`, the provider refuses the whole request; `degraded`, the provider takes it
but the model sees less, or the provider changes the tool. Where two of a provider's pages
disagree (a 64 against a 128 character limit), what breaks both readings is `rejected` and
what breaks only the stricter one `degraded`. Must not import aiohttp or logging.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Final, Literal, get_args

from toolslim.core.lint import schemas
from toolslim.core.lint.view import Provider, Tool, View

Severity = Literal["rejected", "degraded"]
SEVERITIES: Final[tuple[Severity, ...]] = get_args(Severity)
# What a check says: the tool that breaks the rule (None: the catalogue as a whole) and how.
Check = Callable[[View], Iterator[tuple[Tool | None, str]]]

OPENAI_MAX_TOOLS: Final = 128
GEMINI_MAX_DECLARATIONS: Final = 512
# Names as each reading allows them (`fullmatch`: `$` would allow a trailing newline).
ANTHROPIC_NAME: Final = re.compile(r"[a-zA-Z0-9_-]{1,128}")  # the tool-definition page today
ANTHROPIC_NAME_64: Final = re.compile(r"[a-zA-Z0-9_-]{1,64}")  # the older page, older errors
OPENAI_NAME: Final = re.compile(r"[a-zA-Z0-9_-]{1,64}")
GEMINI_NAME: Final = re.compile(r"[A-Za-z_][A-Za-z0-9_.:-]{0,127}")  # Vertex AI's page
GEMINI_NAME_64: Final = re.compile(r"[A-Za-z_][A-Za-z0-9_.-]{0,63}")  # the API's older error
ROOT_COMBINATORS: Final = ("allOf", "anyOf", "oneOf")


@dataclass(frozen=True, slots=True)
class Rule:
    """One row of RULES."""

    id: str
    providers: tuple[Provider, ...]
    severity: Severity
    check: Check
    message: str
    fix: str
    # The provider's error text as users quote it (empty: the provider accepts the request):
    # an upstream 400 that contains it is explained by this rule.
    quoted: str = ""
    offline: bool = False  # checked by `toolslim lint` only, never on the proxy


@dataclass(frozen=True, slots=True)
class Finding:
    """One rule one tool breaks (tool `*`: the catalogue as a whole), for one provider."""

    rule: str
    provider: Provider
    severity: Severity
    tool: str
    server: str
    place: str  # where the provider's error text would say the tool is
    detail: str

    @property
    def fix(self) -> str:
        return RULES[self.rule].fix

    @property
    def message(self) -> str:
        return RULES[self.rule].message


# --- the checks --------------------------------------------------------------------------


def _names(pattern: re.Pattern[str], stricter: re.Pattern[str] | None = None) -> Check:
    """Tools whose name `pattern` refuses; with `stricter`, those only `stricter` refuses."""

    def check(view: View) -> Iterator[tuple[Tool | None, str]]:
        for tool in view.tools:
            name = tool.name
            if name is None:
                continue
            if stricter is None:
                if not pattern.fullmatch(name):
                    yield tool, f"name {name!r} ({len(name)} characters)"
            elif pattern.fullmatch(name) and not stricter.fullmatch(name):
                yield tool, f"name {name!r} ({len(name)} characters)"

    return check


def _duplicates(view: View) -> Iterator[tuple[Tool | None, str]]:
    counts = Counter(tool.name for tool in view.tools if tool.name is not None)
    seen: set[str] = set()
    for tool in view.tools:
        if tool.name is not None and counts[tool.name] > 1 and tool.name not in seen:
            seen.add(tool.name)
            yield tool, f"{counts[tool.name]} tools are named {tool.name!r}"


def _too_many(limit: int, declarations: bool) -> Check:
    def check(view: View) -> Iterator[tuple[Tool | None, str]]:
        # OpenAI counts its own `tools` array; a catalogue of another shape would be sent as
        # one entry per tool.
        own = view.shape in ("openai-chat", "openai-responses")
        count = view.entries if own and not declarations else len(view.tools)
        if count > limit:
            servers = Counter(tool.server for tool in view.tools).most_common(3)
            top = ", ".join(f"{server} ({n})" for server, n in servers)
            yield None, f"{count} {'declarations' if declarations else 'tools'}; most: {top}"

    return check


def _root_combinator(view: View) -> Iterator[tuple[Tool | None, str]]:
    for tool in view.tools:
        if isinstance(tool.schema, dict):
            found = [key for key in ROOT_COMBINATORS if key in tool.schema]
            if found:
                yield tool, f"{tool.field} has {', '.join(found)} at its root"


def _strict(find: Callable[[object], list[str]], what: str) -> Check:
    def check(view: View) -> Iterator[tuple[Tool | None, str]]:
        for tool in view.tools:
            if tool.strict is True and tool.schema is not None:
                places = find(tool.schema)
                if places:
                    yield tool, f"{what}: {schemas.summary(places)}"

    return check


def _strict_by_default(view: View) -> Iterator[tuple[Tool | None, str]]:
    if view.shape != "openai-responses":
        return
    for tool in view.tools:
        if tool.kind == "function" and tool.strict is None and tool.field is not None:
            optional = schemas.optional_properties(tool.schema)
            if optional:
                yield tool, f"strict not given; optional: {schemas.summary(optional)}"


def _gemini_subset(view: View) -> Iterator[tuple[Tool | None, str]]:
    for tool in view.tools:
        if tool.field == "parameters" and tool.schema is not None:
            unknown = schemas.gemini_unknown(tool.schema)
            if unknown:
                yield tool, f"outside the Schema subset: {schemas.summary(unknown)}"


def _dialect(view: View) -> Iterator[tuple[Tool | None, str]]:
    for tool in view.tools:
        if tool.field is not None:
            errors = schemas.dialect_errors(tool.schema)
            if errors:
                yield tool, errors[0]


# --- the table ---------------------------------------------------------------------------

_RULES: Final = (
    Rule(
        "anthropic_name",
        ("anthropic",),
        "rejected",
        _names(ANTHROPIC_NAME),
        "Anthropic refuses a tool name outside ^[a-zA-Z0-9_-]{1,128}$.",
        "Rename the tool (in its MCP server) to letters, digits, _ and -, at most 64 characters.",
        quoted="name: String should match pattern",
    ),
    Rule(
        "anthropic_name_64",
        ("anthropic",),
        "degraded",
        _names(ANTHROPIC_NAME, ANTHROPIC_NAME_64),
        "Anthropic's pages disagree on the name limit (64 or 128 characters); this name is"
        " longer than 64.",
        "Shorten the tool name to at most 64 characters (server prefix included).",
    ),
    Rule(
        "anthropic_root_combinator",
        ("anthropic",),
        "rejected",
        _root_combinator,
        "Anthropic refuses an input_schema with oneOf, allOf or anyOf at its root.",
        "Make the schema's root a plain object schema: move the alternatives into a property,"
        " or check the combination in the tool's code.",
        quoted="does not support oneOf, allOf, or anyOf at the top level",
    ),
    Rule(
        "anthropic_duplicate_name",
        ("anthropic",),
        "rejected",
        _duplicates,
        "Anthropic refuses a request whose tools share a name.",
        "Turn off one of the tools or servers that bring the same name, or rename one.",
        quoted="Tool names must be unique",
    ),
    Rule(
        "anthropic_schema_invalid",
        ("anthropic",),
        "rejected",
        _dialect,
        "Anthropic refuses an input_schema that is not valid JSON Schema.",
        "Fix the schema so that it validates against its dialect's metaschema.",
        quoted="JSON schema is invalid",
        offline=True,
    ),
    Rule(
        "openai_tool_count",
        ("openai",),
        "rejected",
        _too_many(OPENAI_MAX_TOOLS, declarations=False),
        f"OpenAI refuses more than {OPENAI_MAX_TOOLS} tools in one request.",
        f"Turn off MCP servers or tools until at most {OPENAI_MAX_TOOLS} remain.",
        quoted="array too long",
    ),
    Rule(
        "openai_name",
        ("openai",),
        "rejected",
        _names(OPENAI_NAME),
        "OpenAI refuses a function name outside a-z, A-Z, 0-9, _ and -, or longer than 64.",
        "Rename the tool to letters, digits, _ and -, at most 64 characters.",
        quoted="does not match pattern",
    ),
    Rule(
        "openai_strict_additional_properties",
        ("openai",),
        "rejected",
        _strict(schemas.not_closed, "objects without additionalProperties: false"),
        "With strict: true OpenAI refuses an object schema without additionalProperties: false.",
        "Add additionalProperties: false to every object in the schema, or send strict: false.",
        quoted="'additionalProperties' is required to be supplied and to be false",
    ),
    Rule(
        "openai_strict_required",
        ("openai",),
        "rejected",
        _strict(schemas.not_all_required, "properties not in required"),
        "With strict: true OpenAI refuses an object schema whose required omits a property.",
        "List every property in required (make an optional one nullable), or send strict: false.",
        quoted="'required' is required to be supplied and to be an array",
    ),
    Rule(
        "openai_responses_strict_default",
        ("openai",),
        "degraded",
        _strict_by_default,
        "Responses normalizes a function without strict into strict mode when it can: its"
        " optional parameters become required, so the model fills them in.",
        "Send strict: false on this tool to keep its optional parameters optional.",
    ),
    Rule(
        "openai_schema_invalid",
        ("openai",),
        "rejected",
        _dialect,
        "OpenAI refuses function parameters that are not valid JSON Schema.",
        "Fix the schema so that it validates against its dialect's metaschema.",
        quoted="Invalid schema for function",
        offline=True,
    ),
    Rule(
        "gemini_declaration_count",
        ("gemini",),
        "rejected",
        _too_many(GEMINI_MAX_DECLARATIONS, declarations=True),
        f"Gemini refuses more than {GEMINI_MAX_DECLARATIONS} function declarations.",
        "Turn off MCP servers or tools (excludeTools / includeTools in Gemini CLI) until at"
        f" most {GEMINI_MAX_DECLARATIONS} remain.",
        quoted="function declarations can be specified",
    ),
    Rule(
        "gemini_name",
        ("gemini",),
        "rejected",
        _names(GEMINI_NAME),
        "Gemini refuses a function name that does not start with a letter or _, holds"
        " characters other than a-z, A-Z, 0-9, _ . : -, or is longer than 128.",
        "Rename the tool: start with a letter, use letters, digits, _ . -, at most 64 characters.",
        quoted="Invalid function name",
    ),
    Rule(
        "gemini_name_64",
        ("gemini",),
        "degraded",
        _names(GEMINI_NAME, GEMINI_NAME_64),
        "Gemini's pages and errors disagree (64 or 128 characters, colons or not); this name"
        " passes only the lenient reading.",
        "Shorten the name to at most 64 characters and leave colons out.",
    ),
    Rule(
        "gemini_duplicate_name",
        ("gemini",),
        "rejected",
        _duplicates,
        "Gemini refuses two function declarations with the same name.",
        "Turn off one of the tools or servers that bring the same name, or rename one.",
        quoted="Duplicate function declaration found",
    ),
    Rule(
        "gemini_parameters_keyword",
        ("gemini",),
        "rejected",
        _gemini_subset,
        "Gemini's `parameters` takes an OpenAPI subset and refuses every other keyword.",
        "Send the schema as parametersJsonSchema (JSON Schema), as Gemini CLI does, or drop the"
        " keywords the subset does not have.",
        quoted="Cannot find field",
    ),
)
RULES: Final[Mapping[str, Rule]] = MappingProxyType({rule.id: rule for rule in _RULES})


def check(view: View, *, offline: bool = False) -> tuple[Finding, ...]:
    """Every finding for `view`, in table order then tool order; `offline` adds the rules only
    `toolslim lint` checks."""
    findings = []
    for rule in _RULES:
        if view.provider not in rule.providers or (rule.offline and not offline):
            continue
        for tool, detail in rule.check(view):
            findings.append(
                Finding(
                    rule.id,
                    view.provider,
                    rule.severity,
                    tool.label if tool is not None else "*",
                    tool.server if tool is not None else "*",
                    tool.place if tool is not None else "tools",
                    detail,
                )
            )
    return tuple(findings)
