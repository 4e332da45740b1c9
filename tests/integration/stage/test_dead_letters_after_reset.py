"""Dead letters on the real broker, Spark and Iceberg: a re-created topic's bad record at an offset an old dead letter
holds is recorded too, with its own bytes (``cdc.stage.stage.record_dead_letters`` keys them by batch)."""

from __future__ import annotations

import pytest

from tests.integration.events import pg, row
from tests.integration.merge.test_compacted_tombstone_rows import recreate_topic

pytestmark = pytest.mark.integration


def dead_letters(p) -> list[tuple]:
    from cdc.config.names import names

    table = names(p.cfg, p.table).dead_letters
    p.spark.catalog.refreshTable(table)
    return sorted((r["batch_id"], r["topic"], r["partition"], r["offset"], bytes(r["value"]))
                  for r in p.spark.table(table).collect())


def test_after_a_reset_cursor_a_bad_record_at_an_old_dead_letters_offset_is_recorded(make_pipe):
    p = make_pipe(on_bad_record="dead_letter", max_dead_letter_ratio=1.0)
    p.send(pg("c", 1, row(1, "a"), 10), (b'{"id": 9}', b"old cluster's bad record"), pg("c", 3, row(3, "c"), 12),
           pg("c", 4, row(4, "d"), 13))
    first = p.run()
    assert (first["status"], first["dead_letters"]) == ("committed", 1)
    p.run()  # a rerun of nothing: the dead letter is not recorded twice
    recreate_topic(p)
    p.send(pg("c", 2, row(2, "b"), 20), (b'{"id": 8}', b"new cluster's bad record"))  # offset 1 again
    assert p.run(mode="reset")["moves"] == [{"partition": 0, "from": 4, "to": 0}]
    second = p.run()
    assert (second["status"], second["dead_letters"]) == ("committed", 1)
    assert dead_letters(p) == [(first["batch_id"], p.topic, 0, 1, b"old cluster's bad record"),
                               (second["batch_id"], p.topic, 0, 1, b"new cluster's bad record")]
    assert p.rows() == {1: ("a", None), 2: ("b", None), 3: ("c", None), 4: ("d", None)}
