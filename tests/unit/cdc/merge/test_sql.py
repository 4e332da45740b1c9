"""The MERGE contract as SQL text. Behaviour on real tables is covered in tests/integration/merge/test_merge_rules.py."""

from cdc.common.sql import q
from cdc.merge.sql import (
    MergeSpec,
    classify_sql,
    merge_target_sql,
    merge_tombstones_sql,
    moved_toast_sql,
    newer_sql,
    newest_sql,
    truncate_sql,
)
from cdc.positions.sql import tuple_cmp_literal, tuple_gt

SPEC = MergeSpec(target="lake.inv.customers", staging="lake.meta.staging__inv__customers",
                 tombstones="lake.meta.tombstones__inv__customers", batch_id=7, key=("id",),
                 columns=("id", "name", "bio"), ordering=("__lsn",))


def test_quote_escapes_backticks():
    assert q("a`b") == "`a``b`"


def test_tuple_gt_is_lexicographic_with_null_as_minus_infinity():
    sql = tuple_gt("s", ["a", "b"], "t", ["a", "b"])
    assert sql == ("((s.`a` > coalesce(t.`a`, -9223372036854775808)) OR "
                   "(s.`a` = coalesce(t.`a`, -9223372036854775808) AND s.`b` > coalesce(t.`b`, -9223372036854775808)))")


def test_tuple_cmp_literal():
    assert tuple_cmp_literal("t", ["f", "p"], [10, 4], "<") == "((t.`f` < 10) OR (t.`f` = 10 AND t.`p` < 4))"


def test_newer_is_strictly_greater_position_then_kafka_partition_and_offset():
    m = "-9223372036854775808"
    assert newer_sql(SPEC, "s", "t") == (
        f"((s.`__lsn` > coalesce(t.`__lsn`, {m})) OR "
        f"(s.`__lsn` = coalesce(t.`__lsn`, {m}) AND s.`__partition` > coalesce(t.`__kafka_partition`, {m})) OR "
        f"(s.`__lsn` = coalesce(t.`__lsn`, {m}) AND s.`__partition` = coalesce(t.`__kafka_partition`, {m}) AND "
        f"s.`__offset` > coalesce(t.`__kafka_offset`, {m})))")


def test_newest_keeps_one_row_per_key_newest_first():
    sql = newest_sql(SPEC, "SELECT 1")
    assert "PARTITION BY `id` ORDER BY `__lsn` DESC, `__partition` DESC, `__offset` DESC" in sql
    assert "WHERE `__rn` = 1" in sql
    assert "__carry" not in sql  # no TOAST columns in this batch → no carry windows


def test_toast_columns_carry_the_latest_available_value():
    spec = MergeSpec(**{**SPEC.__dict__, "toast_columns": ("bio",)})
    newest = newest_sql(spec, "SELECT 1")
    assert ("last(IF(`__op` = 'd' OR array_contains(coalesce(`__unavailable`, array()), 'bio'), NULL, "
            "named_struct('v', `bio`, '__lsn', `__lsn`, '__partition', `__partition`, '__offset', `__offset`)), true) "
            "OVER w_carry AS `bio__carry`") in newest
    classify = classify_sql(spec, "X")
    # the carried value only when its change is newer than the table row; else the (live) row's value
    assert "CASE WHEN s.`bio__carry` IS NOT NULL AND ((s.`bio__carry`.`__lsn` > coalesce(t.`__lsn`" in classify
    assert "THEN s.`bio__carry`.v WHEN t.`id` IS NOT NULL THEN t.`bio` END AS `bio`" in classify


def test_pk_changes_move_toast_values_only_in_toast_batches():
    assert moved_toast_sql(SPEC, "SELECT 1") == "SELECT 1"
    spec = MergeSpec(**{**SPEC.__dict__, "toast_columns": ("bio",)})
    sql = moved_toast_sql(spec, "CH")
    assert "WHERE p.`__op` = 'd' GROUP BY p.`__lsn`" in sql
    assert "ON c.`__op` = 'c' AND (c.`__lsn` = m.`__lsn`) AND (c.`id` <> m.`__old_key`.`id`)" in sql


def test_gc_horizon_skips_forgotten_keys_at_or_below_it():
    spec = MergeSpec(**{**SPEC.__dict__, "gc_horizon": (500,)})
    assert "WHEN t.`id` IS NULL AND d.`id` IS NULL AND NOT ((s.`__lsn` > 500)) THEN 'skip'" in classify_sql(spec, "X")
    assert "500" not in classify_sql(SPEC, "X")


def test_classify_hard_mode_checks_row_and_tombstone():
    sql = classify_sql(SPEC, "X")
    assert "LEFT JOIN lake.inv.customers t ON s.`id` = t.`id`" in sql
    assert "LEFT JOIN lake.meta.tombstones__inv__customers d ON s.`id` = d.`id`" in sql
    assert "WHEN d.`id` IS NOT NULL AND NOT" in sql


def test_classify_soft_mode_treats_deleted_rows_as_tombstones():
    soft = MergeSpec(**{**SPEC.__dict__, "delete_mode": "soft", "tombstones": None})
    sql = classify_sql(soft, "X")
    assert "tombstones" not in sql
    assert "NOT coalesce(t.`__deleted`, false)" in sql


def test_merge_hard_deletes_and_updates_only_newer_actions():
    sql = merge_target_sql(SPEC, "v")
    assert sql.startswith("MERGE INTO lake.inv.customers t USING (SELECT c.* FROM v c LEFT JOIN "
                          "lake.meta.tombstones__inv__customers d ON c.`id` = d.`id` WHERE c.`__action` <> 'skip' AND "
                          "(d.`id` IS NULL OR ((c.`__lsn` > coalesce(d.`__lsn`")
    newer = newer_sql(SPEC, "s", "t")
    assert f"WHEN MATCHED AND s.`__action` IN ('delete', 'tombstone') AND {newer} THEN DELETE" in sql  # fenced
    assert f"WHEN MATCHED AND s.`__action` IN ('update', 'insert') AND {newer} THEN UPDATE SET" in sql
    assert "t.`name` = s.`name`" in sql and "t.`__batch_id` = 7" in sql
    assert "t.`id` = s.`id`," not in sql  # the key is never updated


def test_merge_without_late_tombstones_reads_only_the_classified_changes():
    sql = merge_target_sql(SPEC, "v", late_tombstones=False)  # no tombstone committed since classification
    assert sql.startswith("MERGE INTO lake.inv.customers t USING (SELECT * FROM v WHERE `__action` <> 'skip') s ON ")
    assert "tombstones" not in sql
    assert sql.split(" s ON ", 1)[1] == merge_target_sql(SPEC, "v").split(" s ON ", 1)[1]  # the same fenced clauses


def test_merge_soft_marks_rows_deleted():
    soft = MergeSpec(**{**SPEC.__dict__, "delete_mode": "soft", "tombstones": None})
    sql = merge_target_sql(soft, "v")
    assert "THEN DELETE" not in sql
    assert "t.`__deleted` = true" in sql and "t.`__deleted` = false" in sql


def test_tombstones_remember_delete_positions():
    sql = merge_tombstones_sql(SPEC, "v")
    assert "WHERE `__action` IN ('delete', 'tombstone')" in sql
    assert "t.`__lsn` = s.`__lsn`" in sql
    assert f"WHEN MATCHED AND {newer_sql(SPEC, 's', 't')} THEN UPDATE" in sql  # only ever forward


def test_truncate_hard_deletes_rows_and_tombstones_before_the_position():
    stmts = truncate_sql(SPEC, (100,))
    assert stmts == ["DELETE FROM lake.inv.customers t WHERE ((t.`__lsn` < 100))",
                     "DELETE FROM lake.meta.tombstones__inv__customers t WHERE ((t.`__lsn` < 100))"]
    # no older target row (a replayed range, a snapshot's end over its own reads): the target gets no empty commit
    assert truncate_sql(SPEC, (100,), target_rows=False) == stmts[1:]


def test_the_key_filter_cuts_target_and_tombstones_to_the_batchs_keys_by_a_broadcast_semi_join():
    plain = classify_sql(SPEC, "NEWEST")
    assert "LEFT JOIN lake.inv.customers t ON s.`id` = t.`id`" in plain and "SEMI" not in plain
    spec = MergeSpec(**{**SPEC.__dict__, "key_filter": True})
    cut = classify_sql(spec, "NEWEST")
    assert ("LEFT JOIN (SELECT /*+ BROADCAST(k) */ r.* FROM lake.inv.customers r LEFT SEMI JOIN "
            "(SELECT DISTINCT `id` FROM (NEWEST)) k ON r.`id` = k.`id`) t ON s.`id` = t.`id`") in cut
    assert "FROM lake.meta.tombstones__inv__customers r LEFT SEMI JOIN (SELECT DISTINCT `id` FROM (NEWEST)) k" in cut
    merge = merge_target_sql(spec, "V")
    assert ("LEFT JOIN (SELECT /*+ BROADCAST(k) */ r.* FROM lake.meta.tombstones__inv__customers r LEFT SEMI JOIN "
            "(SELECT DISTINCT `id` FROM (SELECT * FROM V)) k ON r.`id` = k.`id`) d") in merge
    assert "SEMI" not in merge_target_sql(SPEC, "V")


def test_located_tombstones_name_the_file_and_row_of_each_keys_tombstone_also_through_the_key_filter():
    from dataclasses import replace

    plain = classify_sql(SPEC, "SELECT 1")
    assert "_file" not in plain and "_pos" not in plain
    located = classify_sql(replace(SPEC, locate_tombstones=True), "SELECT 1")
    tombstones = f"(SELECT *, _file AS `__tombstone_file`, _pos AS `__tombstone_pos` FROM {SPEC.tombstones})"
    assert f"LEFT JOIN {tombstones} d ON" in located and "d.`__tombstone_file`, d.`__tombstone_pos`" in located
    cut = classify_sql(replace(SPEC, locate_tombstones=True, key_filter=True), "SELECT 1")
    assert f"SELECT /*+ BROADCAST(k) */ r.* FROM {tombstones} r LEFT SEMI JOIN" in cut
    assert f"SELECT /*+ BROADCAST(k) */ r.* FROM {SPEC.target} r" in cut  # the target's cut stays as it was
    soft = classify_sql(replace(SPEC, locate_tombstones=True, tombstones=None, delete_mode="soft"), "SELECT 1")
    assert "_file" not in soft


def test_a_located_target_names_each_rows_file_and_position_in_the_classification():
    """``locate_target`` (``cdc.merge.target_write``): the target joined as a query of the table alone with its ``_file``
    and ``_pos``, also when cut to the batch's keys; the tombstones' join is untouched."""
    from dataclasses import replace

    located = classify_sql(replace(SPEC, locate_target=True), "SELECT 1")
    target = f"(SELECT *, _file AS `__target_file`, _pos AS `__target_pos` FROM {SPEC.target})"
    assert f"LEFT JOIN {target} t ON" in located and "t.`__target_file`, t.`__target_pos`" in located
    assert f"LEFT JOIN {SPEC.tombstones} d ON" in located
    cut = classify_sql(replace(SPEC, locate_target=True, key_filter=True), "SELECT 1")
    assert f"SELECT /*+ BROADCAST(k) */ r.* FROM {target} r LEFT SEMI JOIN" in cut


def test_the_merges_insert_writes_the_insert_values():
    from cdc.merge.sql import insert_values

    values = insert_values(SPEC)
    assert [c for c, _ in values] == ["id", "name", "bio", "__lsn", "__op", "__source_ts_ms", "__kafka_partition",
                                      "__kafka_offset", "__batch_id", "__ingested_at"]
    assert dict(values)["__batch_id"] == "7" and dict(values)["__kafka_offset"] == "s.`__offset`"
    insert = "INSERT (" + ", ".join(f"`{c}`" for c, _ in values) + ") VALUES (" + ", ".join(v for _, v in values) + ")"
    assert insert in merge_target_sql(SPEC, "v")
    assert insert_values(SPEC, "true")[-1] == ("__deleted", "true")


def test_one_task_reads_batch_target_and_tombstones_as_one_partition_each_and_hash_joins_them():
    """``one_task`` (``cdc.merge.sql.relation``): every table the classification reads is coalesced to one partition and
    both joins are hinted as shuffled hash joins (so Spark neither shuffles nor broadcasts); located columns stay
    named in the same query; without it the text is as before."""
    from dataclasses import replace

    from cdc.merge.sql import changes_sql

    one = replace(SPEC, one_task=True, locate_target=True)
    sql = classify_sql(one, "NEWEST")
    assert sql.startswith("SELECT /*+ SHUFFLE_HASH(t, d) */ s.`id`")
    assert (f"LEFT JOIN (SELECT /*+ COALESCE(1) */ *, _file AS `__target_file`, _pos AS `__target_pos` "
            f"FROM {SPEC.target}) t ON") in sql
    assert f"LEFT JOIN (SELECT /*+ COALESCE(1) */ * FROM {SPEC.tombstones}) d ON" in sql
    assert f"FROM (SELECT /*+ COALESCE(1) */ * FROM {SPEC.staging}) c WHERE c.batch_id = 7" in changes_sql(one)
    soft = classify_sql(replace(one, tombstones=None, delete_mode="soft"), "NEWEST")
    assert soft.startswith("SELECT /*+ SHUFFLE_HASH(t) */ ") and " d ON" not in soft
    assert "COALESCE" not in classify_sql(SPEC, "NEWEST") + changes_sql(SPEC)
    assert "SHUFFLE_HASH" not in classify_sql(SPEC, "NEWEST")
