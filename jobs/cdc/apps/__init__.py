"""The jobs as modules of the installed package: ``ingest``, ``maintenance`` and ``bootstrap`` are
``jobs/ingest.py``, ``jobs/maintenance.py`` and ``jobs/bootstrap.py`` themselves (symbolic links in the source tree,
copies in the wheel), so ``python jobs/<job>.py``, ``spark-submit jobs/<job>.py`` and the ``cdc-ingest`` /
``cdc-maintenance`` / ``cdc-bootstrap`` entry points (``pyproject.toml``) run the same code."""

from __future__ import annotations


def ingest() -> int:
    """``cdc-ingest``: ``jobs/ingest.py`` (it reports its own result to ``$CDC_RESULT_FILE``)."""
    from cdc.apps.ingest import main

    return main()


def maintenance() -> int:
    """``cdc-maintenance``: ``jobs/maintenance.py`` (it reports its own result to ``$CDC_RESULT_FILE``)."""
    from cdc.apps.maintenance import main

    return main()


def bootstrap() -> int:
    """``cdc-bootstrap``: ``jobs/bootstrap.py`` (it reports its own result to ``$CDC_RESULT_FILE``)."""
    from cdc.apps.bootstrap import main

    return main()
