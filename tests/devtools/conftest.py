"""Session-scoped local infrastructure for devtools tests (the session's broker, tests/conftest.py; one registry).

No ``__init__.py`` here on purpose: with pytest's default import mode a
``tests/devtools`` package would be imported as ``devtools`` and shadow the
real top-level ``devtools`` package. Test file names are therefore prefixed
``test_devtools_`` to stay unique.
"""

from __future__ import annotations

import itertools
import os
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from devtools.registry import LocalSchemaRegistry

FIXTURES = Path(os.environ.get("DEBEZIUM_FIXTURES", Path(__file__).resolve().parents[3] / "shared/fixtures/debezium"))
_topic_ids = itertools.count()


@pytest.fixture(scope="session")
def registry() -> Iterator[LocalSchemaRegistry]:
    with LocalSchemaRegistry() as r:
        yield r


@pytest.fixture
def topic_name(request: pytest.FixtureRequest) -> str:
    """A topic name unique within the session (the broker is shared)."""
    return f"t{next(_topic_ids)}-" + re.sub(r"[^A-Za-z0-9._-]", "-", request.node.name)[:100]


@pytest.fixture(scope="session")
def fixtures_dir() -> Path:
    if not FIXTURES.is_dir():
        pytest.skip(f"Debezium sample fixtures not found at {FIXTURES}")
    return FIXTURES
