"""Application data in bulk (sans-IO): the records a run of TCP packets completes, opened one
after another while each is application data that authenticates under the keys held, their
plaintext joined. Once a connection's handshake is over nearly every record is such a one, so
this is the path its bytes take (`pipeline.tls.transport.TlsTransport.receive_run`); at the first
record that is anything else (a handshake message, an alert, a record that does not authenticate,
bytes that are not a record) it stops, and the record-by-record path of `TlsSession` takes over
from that record, with the time of the packet that completed it.

This module is the readable reference. The compiled kernel `pipeline.tls._bulk` (`KERNELS`,
"tls_bulk") does the same with OpenSSL's EVP interface in C, without a Python object a record;
a differential test holds the two to the same output.
"""

from __future__ import annotations

from collections.abc import Sequence

from pipeline.tls.cipher import BadRecord, RecordCipher
from pipeline.tls.records import APPLICATION_DATA, HEADER_LENGTH, MAX_FRAGMENT, Record


def open_records(
    cipher: RecordCipher,
    source: bytes,
    first_packet: int,
    sizes: Sequence[int],
    tcp_offset: int,
    plain_offset: int,
    plain_starts: list[int],
    tcp_starts: list[int],
) -> tuple[bytes, list[int], int, int]:
    """Open the records of ``source``: bytes held from earlier packets (``first_packet`` of
    them), then the packets of ``sizes``; ``tcp_offset`` is the TCP offset of ``source[0]``,
    ``plain_offset`` the plaintext offset the first record's plaintext gets. Each record with
    plaintext appends its plaintext offset to ``plain_starts`` and the TCP offset of its header
    to ``tcp_starts``; ``cipher.seq`` counts the records opened.

    Returns (the plaintext joined, the plaintext of the records each packet completed, the
    packets taken, the bytes of ``source`` consumed). All packets are taken unless a record
    stopped the run: then the packets before the one that holds it, whose plaintext before it
    is the last of the sizes returned, and the bytes consumed end where that record starts."""
    out: list[bytes] = []
    plain_sizes: list[int] = []
    start = 0
    end = first_packet
    plain_at = plain_offset
    for index, size in enumerate(sizes):
        end += size
        produced = 0
        while end - start >= HEADER_LENGTH:
            length = (source[start + 3] << 8) | source[start + 4]
            record_end = start + HEADER_LENGTH + length
            if (
                source[start] != APPLICATION_DATA
                or source[start + 1] != 3
                or length > MAX_FRAGMENT
            ):
                plain_sizes.append(produced)
                return b"".join(out), plain_sizes, index, start
            if record_end > end:
                break
            version = (source[start + 1] << 8) | source[start + 2]
            header = source[start : start + HEADER_LENGTH]
            fragment = source[start + HEADER_LENGTH : record_end]
            record = Record(APPLICATION_DATA, version, header, fragment, tcp_offset + start)
            try:
                inner, plain = cipher.decrypt(record)
            except BadRecord:
                plain_sizes.append(produced)
                return b"".join(out), plain_sizes, index, start
            if inner != APPLICATION_DATA:  # TLS 1.3's handshake messages and alerts inside
                cipher.seq -= 1
                plain_sizes.append(produced)
                return b"".join(out), plain_sizes, index, start
            if plain:
                plain_starts.append(plain_at)
                tcp_starts.append(tcp_offset + start)
                out.append(plain)
                produced += len(plain)
                plain_at += len(plain)
            start = record_end
        plain_sizes.append(produced)
    return b"".join(out), plain_sizes, len(sizes), start
