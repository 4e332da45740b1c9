"""Pick the decoder for a pipeline's format and a table's envelope.

======  ===========  =======================================================================================
format  envelope     decoder
======  ===========  =======================================================================================
json    debezium     ``JsonDecoder`` (relational connectors and MongoDB, recognised per record)
json    flattened    ``JsonDecoder`` with ``envelope = "flattened"``
avro    debezium     ``AvroByConnector``: ``AvroDecoder`` (vectorised where it applies), or ``MongoAvroDecoder``
                     (per record) when the subject's newest value schema is the MongoDB connector's
avro    flattened    ``FlattenedAvroDecoder`` (per record: ``vectorised = False``)
======  ===========  =======================================================================================
"""

from __future__ import annotations

from cdc.common.errors import ConfigError
from cdc.config.model import PipelineConfig, TableConfig
from cdc.decode.avro import AvroDecoder
from cdc.decode.avro_connectors import AvroByConnector, FlattenedAvroDecoder
from cdc.decode.base import Decoder
from cdc.decode.json import JsonDecoder

# schema_registry keys that configure this library, not confluent_kafka's SchemaRegistryClient.
_STRATEGY_KEYS = ("subject.name.strategy", "subject_strategy")


def make_decoder(cfg: PipelineConfig, table: TableConfig) -> Decoder:
    """A decoder for one table's topic (unbound: call resolve_columns / bind on the driver)."""
    decoder: Decoder
    if cfg.format == "json":
        decoder = JsonDecoder(table.topic, table.unavailable_value_placeholder, column_types=table.column_types)
        decoder.envelope = table.envelope
    elif cfg.format == "avro":
        conf = {k: v for k, v in cfg.schema_registry.items() if k not in _STRATEGY_KEYS}
        strategy = next((str(cfg.schema_registry[k]) for k in _STRATEGY_KEYS if k in cfg.schema_registry), "topic")
        strategy = {"TopicNameStrategy": "topic", "topic_subject_name_strategy": "topic"}.get(strategy, strategy)
        cls = FlattenedAvroDecoder if table.envelope == "flattened" else AvroDecoder
        avro = cls(table.topic, conf, table.unavailable_value_placeholder, subject_strategy=strategy)
        avro.ignore_unknown_fields = not table.allow_field_addition
        decoder = avro if table.envelope == "flattened" else AvroByConnector(avro, table.column_types)
    else:
        raise ConfigError(f"{cfg.source_path}: key 'format': unsupported format {cfg.format!r} (avro or json)")
    decoder.ignore_unknown_fields = not table.allow_field_addition  # new source columns are ignored, not errors
    return decoder
