from __future__ import annotations

import hashlib
import os
from pathlib import Path

import pytest

from pipeline.lake.fingerprint import FileFingerprint, fingerprint, sha256_of, stat_key


def test_fingerprint_of_a_file(tmp_path: Path) -> None:
    content = os.urandom(3 * (1 << 20) + 17)  # spans several read chunks
    target = tmp_path / "cap.pcap"
    target.write_bytes(content)
    found = fingerprint(target)
    assert found.sha256 == hashlib.sha256(content).hexdigest()
    assert found.size == len(content)
    assert found.mtime_ns == target.stat().st_mtime_ns
    assert found.path == str(target.absolute())
    assert FileFingerprint.from_dict(found.to_dict()) == found


def test_relative_paths_become_absolute(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "x").write_bytes(b"abc")
    monkeypatch.chdir(tmp_path)
    assert stat_key("x")[0] == str(tmp_path / "x")
    assert sha256_of("x") == hashlib.sha256(b"abc").hexdigest()


def test_missing_file_and_folder_raise_oserror(tmp_path: Path) -> None:
    with pytest.raises(OSError):
        fingerprint(tmp_path / "absent")
    with pytest.raises(OSError):
        fingerprint(tmp_path)
