"""PURE. The two kinds of step, the registry of components, the ordered Pipeline and its
fail-open runner.

A schema step rewrites one tool schema at a time (toolschema, tooldefs, toolbudget); a catalogue
step puts a whole catalogue in an order (toolorder). Each kind is one Protocol with one verb,
and the registry declares which kind each component is.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, Protocol, cast

from toolslim.core import entry, envelope
from toolslim.core.components import toolbudget, tooldefs, toolorder, toolschema
from toolslim.core.entry import Outcome, SkipReason, StageCounts, Step
from toolslim.core.envelope import Piece
from toolslim.core.facts import CatalogueFacts
from toolslim.core.memo import Memo
from toolslim.core.schema import JSON


class SchemaStep(Protocol):
    """A schema step: a name plus one verb that rewrites one tool's input schema.

    `rewrite` returns the very same object when it changes nothing (identity means "no
    change"), never mutates its input, and counts what it removed by name.
    """

    name: str

    def rewrite(self, schema: JSON, tool_name: str | None) -> tuple[JSON, Counter[str]]: ...


class CatalogueStep(Protocol):
    """A catalogue step: a name plus one verb that puts a whole catalogue's tools in an order.

    `order` moves tools and changes no byte of one, returns the very same list when nothing
    moves, never mutates its input, and counts what it moved by name.
    """

    name: str

    def order(self, catalogue: list[JSON]) -> tuple[list[JSON], Counter[str]]: ...


Component = SchemaStep | CatalogueStep  # what the registry makes, of either kind


@dataclass(frozen=True, slots=True)
class ComponentRun:
    """What one component did to one request (summed over the request's catalogues)."""

    component: str
    outcome: Outcome
    reason: str | None = None  # a SkipReason when skipped, the exception's class on error
    tools_seen: int = 0
    tools_changed: int = 0
    removed: Mapping[str, int] = field(default_factory=dict)
    bytes_before: int = 0
    bytes_after: int = 0
    deferred_bytes_saved: int = 0  # of bytes_saved, those removed from deferred tools

    @property
    def bytes_saved(self) -> int:
        """Bytes removed from the request, deferred tools' included."""
        return self.bytes_before - self.bytes_after


class TokenCounts(Protocol):
    """Token counts of a catalogue's canonical stages, computed at most once per catalogue."""

    def token_counts(self, count: Callable[[bytes], int]) -> StageCounts: ...

    def cached_token_counts(self) -> StageCounts | None: ...


class TokenTotals(dict[str, tuple[int, int]]):
    """Catalogue tokens before/after per applied component, of one request's catalogues;
    `deferred` holds the same for their deferred tools' part (empty when they have none),
    which the provider keeps out of the prompt until a tool search loads it.

    A dict of the totals, so that what only passes the totals on reads it as one."""

    __slots__ = ("deferred",)

    def __init__(
        self,
        totals: Mapping[str, tuple[int, int]] | None = None,
        deferred: Mapping[str, tuple[int, int]] | None = None,
    ) -> None:
        super().__init__(totals or {})
        self.deferred: dict[str, tuple[int, int]] = dict(deferred or {})


@dataclass(slots=True, eq=False)
class AppliedCatalogue:
    """An adopted catalogue: stage k+1 is component k's output (stage 0 is the input).

    `components` names the component behind each stage transition, so tokens can be
    attributed per component once counted (off the request path: tokenizing is slow).
    A memo hit on a one-catalogue body reports the very same object again (a body with
    several catalogues gets new ones).
    """

    stages: TokenCounts
    components: tuple[str, ...]
    applied: tuple[bool, ...]
    _totals: TokenTotals | None = field(default=None, init=False, repr=False)

    def totals(self, counts: StageCounts) -> TokenTotals:
        """Tokens before/after per applied component, from the stages' token counts."""
        return TokenTotals(self._pairs(counts.total), self._pairs(counts.deferred))

    def _pairs(self, counts: tuple[int, ...]) -> dict[str, tuple[int, int]]:
        if not counts:
            return {}
        return {
            name: (counts[index], counts[index + 1])
            for index, name in enumerate(self.components)
            if self.applied[index]
        }

    def cached_totals(self) -> TokenTotals | None:
        """`totals` once the stages are counted, kept: a session asks on every turn (a
        shared read-only mapping)."""
        if self._totals is None:
            counts = self.stages.cached_token_counts()
            if counts is None:
                return None
            self._totals = self.totals(counts)
        return self._totals


@dataclass(slots=True)
class RunReport:
    """The result of running the pipeline on one request body; not changed once made.

    Not frozen: one is made per request, and a frozen dataclass sets each field through
    object.__setattr__, which made building this one three times slower.
    """

    pieces: tuple[Piece, ...]  # the body to forward, in order; (original,) when unchanged
    runs: tuple[ComponentRun, ...]
    memo_hits: int = 0
    memo_misses: int = 0
    applied: tuple[AppliedCatalogue, ...] = ()
    # (component, "ExcType: message"), logged once per request; a memo hit carries its
    # catalogue's errors again, so every request that catalogue affects says so.
    errors: tuple[tuple[str, str], ...] = ()
    # The facts of every catalogue found, adopted or not, in body order: what drift and the
    # advisories decide from when the request is counted (made once per catalogue).
    catalogues: tuple[CatalogueFacts, ...] = ()

    @property
    def body(self) -> bytes:
        """The whole body to forward: a new copy when it changed (a proxy writes `pieces`)."""
        return envelope.joined(self.pieces)

    def changed(self, original: bytes) -> bool:
        return len(self.pieces) != 1 or self.pieces[0] is not original


def count_tokens(report: RunReport, count: Callable[[bytes], int]) -> TokenTotals:
    """Tokens before/after per component for one request; blocking, so run it off the loop."""
    return _token_totals(report, [c.stages.token_counts(count) for c in report.applied])


def cached_tokens(report: RunReport) -> TokenTotals | None:
    """`count_tokens` without counting: None unless every catalogue was counted before.

    Read-only: for the usual request, one catalogue, it is the catalogue's kept mapping.
    """
    if len(report.applied) == 1:
        return report.applied[0].cached_totals()
    counts = []
    for catalogue in report.applied:
        if (stage_counts := catalogue.stages.cached_token_counts()) is None:
            return None
        counts.append(stage_counts)
    return _token_totals(report, counts)


def _token_totals(report: RunReport, stage_counts: Sequence[StageCounts]) -> TokenTotals:
    totals = TokenTotals()
    for catalogue, counts in zip(report.applied, stage_counts, strict=True):
        one = catalogue.totals(counts)
        _add(totals, one)
        _add(totals.deferred, one.deferred)
    return totals


def _add(totals: dict[str, tuple[int, int]], more: Mapping[str, tuple[int, int]]) -> None:
    for name, (before, after) in more.items():
        was_before, was_after = totals.get(name, (0, 0))
        totals[name] = (was_before + before, was_after + after)


def skipped_report(body: bytes, names: Sequence[str], reason: SkipReason) -> RunReport:
    """The report for a request the pipeline did not look at (no body, too large, ...)."""
    return RunReport((body,), tuple(ComponentRun(n, "skipped", reason) for n in names))


# The registry: a literal table name -> factory(options). Order here is not pipeline order.
KNOWN: dict[str, Callable[[Mapping[str, Any]], Component]] = {
    "toolbudget": toolbudget.make,
    "tooldefs": tooldefs.make,
    "toolorder": toolorder.make,
    "toolschema": toolschema.make,
}
# The catalogue steps among them (CatalogueStep); every other component is a schema step.
CATALOGUE_STEPS: Final = frozenset({"toolorder"})
# Named in the wider design, not built yet: naming one is an error, never a silent no-op.
PLANNED = ("cachesplit", "cmdfilter", "dedup", "failed_run", "format")


def declared(name: str, component: Component) -> Step:
    """The component as a catalogue's walk runs it, by the kind the registry declares."""
    if name in CATALOGUE_STEPS:
        return Step.ordering(cast(CatalogueStep, component).order)
    return Step.rewriting(cast(SchemaStep, component).rewrite)


class UnknownComponent(ValueError):
    """A pipeline names a component that does not exist (or not yet), or names one twice."""


def check_names(names: Sequence[str]) -> None:
    """Fail at start-up on unknown, planned or repeated component names."""
    known = ", ".join(sorted(KNOWN))
    seen: set[str] = set()
    for name in names:
        if name in PLANNED:
            raise UnknownComponent(
                f"component {name!r} is part of the design but not implemented yet; "
                f"known components: {known}"
            )
        if name not in KNOWN:
            raise UnknownComponent(f"unknown component {name!r}; known components: {known}")
        if name in seen:
            raise UnknownComponent(f"component {name!r} is named twice")
        seen.add(name)


# Catalogues the memo keeps by default (config's `memo_size`): a session sends one catalogue,
# a busy proxy a few dozen; each entry is ~3x its catalogue (~190 KB for Claude Code's; up to
# ~6x when four sessions share it, see memo.RESTS).
MEMO_SIZE: Final = 64
# Bytes the memo holds at most (config's `memo_bytes`), as its entries count them
# (entry.Entry.held_bytes): MEMO_SIZE of Claude Code's 65 KB catalogue with four sessions each.
MEMO_BYTES: Final = MEMO_SIZE * 400 * 1024


class Pipeline:
    """The configured components, in order, with the memo their catalogue walk shares."""

    def __init__(
        self,
        names: Sequence[str],
        *,
        memo_size: int = MEMO_SIZE,
        memo_bytes: int = MEMO_BYTES,
        options: Mapping[str, Mapping[str, Any]] | None = None,
    ) -> None:
        check_names(names)
        options = options or {}
        self.names = tuple(names)
        self.components = tuple(KNOWN[n](options.get(n, {})) for n in self.names)
        # Each entry keeps what a report says about its catalogue, made once (the parts
        # never refer back to their entry, so an eviction frees both at once).
        self.memo: Memo[entry.Entry, _ReportParts] = Memo(memo_size, memo_bytes)
        self._steps = tuple(map(declared, self.names, self.components))

    def memo_gauges(self) -> tuple[int, int]:
        return len(self.memo), self.memo.capacity

    def memo_byte_gauges(self) -> tuple[int, int]:
        """Bytes the memo holds now, as its bound counts them, and the bound."""
        return self.memo.bytes, self.memo.max_bytes or 0

    def run_hit(self, body: bytes, api: str | None = None) -> RunReport | None:
        """`run`'s report on a body whose catalogue is a memo hit, else None: its cost hardly
        grows with the body, so a large body whose catalogue is known needs no worker."""
        if not self.components:
            return None
        result = envelope.compact_hit(body, self.memo, api)
        return None if result is None else self._report(result)

    def tell(self) -> None:
        """Keep the news of the catalogues this pipeline meets, for another to `learn`."""
        self.memo.tell()

    def learn(self, teller: Pipeline) -> None:
        """Take in the catalogues `teller` (built from the same settings, on another thread)
        met since the last time: its entries are what this pipeline would have made."""
        self.memo.learn(teller.memo)

    def skip(self, body: bytes, reason: SkipReason) -> RunReport:
        return skipped_report(body, self.names, reason)

    def run(self, body: bytes, api: str | None = None) -> RunReport:
        """Run every component over the body's catalogues; never raises (fail open).

        `api` is the API the request was sent to, if known (see `envelope.compact`).
        """
        if not self.components:
            return RunReport((body,), ())
        try:
            result = envelope.compact(body, self.memo, self._steps, api)
            return self._report(result)
        except Exception as exc:  # the runner itself failing still must not fail a request
            return RunReport(
                (body,),
                tuple(ComponentRun(n, "error", type(exc).__name__) for n in self.names),
                errors=tuple((n, f"{type(exc).__name__}: {exc}") for n in self.names),
            )

    def _report(self, result: envelope.Compacted) -> RunReport:
        if result.error is not None:
            runs = tuple(ComponentRun(n, "error", result.error) for n in self.names)
            errors = tuple((n, result.error) for n in self.names)
            return RunReport(result.pieces, runs, errors=errors)
        if result.reason is not None:
            return skipped_report(result.body, self.names, result.reason)
        if len(result.catalogues) == 1:  # the usual request: its parts are the same every turn
            [(entry, hit)] = result.catalogues
            parts = self.memo.derived(entry, self._parts_of)
            hits = 1 if hit else 0
        else:
            parts = self._report_parts([entry for entry, _ in result.catalogues])
            hits = [hit for _, hit in result.catalogues].count(True)
        runs, applied, errors, catalogues = parts
        return RunReport(
            result.pieces,
            runs,
            memo_hits=hits,
            memo_misses=len(result.catalogues) - hits,
            applied=applied,
            errors=errors,
            catalogues=catalogues,
        )

    def _parts_of(self, entry: entry.Entry) -> _ReportParts:
        return self._report_parts([entry])

    def _report_parts(self, entries: Sequence[entry.Entry]) -> _ReportParts:
        """What a request's report says about its catalogues (pure in the entries)."""
        runs = tuple(
            _combine(name, [entry.runs[index] for entry in entries])
            for index, name in enumerate(self.names)
        )
        applied = tuple(
            AppliedCatalogue(
                entry.stages, self.names, tuple(r.outcome == "applied" for r in entry.runs)
            )
            for entry in entries
            if entry.output is not None
        )
        errors = tuple(
            (self.names[index], message) for entry in entries for index, message in entry.errors
        )
        facts = tuple(CatalogueFacts(entry.raw, entry.output) for entry in entries)
        return runs, applied, errors, facts


_ReportParts = tuple[
    tuple[ComponentRun, ...],
    tuple[AppliedCatalogue, ...],
    tuple[tuple[str, str], ...],
    tuple[CatalogueFacts, ...],
]


def _combine(name: str, runs: Sequence[entry.CatalogueRun]) -> ComponentRun:
    """One component's outcome for the request from its outcome on each catalogue."""
    removed: Counter[str] = Counter()
    for run in runs:
        removed.update(run.removed)
    outcomes = {run.outcome for run in runs}
    outcome: Outcome = (
        "applied" if "applied" in outcomes else "error" if "error" in outcomes else "skipped"
    )
    reason = None
    if outcome != "applied":
        reason = next(run.reason for run in runs if run.outcome == outcome)
    return ComponentRun(
        name,
        outcome,
        reason,
        tools_seen=sum(r.tools_seen for r in runs),
        tools_changed=sum(r.tools_changed for r in runs),
        removed=dict(removed),
        bytes_before=sum(r.bytes_before for r in runs if r.outcome == "applied"),
        bytes_after=sum(r.bytes_after for r in runs if r.outcome == "applied"),
        deferred_bytes_saved=sum(r.deferred_bytes_saved for r in runs if r.outcome == "applied"),
    )
