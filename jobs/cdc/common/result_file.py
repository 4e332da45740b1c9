"""Where a job's outcome (``cdc.common.cli_contract.JobResult``) is written so that whoever started it can read it.

In client deploy mode the driver runs beside spark-submit, and a local file (``$CDC_RESULT_FILE``) works. In cluster
deploy mode (YARN, Kubernetes) the driver runs on a cluster node: its stdout and local files are out of reach, and
spark-submit's exit code says little. Then ``$CDC_RESULT_FILE`` names a location both sides reach, typically under
the warehouse (``CDC_RESULT_DIR`` on the Airflow side, e.g. ``s3://lake/warehouse/_cdc_results``):

* a local/NFS path or ``file://`` URI: a plain file, written atomically (temporary file + rename);
* any other URI (``s3://``, ``gs://``, ``hdfs://``, ``abfs://``): ``pyarrow.fs`` (pyarrow is a job dependency),
  one object written in one request; credentials come from the environment as for pyarrow (AWS_* variables, instance
  profiles, ``HADOOP_CONF_DIR``/libhdfs for HDFS).

The Airflow operator passes the variable as a ``SparkSubmitOperator`` ``env_vars`` entry, which the provider turns
into ``spark.yarn.appMasterEnv.*`` / ``spark.kubernetes.driverEnv.*`` for a driver in cluster deploy mode. Spark
standalone runs Python applications in client mode only. Standard library at import time (the Airflow side
imports this while parsing).
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from urllib.parse import urlsplit

RESULT_DIR_ENV = "CDC_RESULT_DIR"


def is_local(location: str) -> bool:
    """A path or ``file:`` URI (written as a plain file) rather than an object-store / HDFS URI (pure)."""
    scheme = urlsplit(location).scheme
    return scheme in ("", "file") or len(scheme) == 1  # a Windows drive letter is not a scheme


def local_path(location: str) -> Path:
    return Path(urlsplit(location).path if location.startswith("file:") else location)


def write_text(location: str, text: str) -> None:
    """Write ``text`` to ``location`` (atomically for files; one object for object stores)."""
    if is_local(location):
        path = local_path(location)
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
        tmp.write_text(text)
        os.replace(tmp, path)
        return
    from pyarrow import fs

    filesystem, path = fs.FileSystem.from_uri(location)
    filesystem.create_dir(path.rsplit("/", 1)[0], recursive=True)
    with filesystem.open_output_stream(path) as out:
        out.write(text.encode())


def read_text(location: str) -> str | None:
    """The text at ``location``, or None when there is nothing (yet) or it cannot be read."""
    try:
        if is_local(location):
            return local_path(location).read_text()
        from pyarrow import fs

        filesystem, path = fs.FileSystem.from_uri(location)
        with filesystem.open_input_stream(path) as src:
            return bytes(src.read()).decode()
    except (OSError, ValueError):
        return None


def _part(value: object) -> str:
    return re.sub(r"[^A-Za-z0-9_.=-]+", "_", str(value)).strip("_") or "_"


def result_location(base: str, dag_id: str, run_id: str, task_id: str, map_index: int | str, try_number: int) -> str:
    """One location per task try under ``base`` (pure): ``<base>/<dag>/<run>/<task>__<map index>__try<n>.json``."""
    return "/".join([base.rstrip("/"), _part(dag_id), _part(run_id),
                     f"{_part(task_id)}__{_part(map_index)}__try{int(try_number)}.json"])

