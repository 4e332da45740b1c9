"""The correctness review's scenarios 5, 6 and 11, end to end on the real broker, Spark and Iceberg: a failover
(position regressions, ordering epochs), compacted topics, a cursor beyond the high watermark. Scenarios 1-4 and 7
are in test_correctness_scenarios.py; the same classes through the CLI in test_correctness_cli.py.
"""

from __future__ import annotations

import pytest

from tests.integration.events import mysql, pg, row, tombstone
from tests.scenarios.test_correctness_scenarios import _bounds, gc_tombstones

pytestmark = pytest.mark.integration


# ---- scenario 11: a cursor beyond the high watermark ----------------------------------------------------------------

def test_scenario_11_cursor_beyond_the_high_watermark_is_a_terminal_error(make_pipe):
    from cdc.common.errors import TerminalError

    p = make_pipe()
    p.send(*[pg("c", i, row(i, f"n{i}"), 10 + i) for i in range(5)])
    p.run()
    # The broker lost its log / the topic was re-created elsewhere: the ledger's cursor (5) is now beyond the
    # partition's end. (The local broker cannot delete topics, so the ledger is moved past the end instead.)
    p.spark.sql(f"UPDATE lake.{p.cfg.metadata_namespace}.ledger SET end_offset = 50")
    with pytest.raises(TerminalError) as err:
        p.run()
    msg = str(err.value)
    assert p.topic in msg and "partition 0" in msg and "50" in msg and "high watermark 5" in msg
    assert "--reset-cursor" in msg
    reset = p.run(mode="reset")  # the documented way on: restart the partition at its low watermark
    assert (reset["status"], reset["moves"]) == ("reset", [{"partition": 0, "from": 50, "to": 0}])
    p.send(pg("c", 9, row(9, "new"), 100))
    s = p.run()
    assert s["ranges"] == [{"partition": 0, "start": 0, "end": 6}] and s["inserted"] == 1  # replays are ignored
    assert sorted(p.rows()) == [0, 1, 2, 3, 4, 9]
    assert p.run()["status"] == "empty"


# ---- scenario 5: position regressions after a failover -------------------------------------------------------------

def test_scenario_05_a_failover_is_refused_until_the_ordering_epoch_is_raised(make_pipe):
    from dataclasses import replace

    from cdc.common.errors import PositionRegression

    p = make_pipe()
    p.send(mysql("c", 1, row(1, "a"), "mysql-bin.000012", 900), mysql("c", 2, row(2, "b"), "mysql-bin.000012", 950))
    p.run()
    p.send(mysql("u", 1, row(1, "after failover"), "mysql-bin.000001", 4))  # RESET MASTER / a new primary
    with pytest.raises(PositionRegression) as err:
        p.run()
    assert p.topic in str(err.value) and "partition 0" in str(err.value) and "ordering_epoch" in str(err.value)
    assert p.rows() == {1: ("a", None), 2: ("b", None)}  # nothing merged
    p.cfg = replace(p.cfg, tables=(replace(p.table, ordering_epoch=1),))  # the documented way on
    s = p.run()
    assert (s["status"], s["updated"]) == ("committed", 1)
    p.send(mysql("d", 2, row(2, "b"), "mysql-bin.000001", 80))
    p.run()
    assert p.rows("name", "__ordering_epoch", "__binlog_file_seq") == {1: ("after failover", 1, 1)}
    # a replay of the old epoch's offsets changes nothing, and its deletes stay deleted
    p.run(mode="backfill", bounds=_bounds(p.topic, start={0: 0}))
    assert p.rows() == {1: ("after failover", None)}


def test_scenario_05_a_failover_inside_a_batch_is_refused_and_the_epoch_starts_where_positions_fell(make_pipe):
    """One batch holds the last changes before a failover and the first after it: its newest position is not below
    what was committed, so comparing only the batch's newest position let the post-failover changes lose silently."""
    from dataclasses import replace

    from cdc.common.errors import PositionRegression

    f12, f1 = "mysql-bin.000012", "mysql-bin.000001"
    p = make_pipe(partitions=2)
    p.send(mysql("c", 1, row(1, "a"), f12, 900), mysql("c", 3, row(3, "c"), f12, 910))
    p.send(mysql("c", 2, row(2, "b"), f12, 950), partition=1)
    p.run()
    p.send(mysql("u", 1, row(1, "before failover"), f12, 1000),  # offset 2
           mysql("u", 1, row(1, "after failover"), f1, 4),  # offset 3: positions restart at .000001
           mysql("u", 3, row(3, "after failover"), f1, 40))
    p.send(mysql("u", 2, row(2, "before failover"), f12, 1100), partition=1)  # partition 1 is not there yet
    with pytest.raises(PositionRegression) as err:
        p.run()
    msg = str(err.value)
    assert p.topic in msg and "partition 0" in msg and "offset 3" in msg and "ordering_epoch" in msg
    assert p.rows() == {1: ("a", None), 2: ("b", None), 3: ("c", None)}  # nothing merged
    p.cfg = replace(p.cfg, tables=(replace(p.table, ordering_epoch=1),))  # the documented way on
    assert p.run()["status"] == "committed"
    assert p.rows() == {1: ("after failover", None), 2: ("before failover", None), 3: ("after failover", None)}
    # partition 1's first change after the failover comes in a later batch: the new epoch starts there
    p.send(mysql("u", 2, row(2, "after failover"), f1, 80), partition=1)
    p.run()
    final = {1: ("after failover", None), 2: ("after failover", None), 3: ("after failover", None)}
    assert p.rows() == final
    assert p.rows("__ordering_epoch") == {1: (1,), 2: (1,), 3: (1,)}
    p.run(mode="backfill", bounds=_bounds(p.topic, start={0: 0, 1: 0}))  # a replay of everything changes nothing
    assert p.rows() == final


def test_scenario_05_a_failover_to_another_server_slightly_behind_is_refused_until_the_ordering_epoch_is_raised(
        make_pipe):
    """A MySQL failover to a replica whose binlog is only a little behind is no far fall: before the server rule the
    new server's changes were silently skipped as older. Partition 0: the new server's first change is below what was
    committed (one binlog file back); partition 1: it is above that but below the old server's last change in the
    same batch (same file, lower position)."""
    from dataclasses import replace

    from cdc.common.errors import PositionRegression

    f11, f12 = "mysql-bin.000011", "mysql-bin.000012"
    p = make_pipe(partitions=2)
    p.send(mysql("c", 1, row(1, "a"), f12, 900, server_id=1), mysql("c", 3, row(3, "c"), f12, 910, server_id=1))
    p.send(mysql("c", 2, row(2, "b"), f12, 950, server_id=1), partition=1)
    p.run()
    p.send(mysql("u", 1, row(1, "after failover"), f11, 7000, server_id=2),  # offset 2
           mysql("u", 3, row(3, "after failover"), f11, 7010, server_id=2))
    p.send(mysql("u", 2, row(2, "before failover"), f12, 1000, server_id=1),  # offset 1
           mysql("u", 2, row(2, "after failover"), f12, 980, server_id=2), partition=1)  # offset 2
    with pytest.raises(PositionRegression) as err:
        p.run()
    msg = str(err.value)
    assert p.topic in msg and "partition 0 offset 2" in msg and "server_id 2" in msg and "ordering_epoch" in msg
    assert p.rows() == {1: ("a", None), 2: ("b", None), 3: ("c", None)}  # nothing merged
    p.cfg = replace(p.cfg, tables=(replace(p.table, ordering_epoch=1),))  # the documented way on
    assert p.run()["status"] == "committed"
    final = {1: ("after failover", None), 2: ("after failover", None), 3: ("after failover", None)}
    assert p.rows() == final and p.rows("__ordering_epoch") == {1: (1,), 2: (1,), 3: (1,)}
    # the new server is known now: its redelivered change (a connector restart) is no failover, and changes nothing
    p.send(mysql("u", 1, row(1, "after failover"), f11, 7000, server_id=2))
    assert p.run()["status"] == "committed" and p.rows() == final


def test_scenario_05_a_partition_without_committed_changes_keeps_its_pre_failover_changes_in_the_old_epoch(make_pipe):
    """Soak seed 220: a partition that had committed nothing when the failover was refused still held changes from
    before it. The raised epoch started at its first offset, so those old changes carried the new epoch and, at their
    high pre-failover positions, outranked a truncate made after the failover: rows the source had removed stayed.
    A partition without committed changes is judged against the table (the highest position committed from any
    partition): its changes keep the old epoch until one falls far below that."""
    from dataclasses import replace

    from cdc.common.errors import PositionRegression

    before, after = 8_590_000_000, 30_000_000  # LSNs: the old cluster's, a new cluster's (near zero)
    p = make_pipe(partitions=2)
    p.send(pg("c", 1, row(1, "a"), before))
    p.run()  # partition 1 has nothing yet
    p.send(pg("c", 2, row(2, "b"), before + 10), pg("c", 3, row(3, "c"), before + 20), partition=1)
    p.send(pg("u", 1, row(1, "after failover"), after))
    with pytest.raises(PositionRegression):
        p.run()
    p.cfg = replace(p.cfg, tables=(replace(p.table, ordering_epoch=1),))  # the documented way on
    assert p.run()["status"] == "committed"
    assert p.rows() == {1: ("after failover", None), 2: ("b", None), 3: ("c", None)}
    p.send(pg("t", None, None, after + 100))  # TRUNCATE on the new primary
    p.send(pg("c", 4, row(4, "d"), after + 200), partition=1)
    p.run()
    assert p.rows() == {4: ("d", None)}
    assert p.rows("__ordering_epoch") == {4: (1,)}


def test_scenario_05_a_failover_in_a_tables_first_batch_starts_the_epoch_by_each_partitions_own_changes(make_pipe):
    """Soak seed 220 again: the failover shows in the table's very first batch. Partition 0 falls within the batch;
    partition 1 holds only changes from before the failover, partition 2 only from after it. Partition 1 must keep
    the old epoch (before, it started the new one and its row outranked the truncate made after the failover) and
    partition 2 must start it at once (its row came after the truncate: it stays)."""
    from dataclasses import replace

    from cdc.common.errors import PositionRegression

    before, after = 8_590_000_000, 30_000_000
    p = make_pipe(partitions=3)
    p.send(pg("c", 1, row(1, "a"), before), pg("u", 1, row(1, "after failover"), after),
           pg("t", None, None, after + 1))  # TRUNCATE on the new primary
    p.send(pg("c", 2, row(2, "b"), before + 10), partition=1)
    p.send(pg("c", 3, row(3, "c"), after + 5), partition=2)
    with pytest.raises(PositionRegression, match="partition 0 offset 1"):
        p.run()
    p.cfg = replace(p.cfg, tables=(replace(p.table, ordering_epoch=1),))
    assert p.run()["status"] == "committed"
    assert p.rows() == {3: ("c", None)}
    p.send(pg("c", 4, row(4, "d"), after + 200), partition=1)  # partition 1's first change after the failover
    assert p.run()["status"] == "committed"
    assert p.rows() == {3: ("c", None), 4: ("d", None)}
    assert p.rows("__ordering_epoch") == {3: (1,), 4: (1,)}


def test_scenario_05_a_failover_that_shows_first_in_a_partition_without_committed_changes_is_refused(make_pipe):
    """A truncate on the new primary lands in a partition that committed nothing (a truncate has no key: any
    partition): judged only against its own batch it merged silently, and at its low position it removed nothing.
    Judged against the table it is a far fall: refused, and once the epoch is raised it empties the table."""
    from dataclasses import replace

    from cdc.common.errors import PositionRegression

    p = make_pipe(partitions=2)
    p.send(pg("c", 1, row(1, "a"), 8_590_000_000), pg("c", 2, row(2, "b"), 8_590_000_010))
    p.run()
    p.send(pg("t", None, None, 30_000_000), partition=1)
    with pytest.raises(PositionRegression) as err:
        p.run()
    assert "partition 1 offset 0" in str(err.value) and "ordering_epoch" in str(err.value)
    assert sorted(p.rows()) == [1, 2]  # nothing merged
    p.cfg = replace(p.cfg, tables=(replace(p.table, ordering_epoch=1),))
    assert p.run()["status"] == "committed"
    assert p.rows() == {}


# ---- scenario 6: compacted topics ----------------------------------------------------------------------------------

def test_scenario_06_on_a_compacted_topic_a_kafka_tombstone_deletes_its_key(make_pipe):
    p = make_pipe(partitions=2, topic_config={"cleanup.policy": "compact"})
    p.send(pg("c", 1, row(1, "a"), 10), pg("c", 2, row(2, "b"), 11), pg("c", 4, row(4, "moves"), 12))
    p.run()
    # compaction removed the d events; only the Kafka tombstones are left
    p.send(tombstone(1), pg("c", 3, row(3, "c"), 30), tombstone(3), tombstone(4))
    p.send(pg("u", 4, row(4, "moved"), 50), partition=1)  # key 4 moved partitions: its newer change stays
    s = p.run()
    assert p.rows() == {2: ("b", None), 4: ("moved", None)}
    assert s["deleted"] == 1
    p.send(pg("u", 1, row(1, "replayed"), 10), partition=0)  # a redelivery of what the tombstone followed
    p.run()
    assert p.rows() == {2: ("b", None), 4: ("moved", None)}


def test_scenario_06_on_a_regular_topic_a_kafka_tombstone_alone_deletes_nothing(make_pipe):
    p = make_pipe()
    p.send(pg("c", 1, row(1, "a"), 10))
    p.run()
    p.send(tombstone(1))
    s = p.run()
    assert (s["deleted"], s["events_skipped"]) == (0, 1)
    assert p.rows() == {1: ("a", None)}


def test_scenario_05_tombstone_gc_after_the_ordering_epoch_was_raised(make_pipe):
    """Soak seed 60 (a server failover slightly behind, tombstone GC after every run): tombstones written before the
    epoch column existed hold NULL in it; a GC that may drop only such tombstones failed computing its horizon
    (``TypeError: int() argument must be ... not 'NoneType'``)."""
    from dataclasses import replace

    from cdc.common.errors import PositionRegression

    f11, f12 = "mysql-bin.000011", "mysql-bin.000012"
    p = make_pipe(partitions=2)
    p.send(mysql("c", 1, row(1, "a"), f12, 900, server_id=1), mysql("d", 1, row(1, "a"), f12, 950, server_id=1),
           tombstone(1))
    p.send(mysql("c", 2, row(2, "b"), f12, 800, server_id=1), partition=1)  # partition 1 has not passed the delete
    p.run()
    p.send(mysql("c", 3, row(3, "c"), f11, 7000, server_id=2))  # a replica one binlog file behind
    p.send(mysql("u", 2, row(2, "after failover"), f11, 7010, server_id=2), partition=1)
    with pytest.raises(PositionRegression):
        p.run()
    p.cfg = replace(p.cfg, tables=(replace(p.table, ordering_epoch=1),))  # the documented way on
    assert p.run()["status"] == "committed"
    gc_tombstones(p)  # both partitions passed the delete (epoch 1 > epoch 0): its tombstone goes
    assert p.rows() == {2: ("after failover", None), 3: ("c", None)}
    p.run(mode="backfill", bounds=_bounds(p.topic, start={0: 0, 1: 0}))  # a replay resurrects nothing
    assert p.rows() == {2: ("after failover", None), 3: ("c", None)}


def test_scenario_05_an_older_redelivery_does_not_win_over_a_row_stored_before_the_epoch_column(make_pipe):
    """Soak seed 198 (a server failover slightly behind): the batch that raises the epoch also holds a connector
    restart's redelivery of an older change of the old server. Its epoch is 0; the stored row, written before the
    epoch column existed, holds NULL there, which counted as -infinity, so the older change replaced the newer row."""
    from dataclasses import replace

    from cdc.common.errors import PositionRegression

    f11, f12 = "mysql-bin.000011", "mysql-bin.000012"
    p = make_pipe()
    p.send(mysql("c", 1, row(1, "a"), f12, 900, server_id=1), mysql("u", 1, row(1, "b"), f12, 1000, server_id=1))
    p.run()
    p.send(mysql("c", 1, row(1, "a"), f12, 900, server_id=1),  # a redelivery (connector restart) of the older create
           mysql("c", 2, row(2, "c"), f11, 7000, server_id=2))  # then a replica one binlog file behind
    with pytest.raises(PositionRegression):
        p.run()
    p.cfg = replace(p.cfg, tables=(replace(p.table, ordering_epoch=1),))  # the documented way on
    assert p.run()["status"] == "committed"
    assert p.rows() == {1: ("b", None), 2: ("c", None)}


def test_scenario_05_on_a_compacted_topic_a_tombstone_deletes_a_row_stored_before_the_epoch_column(make_pipe):
    """Soak seeds 205 and 244 (a server failover slightly behind on a compacted topic): the batch that raises the
    epoch holds a Kafka tombstone (its ``d`` compacted away) of a key stored before the epoch column existed. The
    delete it stands for takes the stored row's position, whose epoch is NULL, and so never won: the key stayed."""
    from dataclasses import replace

    from cdc.common.errors import PositionRegression

    f11, f12 = "mysql-bin.000011", "mysql-bin.000012"
    p = make_pipe(topic_config={"cleanup.policy": "compact"})
    p.send(mysql("c", 1, row(1, "a"), f12, 900, server_id=1), mysql("c", 2, row(2, "b"), f12, 950, server_id=1))
    p.run()
    p.send(tombstone(1), mysql("u", 2, row(2, "after failover"), f11, 7000, server_id=2))
    with pytest.raises(PositionRegression):
        p.run()
    p.cfg = replace(p.cfg, tables=(replace(p.table, ordering_epoch=1),))  # the documented way on
    assert p.run()["status"] == "committed"
    assert p.rows() == {2: ("after failover", None)}
