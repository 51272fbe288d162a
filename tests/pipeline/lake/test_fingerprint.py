from __future__ import annotations

import hashlib
import os
from pathlib import Path

import pytest
import xxhash

from pipeline.lake.fingerprint import FileFingerprint, content_digest, fingerprint, stat_key


def test_fingerprint_of_a_file(tmp_path: Path) -> None:
    content = os.urandom(3 * (1 << 20) + 17)  # spans several read chunks
    target = tmp_path / "cap.pcap"
    target.write_bytes(content)
    found = fingerprint(target)
    assert (found.hash_name, found.digest) == ("xxh3_128", xxhash.xxh3_128(content).hexdigest())
    assert found.size == len(content)
    assert found.mtime_ns == target.stat().st_mtime_ns
    assert found.path == str(target.absolute())
    assert FileFingerprint.from_dict(found.to_dict()) == found


def test_relative_paths_become_absolute(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "x").write_bytes(b"abc")
    monkeypatch.chdir(tmp_path)
    assert stat_key("x")[0] == str(tmp_path / "x")
    assert content_digest("x", "sha256") == hashlib.sha256(b"abc").hexdigest()


def test_missing_file_and_folder_raise_oserror(tmp_path: Path) -> None:
    with pytest.raises(OSError):
        fingerprint(tmp_path / "absent")
    with pytest.raises(OSError):
        fingerprint(tmp_path)


def test_sha256_for_a_ledger_made_with_it(tmp_path: Path) -> None:
    content = os.urandom((1 << 20) + 5)
    (tmp_path / "cap.pcap").write_bytes(content)
    found = fingerprint(tmp_path / "cap.pcap", "sha256")
    assert (found.hash_name, found.digest) == ("sha256", hashlib.sha256(content).hexdigest())
    assert FileFingerprint.from_dict(found.to_dict()) == found


def test_a_batch_manifest_written_before_xxh3_reads_as_sha256() -> None:
    legacy = {"path": "/cap/a.pcap", "size": 3, "mtime_ns": 7, "sha256": "ab" * 32}
    assert FileFingerprint.from_dict(legacy) == FileFingerprint(
        "/cap/a.pcap", 3, 7, "ab" * 32, "sha256"
    )
