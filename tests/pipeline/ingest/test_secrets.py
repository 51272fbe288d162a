"""pipeline/ingest/secrets.py: key logs that editcap embeds in pcapng files, found before the
packets, and nothing read from files without them."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from pipeline.ingest.secrets import embedded_keylogs
from pipeline.paths import SAMPLES_DIR

KEYLOG = (
    "CLIENT_RANDOM " + "11" * 32 + " " + "22" * 48 + "\n"
    "CLIENT_TRAFFIC_SECRET_0 " + "33" * 32 + " " + "44" * 32 + "\n"
)
PCAPNG = SAMPLES_DIR / "rabbitmq-topics-tx.pcapng"


@pytest.mark.skipif(shutil.which("editcap") is None, reason="editcap (Debian: wireshark-common)")
def test_editcaps_decryption_secrets_block_is_read(tmp_path: Path) -> None:
    keys = tmp_path / "keys.log"
    keys.write_text(KEYLOG)
    out = tmp_path / "with-secrets.pcapng"
    subprocess.run(
        ["editcap", "--inject-secrets", f"tls,{keys}", str(PCAPNG), str(out)],
        check=True,
        capture_output=True,
    )
    (text,) = embedded_keylogs(out)
    assert text.split() == KEYLOG.split()


def test_files_without_secrets_give_none(tmp_path: Path) -> None:
    assert embedded_keylogs(PCAPNG) == []
    assert embedded_keylogs(SAMPLES_DIR / "activemq-queues-acks.pcap") == []
    garbage = tmp_path / "garbage.pcapng"
    garbage.write_bytes(b"\x0a\x0d\x0d\x0a" + bytes(100))
    assert embedded_keylogs(garbage) == []
    assert embedded_keylogs(tmp_path / "missing.pcapng") == []
