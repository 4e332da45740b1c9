"""The scenarios drive pipelines as the module-level integration tests do: the same fixtures."""

from __future__ import annotations

from tests.integration.conftest import make_pipe, registry  # noqa: F401 - fixtures


def pytest_terminal_summary(terminalreporter):  # the randomized oracle's count, also without -s (make test)
    import sys

    oracle = sys.modules.get("tests.scenarios.test_oracle")
    if oracle is not None and oracle.COUNT["scenarios"]:
        terminalreporter.write_line(f"oracle: {oracle.COUNT['scenarios']} randomized scenarios, "
                                    f"{oracle.COUNT['mismatches']} mismatches")
