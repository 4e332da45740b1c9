"""Write modes: config, mode choice for keyless tables, and the SQL builders' identities (cdc.merge.modes)."""

from __future__ import annotations

import pytest

from cdc.common.errors import ConfigError
from cdc.config.load import parse_config
from cdc.merge.modes import append, scd2
from cdc.merge.modes.runner import effective_mode
from cdc.merge.modes.spec import ModeSpec


def cfg(**table):
    return parse_config({"pipeline": "p", "kafka": {"bootstrap.servers": "x:1"}, "format": "json",
                         "catalog": {"warehouse": "/tmp/w"}, "defaults": {"write_mode": "append"},
                         "tables": [{"topic": "t", "target": "a.b", **table}]})


def test_write_mode_from_defaults_table_wins_and_track_columns_only_for_scd2():
    assert cfg().tables[0].mode == "append"
    t = cfg(write_mode="scd2", track_columns=["name"]).tables[0]
    assert (t.mode, t.track_columns) == ("scd2", ("name",))
    with pytest.raises(ConfigError, match=r"tables\[0\]\.write_mode': must be one of upsert, append, scd2"):
        cfg(write_mode="merge")
    with pytest.raises(ConfigError, match="track_columns': applies to write_mode: scd2 only"):
        cfg(track_columns=["name"])


def test_unconfigured_write_mode_is_upsert_or_append_when_keyless():
    assert effective_mode(None, ("id",), "a.b") == "upsert"
    assert effective_mode(None, (), "a.b") == "append"
    assert effective_mode("scd2", ("id",), "a.b") == "scd2"
    for mode in ("upsert", "scd2"):
        with pytest.raises(ConfigError, match=f"table a.b: write_mode {mode} needs a primary key"):
            effective_mode(mode, (), "a.b")


SPEC = ModeSpec(target="lake.n.t", staging="lake.m.staging__n__t", batch_id=7, key=("id",),
                columns=("id", "name", "bio"), ordering=("__lsn",), toast_columns=("bio",), log="lake.m.changes__n__t")


def test_append_identity_is_key_position_op_image_or_kafka_offset_when_keyless():
    unavailable = "array_contains(coalesce(s.`__unavailable`, array()), '{}')"
    assert append.identity_sql(SPEC, "t", "s") == (
        "t.`id` <=> s.`id` AND t.`__lsn` <=> s.`__lsn` AND t.`__op` = s.`__op` AND "  # image: not the placeholders
        f"({unavailable.format('name')} OR t.`name` <=> s.`name`) AND "  # nor a create's (PK move) TOAST columns
        f"(s.`__op` = 'c' OR {unavailable.format('bio')} OR t.`bio` <=> s.`bio`)")
    opaque = ModeSpec(**{**SPEC.__dict__, "opaque_columns": ("name",)})  # a map: compared as JSON
    assert "to_json(named_struct('v', t.`name`)) <=> to_json(named_struct('v', s.`name`))" in append.identity_sql(
        opaque, "t", "s")
    keyless = ModeSpec(**{**SPEC.__dict__, "key": ()})
    assert append.identity_sql(keyless, "t", "s") == ("t.`__kafka_partition` = s.`__partition` AND "
                                                      "t.`__kafka_offset` = s.`__offset`")
    merge = append.merge_sql(SPEC, "SELECT 1")
    assert "WHEN NOT MATCHED THEN INSERT" in merge and "WHEN MATCHED" not in merge  # insert-only: replays add nothing
    assert ("PARTITION BY `id`, `__lsn`, `__op`, `name`, `bio`, `__unavailable` "  # identical copies in the batch
            in append.batch_changes_sql(SPEC))
    assert "PARTITION BY" not in append.batch_changes_sql(keyless)
    assert "'t'" in append.batch_changes_sql(SPEC)  # truncates are rows of the changelog


def test_scd2_versions_are_identified_by_key_and_starting_change():
    assert scd2.version_identity(SPEC, "a", "b") == (
        "a.`id` = b.`id` AND a.`__lsn` <=> b.`__lsn` AND a.`__kafka_partition` = b.`__kafka_partition` AND "
        "a.`__kafka_offset` = b.`__kafka_offset`")
    versions = scd2.versions_sql(SPEC, "SELECT 1")
    assert "lead(named_struct('ts', `__source_ts_ms`))" in versions and "last(IF(`__op` IN ('d', 't')" in versions
    assert "__grp" not in versions  # no track_columns: every change is its own version boundary
    tracked = scd2.versions_sql(ModeSpec(**{**SPEC.__dict__, "track_columns": ("name",)}), "SELECT 1")
    assert "`name` <=> `name__prev`" in tracked
    truncated = scd2.touched_keys_sql(SPEC, truncated=True)
    assert " UNION SELECT `id` FROM lake.n.t WHERE `__is_current`" in truncated
    # keys with a logged change after the truncate: the version open at the truncate may have ended since
    assert "LEFT SEMI JOIN (SELECT * FROM" in truncated and "`__op` = 't') x ON ((l.`__lsn` > " in truncated
    assert "UNION" not in scd2.touched_keys_sql(SPEC, truncated=False)
