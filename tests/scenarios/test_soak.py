"""``make soak``: hundreds of randomized oracle scenarios (``pytest -m slow tests/scenarios/test_soak.py -s``).

Knobs (environment): ``CDC_SOAK_SCENARIOS`` (default 200), ``CDC_SOAK_SEED`` (first seed, default 1),
``CDC_SOAK_MINUTES`` (stop starting new scenarios after this long; default no limit), ``CDC_SOAK_SEEDS`` (a comma-separated
list of seeds instead). Most scenarios run in-process
against the session SparkSession; about one in eight crashes a real ``jobs/ingest.py`` subprocess (SIGKILL at a named
point or from outside), one in three crashes in-process at a random point. The scenario classes (schema changes, ties,
schemaless JSON, local zones, failovers far back or to a MySQL replica slightly behind, stale writers, lost cursors ...)
are drawn per seed: see ``tests/scenarios/harness.py`` and ``tests/scenarios/oracle_streams.py``. A failing seed reproduces with
``CDC_SOAK_SEED=<seed> CDC_SOAK_SCENARIOS=1``.
"""

from __future__ import annotations

import os
import time

import pytest

from tests.scenarios.harness import Harness, Scenario

pytestmark = [pytest.mark.integration, pytest.mark.slow]


@pytest.mark.timeout(0)  # hours, not the 900 s default
def test_soak(spark, broker, warehouse, tmp_path):
    from devtools.registry import LocalSchemaRegistry

    n = int(os.environ.get("CDC_SOAK_SCENARIOS", "200"))
    first = int(os.environ.get("CDC_SOAK_SEED", "1"))
    budget = float(os.environ.get("CDC_SOAK_MINUTES", "0")) * 60
    t0 = time.monotonic()
    failures, done, crashes = [], 0, 0
    with LocalSchemaRegistry() as registry:
        h = Harness(spark, broker, warehouse, registry, tmp_path)
        seeds = [int(x) for x in os.environ.get("CDC_SOAK_SEEDS", "").split(",") if x.strip()]
        for seed in seeds or range(first, first + n):
            if budget and time.monotonic() - t0 > budget:
                break
            kinds = ("kill", "sigkill") if seed % 8 == 0 else ("raise",)
            odds = 1.0 if seed % 8 == 0 else 0.45
            scenario = Scenario.random(seed, crash_kinds=kinds, crash_odds=odds)
            out = h.run_scenario(scenario)
            done += 1
            crashes += out.crashed
            print(f"[soak {done}/{len(seeds) or n}] {out.describe()} mismatches={len(out.mismatches)}", flush=True)
            if out.mismatches:
                failures.append(out)
                for m in out.mismatches[:20]:
                    print("    " + m, flush=True)
    mins = (time.monotonic() - t0) / 60
    print(f"\nsoak: {done} scenarios ({crashes} with a crash), {sum(len(f.mismatches) for f in failures)} mismatches "
          f"in {len(failures)} scenarios, {mins:.1f} min", flush=True)
    assert not failures, "failing seeds: " + ", ".join(str(f.scenario.seed) for f in failures)
