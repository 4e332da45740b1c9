"""Small batches are read by the driver itself: the same reader code, no Spark tasks and no Python workers.

A batch's read normally runs as one Spark task per chunk (``DataFrame.mapInArrow`` over ``cdc.stage.reader``), which
costs a Python worker start per task (in a new process: interpreter, pyarrow, the decoders) and a task round trip,
about a second before the first record is read. For a batch of a few thousand records that is most of the read:
the driver, which has the decoders loaded already (it read the plan's samples), reads such a batch faster itself.

``read_in_driver`` runs ``cdc.stage.reader.read_chunk`` for every chunk in this process and ``arrow_frame`` hands the
Arrow record batches to the JVM as one Arrow stream, the way PySpark's ``createDataFrame(pandas_df)`` does (minus
pandas, which would turn nullable 64-bit integers into floats). The rows are exactly those the Spark tasks would
stage (same function, same batches); only where the code runs differs. The driver already talks to Kafka (it plans
the ranges and reads the samples), so this needs no new network path on a cluster either.

``batch.driver_read_max_records`` (``cdc.config.model.BatchConfig``, default 20,000; 0 = never) is the largest batch
read this way. Its memory is bounded too: the JVM holds a driver-read batch whole, so a batch of large rows whose
staging rows pass ``MAX_BYTES`` stops being read here (``TooLarge``) and is read by Spark tasks after all, chunk by
chunk, as any larger batch is.
"""

from __future__ import annotations

from typing import Any, Iterator, Sequence

import pyarrow as pa

from cdc.kafka.plan import OffsetRange
from cdc.stage.reader import ReadSpec, read_chunk

MAX_BYTES = 128 << 20  # Arrow bytes of staging rows the driver reads before handing the batch to Spark tasks


class TooLarge(Exception):
    """The batch's rows passed ``MAX_BYTES`` while the driver read them (``cdc.stage`` reads it in Spark tasks)."""


def use_driver(chunks: Sequence[OffsetRange], max_records: int) -> bool:
    """Read these chunks in the driver? (pure) Only when their offsets add up to at most ``max_records``."""
    return max_records > 0 and sum(max(0, c.end - c.start) for c in chunks) <= max_records


def read_in_driver(spec: ReadSpec, chunks: Sequence[OffsetRange], max_bytes: int | None = None
                   ) -> Iterator[pa.RecordBatch]:
    """The staging rows of ``chunks`` as Arrow batches, read in this process (errors are raised as they are: a
    ``CdcError`` needs no unwrapping from a Spark task failure); ``TooLarge`` once they pass ``max_bytes``."""
    limit, seen = MAX_BYTES if max_bytes is None else max_bytes, 0
    for chunk in chunks:
        for batch in read_chunk(spec, chunk):
            seen += batch.nbytes
            if seen > limit:
                raise TooLarge(f"table {spec.table}: more than {limit} bytes of staging rows")
            yield batch


def arrow_frame(spark: Any, batches: Iterator[pa.RecordBatch], schema: pa.Schema, spark_schema: Any) -> Any:
    """A DataFrame of record batches built in the driver (``schema`` is their Arrow schema, ``spark_schema`` the
    matching Spark ``StructType``), transferred to the JVM as an Arrow stream without any Spark task.

    Uses the hand-over PySpark's own ``createDataFrame`` uses for pandas data with Arrow (``_serialize_to_jvm`` +
    ``PythonSQLUtils.toDataFrame``, PySpark 3.5)."""
    from pyspark.sql import DataFrame
    from pyspark.sql.pandas.serializers import ArrowStreamSerializer

    def conform(stream: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        seen = False
        for b in stream:
            if b.num_rows:
                seen = True
                yield b if b.schema.equals(schema) else pa.RecordBatch.from_arrays(b.columns, schema=schema)
        if not seen:  # an empty stream still needs its schema
            yield pa.RecordBatch.from_arrays([pa.array([], type=f.type) for f in schema], schema=schema)

    jvm = spark._jvm
    jiter = spark.sparkContext._serialize_to_jvm(
        conform(batches), ArrowStreamSerializer(),
        lambda path: jvm.PythonSQLUtils.readArrowStreamFromFile(path),
        lambda: jvm.ArrowIteratorServer())
    return DataFrame(jvm.PythonSQLUtils.toDataFrame(jiter, spark_schema.json(), spark._jsparkSession), spark)
