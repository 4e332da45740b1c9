"""Connectors beyond PostgreSQL and MySQL, end to end on the local broker: each connector's ordering across batches."""

from __future__ import annotations

from tests.integration.events import sqlserver


def test_sqlserver_auto_ordering_across_batches_ignores_an_older_lsn(make_pipe):
    p = make_pipe()
    p.send(sqlserver("r", 1, {"id": 1, "name": "snap", "bio": None}, "0000002d:00000a40:0003", None, None),
           sqlserver("r", 2, {"id": 2, "name": "snap2", "bio": None}, "0000002d:00000a40:0003", None, None),
           sqlserver("u", 1, {"id": 1, "name": "v2", "bio": None}, "0000002e:00000010:0002", "0000002e:00000008:0004"))
    first = p.run()
    assert first["dead_letters"] == 0
    assert p.rows() == {1: ("v2", None), 2: ("snap2", None)}
    # second batch: a redelivered older change of key 1 (lower VLF, higher block/slot) and a newer change of key 2
    p.send(sqlserver("u", 1, {"id": 1, "name": "stale", "bio": None}, "0000002d:ffff0000:ffff", "0000002d:ffff0000:fff0"),
           sqlserver("u", 2, {"id": 2, "name": "v2", "bio": None}, "0000002e:00000010:0002", "0000002e:00000008:0005"))
    second = p.run()
    assert second["dead_letters"] == 0
    assert p.rows() == {1: ("v2", None), 2: ("v2", None)}
    assert p.rows("__commit_lsn_vlf", "__commit_lsn_pos", "__change_lsn_vlf", "__change_lsn_pos",
                  "__event_serial_no") == {1: (0x2E, 0x10 << 16 | 2, 0x2E, 0x8 << 16 | 4, 1),
                                           2: (0x2E, 0x10 << 16 | 2, 0x2E, 0x8 << 16 | 5, 1)}


def test_sqlserver_explicit_change_lsn_ordering_is_not_a_dead_letter(make_pipe):
    p = make_pipe(ordering=["source.change_lsn"])
    p.send(sqlserver("c", 1, {"id": 1, "name": "v1", "bio": None}, "0000002d:00000a40:0005", "0000002d:00000a40:0002"))
    assert p.run()["dead_letters"] == 0
    p.send(sqlserver("u", 1, {"id": 1, "name": "stale", "bio": None}, "0000002d:00000a3f:ffff", "0000002d:00000a3f:fff0"),
           sqlserver("u", 1, {"id": 1, "name": "v2", "bio": None}, "0000002d:00000a41:0002", "0000002d:00000a41:0001"))
    assert p.run()["dead_letters"] == 0
    assert p.rows() == {1: ("v2", None)}
    assert p.rows("__ord_source_change_lsn") == {1: (0x2D << 48 | 0xA41 << 16 | 1,)}
