"""PURE. One catalogue's rewrite: its bytes parsed strictly, run through each component in turn,
and the memo entry that keeps the result, the components' runs and the stages' token counts.

The same input bytes give the same Entry in every process. Must not import aiohttp or
prometheus_client.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Final, Literal

import orjson

from toolslim.core.catalog import (
    CatalogueChange,
    Rewrite,
    count_tools,
    deferred_tools,
    rewrite_catalogue,
    serialize,
)
from toolslim.core.components.toolorder import reorder_raw
from toolslim.core.memo import RESTS, SHORT_TAIL, keep, to_front
from toolslim.core.schema import JSON, TooDeep, is_too_deep

Outcome = Literal["applied", "skipped", "error"]
# Why a component left a request alone; stats and metrics count skips by these strings.
SkipReason = Literal[
    "busy",
    "duplicate_keys",
    "in_order",
    "no_body",
    "no_tools",
    "not_json",
    "not_smaller",
    "nothing_to_strip",
    "signed",
    "too_deep",
    "too_large",
    "undecodable",
    "unsupported_shape",
]

# A catalogue step's verb: the catalogue in its order, and what moved by name.
Order = Callable[[list[JSON]], tuple[list[JSON], Counter[str]]]


@dataclass(frozen=True, slots=True)
class Step:
    """A component as a catalogue's walk runs it (pipeline.declared makes one of each kind):
    its work on the whole catalogue, the same list back when it changed nothing, and whether
    it only `orders` the tools (a catalogue step: moves them and changes no byte of one) or
    rewrites their schemas (a schema step)."""

    apply: Callable[[list[JSON]], tuple[list[JSON], CatalogueChange]]
    orders: bool = False

    @classmethod
    def rewriting(cls, rewrite: Rewrite) -> Step:
        """A schema step's verb over a whole catalogue: applied to every tool schema."""

        def apply(catalogue: list[JSON]) -> tuple[list[JSON], CatalogueChange]:
            return rewrite_catalogue(catalogue, rewrite)

        return cls(apply)

    @classmethod
    def ordering(cls, order: Order) -> Step:
        """A catalogue step's verb: it sees every tool and changes none, counting what moved."""

        def apply(catalogue: list[JSON]) -> tuple[list[JSON], CatalogueChange]:
            ordered, moved = order(catalogue)
            return ordered, CatalogueChange(count_tools(catalogue), 0, moved)

        return cls(apply, orders=True)


class DuplicateKey(ValueError):
    """A JSON object in the catalogue names the same key twice (readers disagree on it)."""


@dataclass(frozen=True, slots=True)
class CatalogueRun:
    """What one component did to one catalogue."""

    outcome: Outcome
    reason: str | None = None  # a SkipReason when skipped, the exception's class on error
    tools_seen: int = 0
    tools_changed: int = 0
    removed: Counter[str] = field(default_factory=Counter)
    bytes_before: int = 0
    bytes_after: int = 0
    # Of the bytes saved, those removed from deferred tools (catalog.deferred_tools), on
    # their canonical form: the provider keeps them out of the prompt until they are loaded.
    deferred_bytes_saved: int = 0


@dataclass(frozen=True, slots=True)
class StageCounts:
    """Tokens of each canonical stage of a catalogue (input, then after each component), and
    of each stage's deferred tools written as one list: `deferred` is empty when the
    catalogue has none."""

    total: tuple[int, ...]
    deferred: tuple[int, ...] = ()


class StageTokens:
    """Token counts of one catalogue's canonical stages (input, then after each component),
    counted at most once. Apart from its Entry so that what a report holds on to does not
    point back at the entry: an entry in a reference cycle outlives its eviction until a full
    garbage collection, and under a flood of new catalogues thousands of them piled up."""

    def __init__(self, raw: bytes, rewrites: Sequence[Step]) -> None:
        self._raw = raw
        self._rewrites = tuple(rewrites)
        self._tokens: StageCounts | None = None

    def cached_token_counts(self) -> StageCounts | None:
        """The stage token counts if already counted, without waiting or counting."""
        return self._tokens

    def token_counts(self, count: Callable[[bytes], int]) -> StageCounts:
        """Tokens of each canonical stage, counted once.

        Tokenizing is slow, so the proxy calls this off the request path, from its one counting
        thread (so at most once); the stages are rebuilt from the raw bytes here rather than
        kept in memory meanwhile.
        """
        if self._tokens is None:
            self._tokens = stage_counts(self._raw, self._rewrites, count)
        return self._tokens


# What an entry holds beyond its bytes: its runs, errors, stages and the objects around them.
_OBJECTS = 4096


class Entry:
    """A memoized rewrite of one exact catalogue: the same input bytes give the same output."""

    def __init__(
        self,
        raw: bytes,
        output: bytes | None,
        runs: tuple[CatalogueRun, ...],
        rewrites: Sequence[Step] = (),
        errors: tuple[tuple[int, str], ...] = (),
    ) -> None:
        self.raw = raw
        self.output = output  # None: keep the original bytes (skip)
        self.runs = runs
        self.errors = errors  # (component index, "ExcType: message")
        self.stages = StageTokens(raw, rewrites)
        self._with_tail: list[tuple[bytes, bytes]] = []  # (rest, output + rest)

    def held_bytes(self) -> int:
        """The most bytes this entry holds while memoized (what the memo's byte bound counts):
        the catalogue, its output and up to RESTS copies of the output joined to a short rest
        (`output_with_tail`), a share for the facts derived from it, the objects around them."""
        if self.output is None:
            return len(self.raw) * 9 // 8 + _OBJECTS
        output = len(self.output) + SHORT_TAIL
        return len(self.raw) * 9 // 8 + len(self.output) + RESTS * (output + SHORT_TAIL) + _OBJECTS

    def output_with_tail(self, body: bytes, start: int) -> bytes:
        """The output followed by body[start:], the short rest of the body, built once per
        distinct rest (compared in place, so a hit on the same rest copies nothing).

        Agents send `tools` near the end and the same few bytes after it on every turn
        (metadata, max_tokens, stream): one piece instead of two saves the proxy a write.
        """
        assert self.output is not None
        size = len(body) - start
        for index, (tail, joined) in enumerate(self._with_tail):
            if len(tail) == size and body.endswith(tail):
                to_front(self._with_tail, index)
                return joined
        tail = body[start:]
        joined = self.output + tail
        keep(self._with_tail, (tail, joined))
        return joined


def parse_catalogue(raw: bytes) -> JSON:
    """Parse catalogue bytes keeping every number's spelling and refusing duplicate keys.

    Fast path: orjson, proven exact when re-serializing reproduces the bytes. Otherwise the
    stdlib parser keeps each number as an orjson.Fragment of its original text (so `1.0`,
    `1e3`, `-0` and integers past 64 bits survive) and rejects duplicate keys.
    """
    try:
        value = orjson.loads(raw)
        if orjson.dumps(value) == raw:
            return value
    except orjson.JSONDecodeError as exc:
        if is_too_deep(exc):
            raise TooDeep(str(exc)) from exc
    except orjson.JSONEncodeError:
        pass
    text = raw.decode("utf-8")
    try:
        return json.loads(
            text,
            object_pairs_hook=_unique_pairs,
            parse_float=orjson.Fragment,
            parse_int=orjson.Fragment,
            parse_constant=_reject_constant,
        )
    except RecursionError as exc:
        raise TooDeep("nesting") from exc


def _unique_pairs(pairs: list[tuple[str, JSON]]) -> dict[str, JSON]:
    obj = dict(pairs)
    if len(obj) != len(pairs):
        raise DuplicateKey(next(k for i, (k, _) in enumerate(pairs) if k in dict(pairs[:i])))
    return obj


def _reject_constant(name: str) -> JSON:
    raise ValueError(f"{name} is not JSON")


def stages(raw: bytes, rewrites: Sequence[Step]) -> list[bytes]:
    """Canonical bytes of the catalogue before the components and after each one."""
    return _each_written(_stage_catalogues(raw, rewrites), serialize)


def stage_counts(
    raw: bytes, rewrites: Sequence[Step], count: Callable[[bytes], int]
) -> StageCounts:
    """Tokens of each of the catalogue's `stages`, and of each stage's deferred tools."""
    catalogues = _stage_catalogues(raw, rewrites)
    total = tuple(count(stage) for stage in _each_written(catalogues, serialize))
    if not (_may_defer(raw) and deferred_tools(catalogues[0])):
        return StageCounts(total)
    deferred = tuple(count(part) for part in _each_written(catalogues, _deferred_part))
    return StageCounts(total, deferred)


def _stage_catalogues(raw: bytes, rewrites: Sequence[Step]) -> list[JSON]:
    """The catalogue before the components and after each one (the same object again after
    a component that changed nothing)."""
    current = parse_catalogue(raw)
    out = [current]
    for component in rewrites:
        try:
            new, _ = component.apply(current)
        except Exception:  # as in `rewrite`: a failing component passes its input on
            new = current
        out.append(new)
        current = new
    return out


def _each_written(catalogues: Sequence[JSON], write: Callable[[JSON], bytes]) -> list[bytes]:
    """`write` of each stage, written once for a run of the same catalogue."""
    out: list[bytes] = []
    for index, catalogue in enumerate(catalogues):
        same = index > 0 and catalogue is catalogues[index - 1]
        out.append(out[-1] if same else write(catalogue))
    return out


def _deferred_part(catalogue: JSON) -> bytes:
    """The canonical bytes of a catalogue's deferred tools, as one list."""
    return serialize(deferred_tools(catalogue))


def _may_defer(raw: bytes) -> bool:
    """Whether catalogue bytes can hold a `defer_loading` member: spelled so, or escaped."""
    return b"defer_loading" in raw or b"\\u" in raw


def _deferred_sizes(raw: bytes, catalogues: Sequence[JSON]) -> list[int] | None:
    """Canonical bytes of each stage's deferred tools, or None when there are none (or they
    cannot be written on their own: then what is removed from them counts with the rest)."""
    if not _may_defer(raw):
        return None
    try:
        if not deferred_tools(catalogues[0]):
            return None
        return [len(part) for part in _each_written(catalogues, _deferred_part)]
    except (TooDeep, orjson.JSONEncodeError):
        return None


def _unchanged(catalogue: list[JSON]) -> tuple[list[JSON], CatalogueChange]:
    return catalogue, CatalogueChange()


UNCHANGED: Final = Step(_unchanged)  # a rewrite's stage when only the order was adopted


def rewrite(raw: bytes, rewrites: Sequence[Step], parsed: JSON = None) -> Entry:
    """Run the components over one catalogue and decide whether to adopt the result.

    `parsed`, when given, is `raw` already parsed and proven exact (see `_top_level_span`).
    """
    try:
        catalogue = parse_catalogue(raw) if parsed is None else parsed
    except TooDeep:
        return _skipped(raw, len(rewrites), "too_deep")
    except DuplicateKey:
        return _skipped(raw, len(rewrites), "duplicate_keys")
    except (ValueError, UnicodeDecodeError):
        return _skipped(raw, len(rewrites), "not_json")
    if not isinstance(catalogue, list):
        return _skipped(raw, len(rewrites), "unsupported_shape")
    if not catalogue:
        return _skipped(raw, len(rewrites), "no_tools")
    changes = []
    catalogues = [catalogue]  # each stage, for the deferred tools' bytes
    errors: list[tuple[int, str]] = []
    failed: dict[int, str] = {}  # component index -> the class of the exception it raised
    sizes: list[int] = []  # canonical size after each component but the last
    serialized: tuple[JSON, bytes] | None = None  # the last catalogue serialized, and its bytes
    current = catalogue
    last = len(rewrites) - 1
    rewriting = [i for i, step in enumerate(rewrites) if not step.orders]
    last_rewrite = rewriting[-1] if rewriting else -1
    first = rewriting[0] if rewriting else 0  # whitespace alone saved is said to be its
    try:
        for index, component in enumerate(rewrites):
            try:
                new, change = component.apply(current)
            except TooDeep:
                raise
            except Exception as exc:  # one component failing must not stop the others
                failed[index] = type(exc).__name__
                errors.append((index, f"{failed[index]}: {exc}"))
                new, change = current, None
            changes.append((change, new is not current))
            catalogues.append(new)
            # Intermediate sizes attribute bytes per component; the last one is the output's.
            # An order moves bytes and never adds or removes one, so it keeps the size before
            # it; a size no rewrite follows is the output's: neither is serialized for it.
            if index < last:
                if component.orders:
                    sizes.append(sizes[-1] if sizes else len(raw))
                elif index >= last_rewrite:
                    sizes.append(-1)
                else:
                    if new is not current or serialized is None:
                        serialized = (new, serialize(new))
                    sizes.append(len(serialized[1]))
            current = new
        if serialized is not None and serialized[0] is current:
            output = serialized[1]  # the last component changed nothing: serialized already
        else:
            output = serialize(current)
    except TooDeep:
        return _skipped(raw, len(rewrites), "too_deep")
    except orjson.JSONEncodeError as exc:  # a lone surrogate escape, or nesting orjson refuses
        return _skipped(raw, len(rewrites), "too_deep" if is_too_deep(exc) else "not_json")
    sizes = [len(output) if size < 0 else size for size in sizes]
    sizes.append(len(output))
    adopted = len(output) < len(raw)
    # toolorder's exception to the strictly-smaller rule: a new order saves no byte, and is
    # adopted as the client's own bytes rearranged (the rewrites, not smaller, are dropped).
    reordered = False
    if not adopted and any(
        step.orders and changed for step, (_, changed) in zip(rewrites, changes, strict=True)
    ):
        try:
            output = reorder_raw(raw, catalogue)
            adopted = reordered = True
        except ValueError:
            pass
    deferred = _deferred_sizes(raw, catalogues) if adopted else None
    runs = []
    before = len(raw)
    for index, (change, changed) in enumerate(changes):
        if change is None:
            runs.append(CatalogueRun("error", failed[index]))
            continue
        after = sizes[index]
        acted = changed or (index == first and after < before)
        ordering = rewrites[index].orders
        if reordered:
            acted, after = ordering and changed, before
        if adopted and acted:
            run = CatalogueRun(
                "applied",
                None,
                change.tools_seen,
                change.tools_changed,
                change.removed,
                before,
                after,
                0 if deferred is None else deferred[index] - deferred[index + 1],
            )
            before = after
        else:
            # Not adopted: say whether this component had something to do at all.
            reason = "not_smaller" if (reordered or not adopted) and changed else "nothing_to_strip"
            if ordering and not changed:
                reason = "in_order"
            run = CatalogueRun(
                "skipped", reason, change.tools_seen, change.tools_changed, change.removed
            )
        runs.append(run)
    if not adopted:
        return Entry(raw, None, tuple(runs), errors=tuple(errors))
    # orjson's result keeps the buffer it grew into (2-4x its length); the memo keeps an
    # exact-size copy instead.
    exact = memoryview(output).tobytes()
    if reordered:  # the stages counted are those the output is made of: the order alone
        rewrites = [step if step.orders else UNCHANGED for step in rewrites]
    return Entry(raw, exact, tuple(runs), rewrites, tuple(errors))


def _skipped(raw: bytes, count: int, reason: SkipReason) -> Entry:
    return Entry(raw, None, tuple(CatalogueRun("skipped", reason) for _ in range(count)))
