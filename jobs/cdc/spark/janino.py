"""Small Java classes compiled once per driver JVM by Janino, the Java compiler Spark ships (no JDK needed).

Py4J cannot implement a Java interface from Python, and a loop of Py4J calls costs a round trip per element. A few
glue classes do that work in the JVM instead (``cdc.iceberg.row_writer``: Iceberg's Spark Parquet writers; ``cdc.iceberg.generic_rows``:
a small table read without a Spark job). Each is compiled on first use in a driver (about 0.2 s) and kept per Spark
application. Without Janino, or on a compile error, ``compiled`` returns None (logged once) and the caller keeps its
Spark statement.
"""

from __future__ import annotations

import logging
import threading
from typing import Any

from cdc.spark.py4j_classes import java_class

log = logging.getLogger("cdc.janino")

_lock = threading.Lock()
_compiled: dict[tuple[str, str], Any] = {}  # (application id, class) -> an instance of the class, or None


def compiled(spark: Any, name: str, source: str, purpose: str) -> Any | None:
    """An instance of the public class ``name`` of Java ``source`` in this driver's JVM (compiled on first use), or
    None when Janino cannot build it here; ``purpose`` says in the warning what then runs as a Spark statement."""
    key = (spark.sparkContext.applicationId, name)
    with _lock:
        if key not in _compiled:
            try:
                compiler = java_class(spark, "org.codehaus.janino.SimpleCompiler")()
                loader = java_class(spark, "java.lang.Thread").currentThread().getContextClassLoader()
                compiler.setParentClassLoader(loader)
                compiler.cook(source)
                _compiled[key] = compiler.getClassLoader().loadClass(name).newInstance()
            except Exception as exc:  # noqa: BLE001 - the caller's Spark statement does the work then
                java = getattr(exc, "java_exception", None)
                log.warning("the Java class %s could not be compiled (%s); %s", name,
                            (java.toString() if java is not None else str(exc)).splitlines()[0][:500], purpose)
                _compiled[key] = None
        return _compiled[key]
