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
  (``shop.a__b`` and ``shop__a.b``: ``cdc.config.names``) is a ``ConfigError`` naming both (exit 2): the run stops
  before anything is read, for every table of the pipeline, until the pattern or a target is changed.
* Group values are sanitised to identifier characters, deterministically: lower-cased, every character outside
  ``[a-z0-9_]`` (``.``, ``-``, ``$``, ...) becomes ``_``; a name part that would start with a digit gets a leading
  ``_``. So ``dbserver1.public.Order-Items`` → ``inventory.order_items``.

The job and the Airflow plan task resolve at the start of every run (``resolve_pipeline``), so a topic created
since the last run is ingested by the next one. Nothing here runs at DAG parse time.
"""

from __future__ import annotations

import re
from dataclasses import replace
from typing import Any, Iterable, Sequence

from cdc.common.errors import ConfigError
from cdc.config.model import TableConfig
from cdc.config.names import collision_problem, helper_collision

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


def resolve(tables: Sequence[TableConfig], topics: Iterable[str], src: str = "<memory>",
            metadata_namespace: str = "") -> tuple[TableConfig, ...]:
    """Config entries + the broker's topic names → concrete tables (pattern entries replaced, in place, by one
    table per matching topic, sorted by topic). Raises ``ConfigError`` on conflicts, naming both sides (two targets
    sharing helper tables too: ``cdc.config.names``)."""
    explicit = {t.topic for t in tables if t.topic}
    patterns = [(i, t, re.compile(t.topic_pattern)) for i, t in enumerate(tables) if not t.topic]
    claimed: dict[int, list[TableConfig]] = {i: [] for i, _, _ in patterns}
    for topic in sorted(set(topics)):
        if topic in explicit or not claimable(topic):
            continue
        hits = [(i, t, m) for i, t, rx in patterns for m in [rx.fullmatch(topic)] if m]
        if len(hits) > 1:
            (i, a, _), (j, b, _) = hits[:2]
            raise ConfigError(f"{src}: topic {topic} matches two patterns, tables[{i}].topic_pattern "
                              f"'{a.topic_pattern}' and tables[{j}].topic_pattern '{b.topic_pattern}'; make the "
                              "patterns exclusive or list the topic explicitly (explicit entries win)")
        if hits:
            i, entry, m = hits[0]
            target = render(entry.target, m)
            if len(target.split(".")) < 2 or not all(_NAME.match(p) for p in target.split(".")):
                raise ConfigError(f"{src}: topic {topic} resolves to {target!r} by tables[{i}] (topic_pattern "
                                  f"'{entry.topic_pattern}', target '{entry.target}'), not a valid namespace.table; "
                                  "change the pattern so its groups are never empty")
            claimed[i].append(replace(entry, topic=topic, target=target))
    out: list[TableConfig] = []
    for i, t in enumerate(tables):
        out.extend(claimed[i] if not t.topic else [t])
    owners: dict[str, TableConfig] = {}
    for t in out:
        other = owners.setdefault(t.target.lower(), t)
        if other is not t:
            raise ConfigError(f"{src}: topics {other.topic} and {t.topic} both resolve to table {t.target}"
                              f"{_origin(other)}{_origin(t)}; change a target or a topic_pattern so each topic "
                              "has its own table")
    clash = helper_collision(t.target for t in out)
    if clash:
        a, b = (next(t for t in out if t.target == x) for x in clash)
        raise ConfigError(f"{src}: topic {a.topic}{_origin(a)} and topic {b.topic}{_origin(b)}: "
                          f"{collision_problem(a.target, b.target, metadata_namespace)}, or change the topic_pattern")
    return tuple(out)


def _origin(t: TableConfig) -> str:
    return f" ({t.topic} by topic_pattern '{t.topic_pattern}')" if t.topic_pattern else ""


__all__ = ["resolve", "render", "sanitise", "check_entry", "claimable"]
