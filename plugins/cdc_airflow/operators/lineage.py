"""OpenLineage for CDC tasks: Kafka topics in, Iceberg tables out (only when the OpenLineage provider is installed).

The OpenLineage provider calls ``get_openlineage_facets_on_complete`` of an operator after the task; the CDC
operator answers from the job's JSON summary (the tables this task handled and their topics) and the pipeline's
:class:`LineageNamespaces`, computed once when the DAG is built. Names follow the OpenLineage naming spec:

* a topic: namespace ``kafka://<first bootstrap host:port>``, name ``<topic>``;
* an Iceberg table of a ``hadoop`` catalog: its location (``file`` + absolute path for a local warehouse,
  ``s3://<bucket>`` + key prefix for ``s3://``/``s3a://``, ``<scheme>://<authority>`` + path otherwise), the same
  dataset Spark's own OpenLineage integration reports;
* a table of a catalog service (rest, jdbc, glue, hive): namespace = the catalog's ``uri`` (credentials removed) or
  ``iceberg://<catalog name>`` without one, name ``<namespace>.<table>``.

Every output also carries the ``catalog`` facet (framework iceberg, catalog type/name/uri/warehouse) and a
``symlinks`` facet with the table identifier, so lineage tools can join it with what Spark reports.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Mapping
from urllib.parse import urlsplit

if TYPE_CHECKING:
    from cdc.config.model import PipelineConfig


@dataclass(frozen=True)
class LineageNamespaces:
    kafka: str  # kafka://host:port
    catalog_name: str
    catalog_type: str
    catalog_uri: str  # credentials removed; "" when the catalog has none
    warehouse: str  # as configured (a path or URI)


def _no_credentials(uri: str) -> str:
    """``scheme://user:pw@host/…`` → ``scheme://host/…``; ``?user=…&password=…`` dropped."""
    uri = re.sub(r"//[^/@]*@", "//", uri)
    return re.sub(r"([?&;])(user|password)=[^&;]*", r"\1", uri).rstrip("?&;")


def namespaces(cfg: "PipelineConfig") -> LineageNamespaces:
    servers = str(cfg.kafka.get("bootstrap.servers", "")).split(",")[0].strip()
    return LineageNamespaces(kafka=f"kafka://{servers}", catalog_name=cfg.catalog.name, catalog_type=cfg.catalog.type,
                             catalog_uri=_no_credentials(cfg.catalog.uri), warehouse=str(cfg.catalog.warehouse))


def table_dataset_id(ns: LineageNamespaces, target: str) -> tuple[str, str]:
    """(namespace, name) of an Iceberg table per the OpenLineage naming spec (see the module docstring)."""
    if ns.catalog_type == "hadoop" and ns.warehouse:
        parts = urlsplit(ns.warehouse)
        suffix = "/" + target.replace(".", "/")
        if parts.scheme in ("", "file"):
            return "file", os.path.abspath(parts.path) + suffix
        if parts.scheme in ("s3", "s3a", "s3n"):
            return f"s3://{parts.netloc}", parts.path.strip("/") + suffix
        return f"{parts.scheme}://{parts.netloc}", parts.path.rstrip("/") + suffix
    return (ns.catalog_uri or f"iceberg://{ns.catalog_name}"), target


def lineage(ns: LineageNamespaces, summary: Mapping[str, Any] | None) -> tuple[list[Any], list[Any]]:
    """(inputs, outputs) as OpenLineage ``Dataset`` objects for the tables of a job summary."""
    from openlineage.client.event_v2 import Dataset
    from openlineage.client.facet_v2 import catalog_dataset, symlinks_dataset

    inputs: dict[str, Any] = {}
    outputs: dict[str, Any] = {}
    for table in (summary or {}).get("tables") or []:
        target = str(table.get("table") or "")
        topic = str(table.get("topic") or "")
        if topic:
            inputs[topic] = Dataset(namespace=ns.kafka, name=topic)
        if not target:
            continue
        namespace, name = table_dataset_id(ns, target)
        facets = {
            "catalog": catalog_dataset.CatalogDatasetFacet(
                framework="iceberg", type=ns.catalog_type, name=ns.catalog_name, metadataUri=ns.catalog_uri or None,
                warehouseUri=ns.warehouse or None, source="spark"),
            "symlinks": symlinks_dataset.SymlinksDatasetFacet(identifiers=[symlinks_dataset.Identifier(
                namespace=ns.catalog_uri or f"iceberg://{ns.catalog_name}", name=target, type="TABLE")]),
        }
        outputs[target] = Dataset(namespace=namespace, name=name, facets=facets)
    return list(inputs.values()), list(outputs.values())


def operator_lineage(ns: LineageNamespaces | None, summary: Mapping[str, Any] | None) -> Any:
    """The provider's ``OperatorLineage`` for a finished task, or None when the provider is not installed."""
    try:
        from airflow.providers.openlineage.extractors import OperatorLineage
    except ImportError:
        return None
    if ns is None:
        return OperatorLineage()
    inputs, outputs = lineage(ns, summary)
    return OperatorLineage(inputs=inputs, outputs=outputs)
