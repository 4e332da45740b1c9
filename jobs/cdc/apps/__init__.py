"""The jobs as modules of the installed package: ``ingest`` and ``maintenance`` are ``jobs/ingest.py`` and
``jobs/maintenance.py`` themselves (symbolic links in the source tree, copies in the wheel), so
``python jobs/ingest.py``, ``spark-submit jobs/ingest.py`` and the ``cdc-ingest`` / ``cdc-maintenance`` entry points
(``pyproject.toml``) run the same code."""

from __future__ import annotations


def ingest() -> int:
    """``cdc-ingest``: ``jobs/ingest.py`` (it reports its own result to ``$CDC_RESULT_FILE``)."""
    from cdc.apps.ingest import main

    return main()


def maintenance() -> int:
    """``cdc-maintenance``: ``jobs/maintenance.py``, reporting its exit code as the script does."""
    from cdc.apps.maintenance import main
    from cdc.cli_contract import finish

    return finish(main())
