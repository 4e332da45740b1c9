"""pyproject.toml's package list names every folder of ``cdc`` and ``cdc_airflow`` (a folder missing from it is missing
from the wheel the executors import the job from: ``tests/cluster`` would fail far later)."""

from __future__ import annotations

import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_every_package_folder_is_in_the_wheel() -> None:
    setup = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    found = set()
    for name, folder in setup["package-dir"].items():
        base = ROOT / folder
        found |= {".".join([name, *p.parent.relative_to(base).parts]) for p in base.rglob("__init__.py")}
    assert sorted(setup["packages"]) == sorted(found)


def test_no_test_file_name_in_two_places() -> None:
    """Tests mirror the packages (``tests/unit/cdc/<package>/``, ``tests/integration/<package>/``, ``tests/scenarios/``):
    a test module's name says what it tests, once."""
    seen: dict[str, list[str]] = {}
    for p in (ROOT / "tests").rglob("test_*.py"):
        seen.setdefault(p.name, []).append(str(p.relative_to(ROOT)))
    assert {n: ps for n, ps in seen.items() if len(ps) > 1} == {}
