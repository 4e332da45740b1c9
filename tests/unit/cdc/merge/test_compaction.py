"""cdc.merge.compaction's SQL by its text: which row a Kafka tombstone follows."""

from cdc.merge.compaction import before_next_sql, epoch_start_sql, follows_sql, tombstones_sql
from cdc.merge.sql import MergeSpec, changes_sql

ORDERING = ("__lsn",)


def test_epoch_start_is_the_partitions_newest_reset_batch_else_zero():
    assert epoch_start_sql((), "b") == "0"
    assert epoch_start_sql(((1, 9), (0, 4)), "b") == "CASE b.`__partition` WHEN 0 THEN 4 WHEN 1 THEN 9 ELSE 0 END"


def test_a_tombstone_knows_the_least_position_after_it_in_its_partition():
    sql = tombstones_sql("st", 7, ("id",), ORDERING)
    assert ("min(IF(`__kind` = 'change', named_struct('o0', s.`__lsn`), NULL)) OVER (PARTITION BY `__partition` "
            "ORDER BY `__offset` DESC ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS `__after`") in sql
    assert "WHERE batch_id = 7 AND `__kind` IN ('change', 'tombstone')" in sql
    assert sql.endswith("WHERE `__kind` = 'tombstone' AND `id` IS NOT NULL")


def test_a_row_follows_from_its_partition_below_the_offset_or_from_elsewhere_below_the_next_change():
    same, other = follows_sql("b", "t", "__kafka_partition", "__kafka_offset", "__batch_id", ORDERING, 7, ((0, 3),))
    epoch = "coalesce(t.`__batch_id`, 0) >= CASE b.`__partition` WHEN 0 THEN 3 ELSE 0 END"
    assert same == (f"(t.`__kafka_partition` = b.`__partition` AND t.`__kafka_offset` < b.`__offset` AND {epoch})")
    assert other == (f"(NOT (t.`__kafka_partition` = b.`__partition` AND {epoch}) AND coalesce(t.`__batch_id`, 0) "
                     f"<> 7 AND {before_next_sql('b', 't', ORDERING)})")
    assert before_next_sql("b", "t", ORDERING) == "(b.`__after` IS NULL OR ((b.`__after`.`o0` > t.`__lsn`)))"


def test_a_compacted_delete_at_the_barrier_stays_other_changes_there_go():
    spec = MergeSpec(target="t", staging="st", tombstones="ts", batch_id=7, key=("id",), columns=("id", "name"),
                     ordering=ORDERING, barrier=(50,), compacted=True)
    assert changes_sql(spec).endswith(
        ") c WHERE (((c.`__lsn` > 50)) OR (c.`__partition` = 2147483647 AND NOT ((c.`__lsn` < 50))))")
