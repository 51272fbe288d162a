from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "scripts"))  # scripts/ modules import each other by bare name

from capture_check import compare, conversation_count, summarize  # noqa: E402

SAMPLES = ROOT / "samples"
EXPECTED = sorted(SAMPLES.glob("*.expected.json"))
MAGIC = {
    "pcap": b"\xd4\xc3\xb2\xa1",
    "pcap-nanosecond": b"\x4d\x3c\xb2\xa1",
    "pcapng": b"\x0a\x0d\x0d\x0a",
}


def test_frames_and_trailing_eol_in_the_same_segment() -> None:
    seen = summarize([b"CONNECTED\nversion:1.2\n\n\x00\n", b"MESSAGE\nid:1\n\nhi\x00\n"])
    assert dict(seen.frames) == {"CONNECTED": 1, "MESSAGE": 1}
    assert seen.heart_beats == 0
    assert seen.incomplete_bytes == 0


def test_eol_in_a_later_segment_is_a_heart_beat() -> None:
    seen = summarize([b"SEND\ndestination:/q/a\n\nx\x00", b"\n", b"\r\n", b"\n"])
    assert dict(seen.frames) == {"SEND": 1}
    assert seen.heart_beats == 3


def test_second_eol_after_a_frame_is_a_heart_beat() -> None:
    seen = summarize([b"RECEIPT\nreceipt-id:r\n\n\x00\n\n"])
    assert seen.heart_beats == 1


def test_content_length_body_may_hold_nul() -> None:
    body = b"\x00\x01\x00\xff"
    frame = b"MESSAGE\ncontent-length:4\n\n" + body + b"\x00\n"
    seen = summarize([frame, b"ERROR\nmessage:x\n\nstack trace\x00\n"])
    assert dict(seen.frames) == {"MESSAGE": 1, "ERROR": 1}
    assert seen.heart_beats == 0


def test_truncated_frame_is_reported_not_counted() -> None:
    seen = summarize([b"MESSAGE\ncontent-length:10\n\nabc"])
    assert not seen.frames
    assert seen.incomplete_bytes == len(b"MESSAGE\ncontent-length:10\n\nabc")


def test_samples_are_bundled_and_small() -> None:
    assert len(EXPECTED) >= 4
    files = [SAMPLES / json.loads(path.read_text())["file"] for path in EXPECTED]
    assert all(f.stat().st_size < 300_000 for f in files)
    assert sum(f.stat().st_size for f in files) < 2_000_000


@pytest.mark.parametrize("expected_path", EXPECTED, ids=lambda p: p.name.split(".")[0])
def test_sample_capture_matches_its_client_record(expected_path: Path) -> None:
    expected = json.loads(expected_path.read_text())
    capture = SAMPLES / expected["file"]
    assert capture.read_bytes()[:4] == MAGIC[expected["file_format"]]
    assert conversation_count(capture) == len(expected["connections"])
    assert compare(expected, capture) == []


def test_compare_reports_a_wrong_record() -> None:
    expected = json.loads(EXPECTED[0].read_text())
    expected["connections"][0]["frames_sent"]["SEND"] = 999
    expected["connections"][0]["heart_beats_received"] += 1
    problems = compare(expected, SAMPLES / expected["file"])
    assert len(problems) == 2
