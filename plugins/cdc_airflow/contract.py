"""The job's command-line contract (``jobs/cdc/cli_contract.py``) for the Airflow side.

Importing this module makes ``jobs/`` importable (``CDC_HOME``) and re-exports the contract as ``cli``: flag names,
the timestamp and offsets formats, the exit-code table and the result file. The contract module is pure (standard
library only), so DAG files may import it while parsing.
"""

from __future__ import annotations

from cdc_airflow.settings import ensure_import_paths, load_settings

ensure_import_paths(load_settings())

from cdc import cli_contract as cli  # noqa: E402

__all__ = ["cli"]
