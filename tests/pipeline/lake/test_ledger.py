from __future__ import annotations

import hashlib
import os
import shutil
from pathlib import Path

import pytest
import xxhash
from deltalake import DeltaTable

from pipeline.lake.fingerprint import FileFingerprint, fingerprint
from pipeline.lake.layout import Lake
from pipeline.lake.ledger import Ledger, UnknownLedger


def capture(folder: Path, name: str, content: bytes) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    target = folder / name
    target.write_bytes(content)
    return target


def test_each_file_counts_once_across_runs(lake: Lake, tmp_path: Path) -> None:
    inbox = tmp_path / "inbox"
    a = capture(inbox, "a.pcap", b"A" * 100)
    b = capture(inbox, "b.pcap", b"B" * 100)
    first = Ledger(lake).new_files([a, b])
    assert [f.path for f in first] == [str(a), str(b)]
    Ledger(lake).record(first, "batch-1")

    c = capture(inbox, "c.pcap", b"C" * 100)
    second = Ledger(Lake(lake.root))
    assert [f.path for f in second.new_files([a, b, c])] == [str(c)]
    second.record(second.new_files([c]), "batch-2")
    assert second.new_files([a, b, c]) == []
    entries = second.entries()
    assert sorted(entries["batch_id"].to_pylist()) == ["batch-1", "batch-1", "batch-2"]


def test_record_is_idempotent_per_batch(lake: Lake, tmp_path: Path) -> None:
    ledger = Ledger(lake)
    files = ledger.new_files([capture(tmp_path, "a.pcap", b"A")])
    version = ledger.record(files, "batch-1")
    assert ledger.is_recorded("batch-1")
    assert ledger.record(files, "batch-1") == version
    assert DeltaTable(lake.ledger_path).version() == version
    assert ledger.entries().num_rows == 1
    assert not ledger.is_recorded("batch-2")


def test_same_content_under_a_new_name_is_a_duplicate(lake: Lake, tmp_path: Path) -> None:
    ledger = Ledger(lake)
    original = capture(tmp_path, "a.pcap", b"same bytes")
    ledger.record(ledger.new_files([original]), "batch-1")
    renamed = tmp_path / "moved" / "a-copy.pcap"
    renamed.parent.mkdir()
    shutil.copy(original, renamed)
    twin = capture(tmp_path, "twin.pcap", b"twin content")
    twin_copy = capture(tmp_path, "twin-copy.pcap", b"twin content")
    scan = ledger.scan([renamed, twin, twin_copy])
    assert [f.path for f in scan.new] == [str(twin)]
    assert [(d.file.path, d.ingested_path) for d in scan.duplicates] == [
        (str(renamed), str(original)),
        (str(twin_copy), str(twin)),
    ]


def test_touched_file_with_same_content_is_not_new(lake: Lake, tmp_path: Path) -> None:
    ledger = Ledger(lake)
    target = capture(tmp_path, "a.pcap", b"content")
    ledger.record(ledger.new_files([target]), "batch-1")
    os.utime(target, ns=(1, 1))
    scan = ledger.scan([target])
    assert scan.new == [] and len(scan.duplicates) == 1


def test_grown_file_is_reported_as_changed_not_taken(lake: Lake, tmp_path: Path) -> None:
    ledger = Ledger(lake)
    target = capture(tmp_path, "a.pcap", b"first part")
    ledger.record(ledger.new_files([target]), "batch-1")
    with target.open("ab") as handle:
        handle.write(b" and more")
    scan = ledger.scan([target])
    assert scan.new == [] and [f.path for f in scan.changed] == [str(target)]


def test_unreadable_inputs_are_reported_and_the_rest_goes_on(lake: Lake, tmp_path: Path) -> None:
    good = capture(tmp_path, "good.pcap", b"ok")
    scan = Ledger(lake).scan([tmp_path / "missing.pcap", tmp_path, good, good])
    assert [f.path for f in scan.new] == [str(good)]
    assert [(p.path, p.kind) for p in scan.problems] == [
        (str(tmp_path / "missing.pcap"), "unreadable"),
        (str(tmp_path), "unreadable"),
    ]


def test_empty_record_makes_no_ledger(lake: Lake) -> None:
    assert Ledger(lake).record([], "batch-1") is None
    assert not lake.ledger_path.exists()


def test_ledger_files_are_private(lake: Lake, tmp_path: Path) -> None:
    previous = os.umask(0o022)
    try:
        ledger = Ledger(lake)
        ledger.record(ledger.new_files([capture(tmp_path, "a.pcap", b"A")]), "batch-1")
    finally:
        os.umask(previous)
    for entry in lake.ledger_path.rglob("*"):
        assert entry.stat().st_mode & 0o007 == 0, entry


def test_the_first_unseen_file_is_announced_once_before_it_is_hashed(
    lake: Lake, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from pipeline.lake import ledger as ledger_module

    ledger = Ledger(lake)
    seen = capture(tmp_path, "seen.pcap", b"old")
    ledger.record(ledger.new_files([seen]), "batch-1")
    events: list[str] = []
    hash_file = ledger_module.fingerprint

    def hashing(path: str | Path, hash_name: str) -> FileFingerprint:
        events.append(f"hash {Path(path).name}")
        return hash_file(path, hash_name)

    monkeypatch.setattr(ledger_module, "fingerprint", hashing)
    new = [capture(tmp_path, f"{n}.pcap", n.encode()) for n in ("a", "b")]
    ledger.scan([seen, *new], on_first_unseen=lambda: events.append("unseen"))
    assert events == ["unseen", "hash a.pcap", "hash b.pcap"]
    events.clear()
    ledger.scan([seen], on_first_unseen=lambda: events.append("unseen"))
    assert events == []


def test_a_new_ledger_holds_xxh3_128_digests(lake: Lake, tmp_path: Path) -> None:
    ledger = Ledger(lake)
    ledger.record(ledger.new_files([capture(tmp_path, "a.pcap", b"A" * 100)]), "batch-1")
    assert ledger.entries()["xxh3_128"].to_pylist() == [xxhash.xxh3_128(b"A" * 100).hexdigest()]


def test_a_ledger_made_with_sha256_goes_on_with_sha256(lake: Lake, tmp_path: Path) -> None:
    """A ledger whose rows a release before XXH3-128 wrote (a `sha256` column): its lake hashes
    new files with SHA-256, so a copy of a file it ingested then is still a duplicate."""
    old = capture(tmp_path, "old.pcap", b"ingested by SHA-256")
    Ledger(lake).record([fingerprint(old, "sha256")], "batch-1")
    copy = tmp_path / "copy.pcap"
    shutil.copy(old, copy)
    new = capture(tmp_path, "new.pcap", b"new")
    ledger = Ledger(Lake(lake.root))
    scan = ledger.scan([copy, new])
    assert [(d.file.path, d.ingested_path) for d in scan.duplicates] == [(str(copy), str(old))]
    assert [(f.hash_name, f.digest) for f in scan.new] == [
        ("sha256", hashlib.sha256(b"new").hexdigest())
    ]
    ledger.record(scan.new, "batch-2")
    entries = ledger.entries()
    assert "xxh3_128" not in entries.schema.names
    assert sorted(entries["sha256"].to_pylist()) == sorted(
        hashlib.sha256(content).hexdigest() for content in (b"ingested by SHA-256", b"new")
    )


def test_files_hashed_by_the_other_hash_are_recorded_by_the_ledgers(
    lake: Lake, tmp_path: Path
) -> None:
    """A batch begun before its lake's ledger was made (by a release hashing with SHA-256, and
    resumed by this one) holds the ledger's hash in its rows all the same."""
    first = capture(tmp_path, "first.pcap", b"first")
    Ledger(lake).record([fingerprint(first, "sha256")], "batch-1")
    second = capture(tmp_path, "second.pcap", b"second")
    Ledger(lake).record([fingerprint(second)], "batch-2")
    assert sorted(Ledger(lake).entries()["sha256"].to_pylist()) == sorted(
        hashlib.sha256(content).hexdigest() for content in (b"first", b"second")
    )


def test_a_ledger_naming_no_known_hash_is_refused(lake: Lake, tmp_path: Path) -> None:
    import pyarrow as pa
    from deltalake import write_deltalake

    write_deltalake(str(lake.ledger_path), pa.table({"path": ["/a"], "md5": ["00"]}))
    with pytest.raises(UnknownLedger, match=r"name no content hash of \['xxh3_128', 'sha256'\]"):
        Ledger(lake).scan([capture(tmp_path, "a.pcap", b"A")])
