"""Topic routing: ``tables[].topic_pattern`` entries → one table per matching topic.

An entry may give ``topic_pattern`` (a regular expression that must match the WHOLE topic name) instead of
``topic``; its ``target`` may use Kafka Connect RegexRouter style groups (``$0`` the whole topic, ``$1``.. the
groups)::

    - {topic_pattern: 'dbserver1\\.public\\.(.*)', target: 'inventory.$1'}

Every matching topic becomes its own table with the entry's settings. Rules (``resolve``, a pure function):

* The topics are the broker's (``list_topics``); internal topics (``__*``: ``__consumer_offsets``, Debezium's
  default heartbeat topics ``__debezium-heartbeat.<prefix>``) are never claimed. Other topics (Debezium's
  schema-change topic ``<prefix>``, a schema-history topic) are claimed only when a pattern matches them, so anchor
  patterns on ``<prefix>\\.<schema>\\.``.
* A topic listed by an explicit entry (``topic:``) is never claimed by a pattern (explicit entries win).
* A topic matched by two patterns, two tables with one target, or two targets whose helper tables would be the same
  (``shop.a__b`` and ``shop__a.b``: ``cdc.config.names``) is ambiguous. ``resolve_isolated`` sets such topics
  aside (``Unresolved``: the table as resolved and a ``ConfigError`` message naming both sides and what to do) and
  resolves the others: the ingest job reports them as failed tables (exit 2) while the pipeline's other tables run,
  until the pattern or a target is changed. An explicit entry (``topic:``) keeps its target: only the topic a
  pattern routes onto it (or onto a target sharing its helper tables) is set aside. ``resolve`` raises the first.
  A topic whose groups render no valid target is set aside the same way.
* Group values are sanitised to identifier characters, deterministically: lower-cased, every character outside
  ``[a-z0-9_]`` (``.``, ``-``, ``$``, ...) becomes ``_``; a name part that would start with a digit gets a leading
  ``_``. So ``dbserver1.public.Order-Items`` → ``inventory.order_items``.

The job and the Airflow plan task resolve at the start of every run (``resolve_pipeline``), so a topic created
since the last run is ingested by the next one. Nothing here runs at DAG parse time.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from typing import Any, Iterable, Sequence

from cdc.common.errors import ConfigError
from cdc.config.model import TableConfig
from cdc.config.names import collision_problem, helper_suffix

_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_GROUP_REF = re.compile(r"\$(\d+)")
_UNSAFE = re.compile(r"[^a-z0-9_]")


def sanitise(value: str) -> str:
    """A group value as identifier characters: lower case, anything outside ``[a-z0-9_]`` → ``_``."""
    return _UNSAFE.sub("_", value.lower())


def _refs(template: str, groups: int) -> list[tuple[int, int, int]]:
    """(start, end, group) of each ``$N`` in ``template``, Java ``Matcher`` style: digits are taken while the number
    stays a valid group (``$10`` with one group = group 1, then ``0``)."""
    out = []
    for m in _GROUP_REF.finditer(template):
        digits, n, used = m.group(1), int(m.group(1)[0]), 1
        while used < len(digits) and n * 10 + int(digits[used]) <= groups:
            n, used = n * 10 + int(digits[used]), used + 1
        out.append((m.start(), m.start() + 1 + used, n))
    return out


def render(template: str, match: re.Match[str]) -> str:
    """``target`` with ``$N`` replaced by the sanitised group values; name parts made valid identifiers."""
    parts, pos = [], 0
    for start, end, n in _refs(template, match.re.groups):
        parts += [template[pos:start], sanitise(match.group(n) or "")]
        pos = end
    parts.append(template[pos:])
    return ".".join(f"_{p}" if p[:1].isdigit() else p for p in "".join(parts).split("."))


def check_entry(pattern: Any, target: Any) -> tuple[str, str] | None:
    """Static check of one pattern entry: (key, problem) or None. Used by ``cdc.config`` at load time."""
    if not isinstance(pattern, str) or not pattern:
        return "topic_pattern", "must be a non-empty regular expression"
    try:
        rx = re.compile(pattern)
    except re.error as exc:
        return "topic_pattern", f"is not a valid regular expression ({exc}): {pattern!r}"
    if not isinstance(target, str):
        return "target", f"must be namespace.table, with $1.. for groups of topic_pattern, got {target!r}"
    refs = _refs(target, rx.groups)
    bad = [n for _, _, n in refs if n > rx.groups]
    if bad:
        return "target", f"refers to group ${bad[0]} but topic_pattern {pattern!r} has {rx.groups} group(s)"
    shape, pos = [], 0
    for start, end, _ in refs:
        shape += [target[pos:start], "x"]
        pos = end
    shape.append(target[pos:])
    names = "".join(shape).split(".")
    if len(names) < 2 or not all(_NAME.match(p) or (p and p[0].isdigit() and _NAME.match("_" + p)) for p in names):
        return "target", f"must be namespace.table (identifiers, $1.. for groups of topic_pattern), got {target!r}"
    return None


def claimable(topic: str) -> bool:
    """Internal topics (``__*``) are never claimed by a pattern."""
    return not topic.startswith("__")


@dataclass(frozen=True)
class Unresolved:
    """A topic a pattern claims whose table is ambiguous: ``table`` (the entry with the topic and the target it
    resolves to) is not run; ``error`` says why, naming both sides, and what to do (a ``ConfigError``'s message)."""

    table: TableConfig
    error: str


def resolve(tables: Sequence[TableConfig], topics: Iterable[str], src: str = "<memory>",
            metadata_namespace: str = "") -> tuple[TableConfig, ...]:
    """``resolve_isolated`` for callers that need every table: raises a ``ConfigError`` on the first conflict."""
    out, unresolved = resolve_isolated(tables, topics, src, metadata_namespace)
    if unresolved:
        raise ConfigError(unresolved[0].error)
    return out


def resolve_isolated(tables: Sequence[TableConfig], topics: Iterable[str], src: str = "<memory>",
                     metadata_namespace: str = "") -> tuple[tuple[TableConfig, ...], tuple[Unresolved, ...]]:
    """Config entries + the broker's topic names → concrete tables (pattern entries replaced, in place, by one
    table per matching topic, sorted by topic) and the topics set aside as ambiguous (see the module's rules)."""
    explicit = {t.topic for t in tables if t.topic}
    patterns = [(i, t, re.compile(t.topic_pattern)) for i, t in enumerate(tables) if not t.topic]
    claimed: dict[int, list[TableConfig]] = {i: [] for i, _, _ in patterns}
    bad: list[Unresolved] = []
    for topic in sorted(set(topics)):
        if topic in explicit or not claimable(topic):
            continue
        hits = [(i, t, m) for i, t, rx in patterns for m in [rx.fullmatch(topic)] if m]
        if len(hits) > 1:
            (i, a, ma), (j, b, mb) = hits[:2]
            error = (f"{src}: topic {topic} matches two patterns, tables[{i}].topic_pattern '{a.topic_pattern}' "
                     f"(table {render(a.target, ma)}) and tables[{j}].topic_pattern '{b.topic_pattern}' (table "
                     f"{render(b.target, mb)}); make the patterns exclusive or list the topic explicitly (explicit "
                     f"entries win). {_WAITS.format(topic)}")
            bad += [Unresolved(replace(e, topic=topic, target=render(e.target, m)), error) for _, e, m in hits]
            continue
        if hits:
            i, entry, m = hits[0]
            target = render(entry.target, m)
            if len(target.split(".")) < 2 or not all(_NAME.match(p) for p in target.split(".")):
                bad.append(Unresolved(replace(entry, topic=topic, target=target), (
                    f"{src}: topic {topic} resolves to {target!r} by tables[{i}] (topic_pattern "
                    f"'{entry.topic_pattern}', target '{entry.target}'), not a valid namespace.table; change the "
                    f"pattern so its groups are never empty. {_WAITS.format(topic)}")))
                continue
            claimed[i].append(replace(entry, topic=topic, target=target))
    out: list[TableConfig] = []
    for i, t in enumerate(tables):
        out.extend(claimed[i] if not t.topic else [t])
    aside: set[int] = set()
    for same in _groups(out, lambda t: t.target.lower()):
        a, b = same[:2]
        losers = _losers(same)
        error = (f"{src}: topics {a.topic} and {b.topic} both resolve to table {b.target}{_origin(a)}{_origin(b)}; "
                 f"change a target or a topic_pattern so each topic has its own table. {_waits(same, losers)}")
        bad += [Unresolved(t, error) for t in losers]
        aside |= {id(t) for t in losers}
    for same in _groups([t for t in out if id(t) not in aside], lambda t: helper_suffix(t.target).lower()):
        a, b = same[:2]
        losers = _losers(same)
        error = (f"{src}: topic {a.topic}{_origin(a)} and topic {b.topic}{_origin(b)}: "
                 f"{collision_problem(a.target, b.target, metadata_namespace)}, or change the topic_pattern. "
                 f"{_waits(same, losers)}")
        bad += [Unresolved(t, error) for t in losers]
        aside |= {id(t) for t in losers}
    return tuple(t for t in out if id(t) not in aside), tuple(bad)


_WAITS = "Until then topic {} is not ingested (the pipeline's other tables are)"


def _groups(tables: Sequence[TableConfig], key: Any) -> list[list[TableConfig]]:
    """The tables sharing a ``key`` with another, grouped, in order."""
    found: dict[str, list[TableConfig]] = {}
    for t in tables:
        found.setdefault(key(t), []).append(t)
    return [same for same in found.values() if len(same) > 1]


def _losers(same: Sequence[TableConfig]) -> list[TableConfig]:
    """The tables of a conflict that are set aside: those a pattern resolved when an explicit entry is among them
    (it keeps its target), else all."""
    routed = [t for t in same if t.topic_pattern]
    return routed if len(routed) < len(same) else list(same)


def _waits(same: Sequence[TableConfig], losers: Sequence[TableConfig]) -> str:
    kept = [t.topic for t in same if t not in losers]
    return (f"Until then topic(s) {', '.join(t.topic for t in losers)} are not ingested"
            + (f"; topic {kept[0]} keeps its table (its entry is explicit)" if kept else "")
            + " (the pipeline's other tables are)")


def _origin(t: TableConfig) -> str:
    return f" ({t.topic} by topic_pattern '{t.topic_pattern}')" if t.topic_pattern else ""


__all__ = ["resolve", "resolve_isolated", "Unresolved", "render", "sanitise", "check_entry", "claimable"]
