"""cdc.decode.factory.make_decoder."""

from __future__ import annotations

import pytest

from cdc.common.errors import ConfigError
from cdc.config.load import parse_config
from cdc.decode.avro import AvroDecoder
from cdc.decode.avro_connectors import AvroByConnector
from cdc.decode.factory import make_decoder
from cdc.decode.json import JsonDecoder


def config(fmt: str, registry: dict | None = None):
    raw = {"pipeline": "p", "kafka": {"bootstrap.servers": "b:9092"}, "format": fmt,
           "catalog": {"type": "hadoop", "warehouse": "/tmp/wh"},
           "tables": [{"topic": "srv.public.orders", "target": "db.orders", "unavailable_value_placeholder": "__x"}]}
    if registry is not None:
        raw["schema_registry"] = registry
    return parse_config(raw, env={})


def test_json() -> None:
    cfg = config("json")
    d = make_decoder(cfg, cfg.tables[0])
    assert isinstance(d, JsonDecoder) and d.topic == "srv.public.orders" and d.placeholder == "__x"


def test_avro_registry_conf_and_strategy() -> None:
    cfg = config("avro", {"url": "http://r:8081", "subject.name.strategy": "TopicNameStrategy"})
    d = make_decoder(cfg, cfg.tables[0])  # AvroDecoder, or the MongoDB one once the registry shows the schema
    assert isinstance(d, AvroByConnector) and isinstance(d.avro, AvroDecoder)
    assert d.value_subject == "srv.public.orders-value" and d.avro.placeholder == "__x"
    assert d.source.conf == {"url": "http://r:8081"}  # type: ignore[attr-defined]
    cfg = config("avro", {"url": "http://r:8081", "subject.name.strategy": "RecordNameStrategy"})
    with pytest.raises(ConfigError, match="not supported"):
        make_decoder(cfg, cfg.tables[0])
