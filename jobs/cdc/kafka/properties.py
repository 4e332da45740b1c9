"""The ``kafka:`` section checked against librdkafka before anything connects: a property it does not know
(``security.protocl``) or a value it refuses (``security.protocol: SSLX``) is a ``ConfigError`` naming the file and
the key, before Spark starts; otherwise the first consumer raised a raw ``KafkaException`` mid-run."""

from __future__ import annotations

import re
from typing import Any, Mapping

from cdc.common.errors import ConfigError
from cdc.kafka.offsets import consumer_conf

_PROPERTY = re.compile(r'configuration property:? "?([^"\s]+)"?')
DOCS = "https://github.com/confluentinc/librdkafka/blob/master/CONFIGURATION.md"


def check_properties(kafka_conf: Mapping[str, Any], src: str) -> None:
    """Create (and close) a consumer with the section minus ``bootstrap.servers``: librdkafka validates every
    property and value on creation, and with no broker to talk to it opens no connection. Other creation errors
    (a SASL mechanism this build lacks, a missing certificate) are left to the real client, which reports them."""
    from confluent_kafka import Consumer, KafkaException

    conf = {k: v for k, v in consumer_conf(kafka_conf).items() if k != "bootstrap.servers"}
    conf["log_level"] = 0  # no CONFWARN lines: the real consumer logs them
    try:
        Consumer(conf).close()
    except KafkaException as exc:
        err = exc.args[0] if exc.args else exc
        text = err.str() if hasattr(err, "str") else str(err)
        if "No such configuration property" not in text and "Invalid value" not in text:
            return
        found = _PROPERTY.search(text)
        key = found.group(1) if found else "?"
        what = "unknown librdkafka property" if "No such" in text else text
        raise ConfigError(f"{src}: key 'kafka.{key}': {what}; the kafka: section takes librdkafka properties "
                          f"({DOCS})") from None
