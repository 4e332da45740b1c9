"""cdc.kafka.ranges.consume_range against a fake consumer with librdkafka's consume() contract (mock: the rule under
test is which calls the loop makes; the real broker reads are covered by the integration tests)."""

from __future__ import annotations

from typing import Any

from cdc.kafka.consume import consume_range


class _Msg:
    def __init__(self, offset: int):
        self._offset = offset

    def error(self) -> None:
        return None

    def offset(self) -> int:
        return self._offset


class FakeConsumer:
    """Holds offsets 0..n-1. ``consume(num, timeout)`` returns up to ``num`` messages; when fewer than ``num`` are
    left it would block for ``timeout`` (as librdkafka does): such calls are recorded as waits."""

    def __init__(self, n: int):
        self.n, self.position, self.waits, self.asked = n, 0, 0, []

    def assign(self, tps: list[Any]) -> None:
        self.position = tps[0].offset

    def unassign(self) -> None:
        pass

    def consume(self, num: int, timeout: float) -> list[_Msg]:
        self.asked.append(num)
        out = [_Msg(o) for o in range(self.position, min(self.n, self.position + num))]
        if len(out) < num:
            self.waits += 1
        self.position += len(out)
        return out


def test_a_range_whose_records_are_all_there_is_read_without_waiting_out_a_timeout() -> None:
    for n, start, end, batch in [(100, 0, 100, 5000), (12_000, 0, 12_000, 5000), (300, 250, 260, 1000)]:
        c = FakeConsumer(n)
        got = [m.offset() for msgs in consume_range(c, "t", 0, start, end, 5.0, "w", batch=batch) for m in msgs]
        assert got == list(range(start, end))
        assert c.waits == 0, (n, start, end, c.asked)  # every call asked for at most what the range still held
        assert max(c.asked) <= batch
