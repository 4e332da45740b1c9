"""Decoders: Kafka record bytes → ``Event`` (pure functions plus a cached schema-registry lookup).

Contract (``base.Decoder``, implemented by ``AvroDecoder`` in ``avro.py`` and ``JsonDecoder`` in ``json.py``)::

    decoder = make_decoder(settings, topic)                 # on the driver
    cols = decoder.resolve_columns(samples)                  # batch schema of the row image (list[Column])
    key_cols = decoder.key_columns(samples)                  # fields of the Kafka message key (list[Column])
    # ... decoder is pickled into Spark tasks (it must not hold sockets; clients are created lazily) ...
    event = decoder.decode(key_bytes, value_bytes)           # Event, or raises cdc.common.errors.DecodeError

``samples`` are ``(key_bytes, value_bytes)`` of the newest records of the batch's ranges (the last record of each
partition range), read by the planner; Avro ignores them and asks the registry for the subject's latest schema.
``resolve_columns`` also takes ``existing``: the target table's current columns, so columns dropped at the source are
kept (the batch schema is the union, existing order first, new columns appended).
"""
