"""cdc.errors.one_line: how an exception is shown in warnings, maintenance step reports and the status page."""

from __future__ import annotations

from cdc.common.errors import TopicNotFound, one_line


def test_type_and_first_non_empty_line():
    exc = RuntimeError("\n  [TABLE_OR_VIEW_NOT_FOUND] cat.db.t\nJVM stacktrace:\n  at org.apache...")
    assert one_line(exc) == "RuntimeError: [TABLE_OR_VIEW_NOT_FOUND] cat.db.t"
    assert one_line(TopicNotFound("topic x missing")) == "TopicNotFound: topic x missing"


def test_empty_message_and_limit():
    assert one_line(KeyError()) == "KeyError: "
    assert one_line(ValueError("x" * 500), 300) == "ValueError: " + "x" * 288
