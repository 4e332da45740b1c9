"""OpenLineage dataset names of the CDC operator (pure parts; the end-to-end check is in tests/dags/test_cdc_dag_real.py)."""

from __future__ import annotations

from cdc_airflow.operators.lineage import LineageNamespaces, _no_credentials, lineage, table_dataset_id


def _ns(ctype: str = "hadoop", warehouse: str = "/data/wh", uri: str = "") -> LineageNamespaces:
    return LineageNamespaces(kafka="kafka://k1:9092", catalog_name="lake", catalog_type=ctype, catalog_uri=uri,
                             warehouse=warehouse)


def test_hadoop_tables_are_named_by_location() -> None:
    assert table_dataset_id(_ns(), "inv.orders") == ("file", "/data/wh/inv/orders")
    assert table_dataset_id(_ns(warehouse="s3a://bkt/lake/"), "inv.orders") == ("s3://bkt", "lake/inv/orders")
    assert table_dataset_id(_ns(warehouse="hdfs://nn:8020/wh"), "a.b") == ("hdfs://nn:8020", "/wh/a/b")


def test_catalog_service_tables_are_named_by_catalog_uri_without_credentials() -> None:
    uri = _no_credentials("jdbc:postgresql://u:secret@db:5432/cat?user=u&password=secret")
    assert "secret" not in uri and uri.startswith("jdbc:postgresql://db:5432/cat")
    assert table_dataset_id(_ns("rest", uri="http://rest:8181"), "inv.orders") == ("http://rest:8181", "inv.orders")
    assert table_dataset_id(_ns("glue", warehouse="s3://b/w"), "inv.orders") == ("iceberg://lake", "inv.orders")


def test_summary_tables_become_inputs_and_outputs_once_each() -> None:
    summary = {"tables": [{"table": "inv.orders", "topic": "db.public.orders", "status": "committed"},
                          {"table": "inv.orders", "topic": "db.public.orders", "status": "empty"},
                          {"table": "inv.customers", "topic": "db.public.customers", "status": "empty"}]}
    inputs, outputs = lineage(_ns(), summary)
    assert [(d.namespace, d.name) for d in inputs] == [("kafka://k1:9092", "db.public.orders"),
                                                       ("kafka://k1:9092", "db.public.customers")]
    assert [d.name for d in outputs] == ["/data/wh/inv/orders", "/data/wh/inv/customers"]
    assert outputs[0].facets["symlinks"].identifiers[0].name == "inv.orders"
    assert lineage(_ns(), None) == ([], [])
