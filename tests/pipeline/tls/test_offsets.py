"""pipeline/tls/offsets.py: the TCP offset of a plaintext byte is that of the record that carried
it, and the records kept are bounded."""

from __future__ import annotations

import pickle

from pipeline.tls.offsets import MAX_RECORDS_MAPPED, RecordOffsets


def test_a_plaintext_byte_gets_the_tcp_offset_of_its_record() -> None:
    offsets = RecordOffsets()
    assert offsets.tcp_of(0) == 0  # nothing known yet
    for plain, tcp in ((0, 600), (100, 729), (250, 900)):
        offsets.add(plain, tcp)
    assert [offsets.tcp_of(at) for at in (0, 99, 100, 249, 250, 10_000)] == [
        600, 600, 729, 729, 900, 900
    ]  # fmt: skip
    assert offsets.records(90, 200) == ((90, 600), (100, 729), (250, 900))
    assert offsets.records(120, 10) == ((120, 729),)
    assert pickle.loads(pickle.dumps(offsets)).records(90, 200) == offsets.records(90, 200)


def test_the_records_kept_are_bounded() -> None:
    offsets = RecordOffsets()
    for n in range(3 * MAX_RECORDS_MAPPED):
        offsets.add(10 * n, 15 * n)
    assert MAX_RECORDS_MAPPED <= len(offsets.plain) == len(offsets.tcp) <= 2 * MAX_RECORDS_MAPPED
    last = 3 * MAX_RECORDS_MAPPED - 1
    assert offsets.tcp_of(10 * last + 5) == 15 * last
