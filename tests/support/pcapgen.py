"""Synthetic TCP captures for tests and benchmarks, with the ground truth to check them against.

Build conversations, turn them into packets (optionally perturbed the way real captures are),
then write them as pcap or pcapng with any supported link type, in one file or rotated into
several::

    from tests.support import pcapgen as g

    conv = g.Conversation(
        client=("10.0.0.1", 40001),
        server=("10.0.0.2", 61613),
        chunks=[g.Chunk(True, b"CONNECT\\naccept-version:1.2\\n\\n\\0"),
                g.Chunk(False, b"CONNECTED\\nversion:1.2\\n\\n\\0")],
    )
    capture = g.generate([conv], g.Perturbation(shuffle=6, duplicate=0.2, seed=7))
    g.write_pcap("x.pcap", capture.packets, linktype=g.LINKTYPE_ETHERNET, nanos=True)
    g.write_pcapng("x.pcapng", capture.packets, interfaces=[g.NgInterface(tsresol=6),
                                                          g.NgInterface(tsresol=9)])
    paths = g.write_rotated(tmp_path, capture.packets, files=3, fmt="pcap")
    truth = capture.truth[0].client_to_server   # .data, .dropped, .conflicts

Semantics:
- Each chunk is cut into `mss`-sized segments; sequence numbers start at isn + 1 (set an isn
  near 2**32 to exercise wraparound).  `handshake` adds SYN / SYN-ACK / ACK; `close` ends with
  FIN both ways ("fin"), a client RST ("rst") or nothing ("none").
- Perturbation (per conversation, reproducible by `seed`):
  * drop: a data segment is never captured (never the last one of a direction, so every hole
    has data or a FIN after it); the hole is listed in `DirectionTruth.dropped`.
  * shuffle: data segments are reordered within windows of that many segments.
  * duplicate: a segment is captured again later (identical bytes).
  * overlap: an extra segment re-sends the second half of a segment and the first half of the
    next one with every byte changed (XOR 0xFF), after both originals; first-wins keeps the
    originals, the range is listed in `DirectionTruth.conflicts`.
  * keepalive / zero_window_probe: Linux-style probes (seq = next - 1 with one garbage byte,
    or no data) placed only where the direction is idle (all earlier data captured, nothing
    later yet).
- Capture timestamps increase strictly in capture order (at least `time_step_ns` apart), so
  sorting by time reproduces the capture order.
- Packets of several conversations are merged by capture time.
"""

from __future__ import annotations

import heapq
import ipaddress
import itertools
import random
import struct
from dataclasses import dataclass, field
from pathlib import Path

LINKTYPE_NULL = 0
LINKTYPE_ETHERNET = 1
LINKTYPE_RAW_OPENBSD = 12
LINKTYPE_RAW_BSDOS = 14
LINKTYPE_RAW = 101
LINKTYPE_LOOP = 108
LINKTYPE_LINUX_SLL = 113
LINKTYPE_IPV4 = 228
LINKTYPE_IPV6 = 229
LINKTYPE_LINUX_SLL2 = 276
ALL_LINKTYPES = (
    LINKTYPE_NULL,
    LINKTYPE_ETHERNET,
    LINKTYPE_RAW_OPENBSD,
    LINKTYPE_RAW_BSDOS,
    LINKTYPE_RAW,
    LINKTYPE_LOOP,
    LINKTYPE_LINUX_SLL,
    LINKTYPE_LINUX_SLL2,
)

FIN, SYN, RST, PSH, ACK = 0x01, 0x02, 0x04, 0x08, 0x10
ETHERTYPE_IPV4, ETHERTYPE_IPV6, ETHERTYPE_ARP = 0x0800, 0x86DD, 0x0806
DEFAULT_START_NS = 1_700_000_000_000_000_000


@dataclass(slots=True)
class Chunk:
    """Bytes one side sends at once; `gap_ns` is the idle time before it."""

    from_client: bool
    data: bytes
    gap_ns: int = 1_000_000


@dataclass(slots=True)
class Conversation:
    client: tuple[str, int]
    server: tuple[str, int]
    chunks: list[Chunk]
    start_ns: int = DEFAULT_START_NS
    client_isn: int = 1_000
    server_isn: int = 2_000_000
    handshake: bool = True
    close: str = "fin"  # "fin" | "rst" | "none"
    mss: int = 1460
    tcp_options: bytes = b""  # added to every TCP header (padded with NOPs to 4 bytes)
    ip_options: bytes = b""  # IPv4 options (padded to 4 bytes)
    ipv6_extension: bool = False  # put a hop-by-hop and a destination-options header first


@dataclass(slots=True)
class Perturbation:
    shuffle: int = 0
    duplicate: float = 0.0
    overlap: float = 0.0
    drop: float = 0.0
    keepalive: float = 0.0
    zero_window_probe: float = 0.0
    seed: int = 0


@dataclass(slots=True)
class SynthPacket:
    """One packet above the link layer: an IP datagram, or an ARP body for `ethertype` ARP."""

    ts_ns: int
    ip: bytes
    ethertype: int = ETHERTYPE_IPV4
    interface: int = 0  # pcapng interface index (see write_pcapng's spread)


@dataclass(slots=True)
class DirectionTruth:
    data: bytes = b""  # every byte this side sent, in order
    dropped: list[tuple[int, int]] = field(default_factory=list)  # (offset, size), merged
    conflicts: list[tuple[int, int]] = field(default_factory=list)  # (offset, size), merged


@dataclass(slots=True)
class ConversationTruth:
    client: tuple[str, int]
    server: tuple[str, int]
    client_to_server: DirectionTruth
    server_to_client: DirectionTruth

    def direction(self, from_client: bool) -> DirectionTruth:
        return self.client_to_server if from_client else self.server_to_client


@dataclass(slots=True)
class SyntheticCapture:
    packets: list[SynthPacket]
    truth: list[ConversationTruth]


@dataclass(slots=True)
class NgInterface:
    """A pcapng interface description; tsresol as in if_tsresol (6 = us, 9 = ns, 0x80|n = 2^-n)."""

    linktype: int = LINKTYPE_ETHERNET
    tsresol: int = 6
    snaplen: int = 0
    name: str = "eth0"
    tsoffset_s: int = 0


@dataclass(slots=True)
class _Item:
    key: float
    nominal_ns: int
    from_client: bool
    offset: int
    data: bytes
    flags: int


def generate(
    conversations: list[Conversation],
    perturbation: Perturbation | None = None,
    *,
    time_step_ns: int = 1_000,
) -> SyntheticCapture:
    """Packets for all conversations, merged by capture time, plus their ground truth."""
    perturbation = perturbation or Perturbation()
    streams: list[list[SynthPacket]] = []
    truths: list[ConversationTruth] = []
    for index, conv in enumerate(conversations):
        rng = random.Random(perturbation.seed * 1_000_003 + index)
        items, truth = _items(conv, perturbation, rng)
        streams.append(_packets(conv, items, time_step_ns))
        truths.append(truth)
    packets = list(heapq.merge(*streams, key=lambda p: p.ts_ns))
    return SyntheticCapture(packets, truths)


def stream_bytes(conv: Conversation, from_client: bool) -> bytes:
    return b"".join(c.data for c in conv.chunks if c.from_client == from_client)


def _items(
    conv: Conversation, pert: Perturbation, rng: random.Random
) -> tuple[list[_Item], ConversationTruth]:
    data_items: list[_Item] = []
    sent = {True: 0, False: 0}
    now = conv.start_ns + 3 * 1_000_000
    for chunk in conv.chunks:
        now += chunk.gap_ns
        for pos in range(0, len(chunk.data), conv.mss):
            piece = chunk.data[pos : pos + conv.mss]
            off = sent[chunk.from_client]
            data_items.append(_Item(0.0, now, chunk.from_client, off, piece, PSH | ACK))
            sent[chunk.from_client] += len(piece)
    truth = ConversationTruth(
        conv.client,
        conv.server,
        DirectionTruth(stream_bytes(conv, True)),
        DirectionTruth(stream_bytes(conv, False)),
    )
    kept = _drop(data_items, pert.drop, rng, truth)
    _shuffle(kept, pert.shuffle, rng)
    for i, item in enumerate(kept):
        item.key = float(i)
    extras = _extras(kept, pert, rng, truth)
    items = kept + extras
    start = conv.start_ns
    if conv.handshake:
        items.append(_Item(-3, start, True, -1, b"", SYN))
        items.append(_Item(-2, start + 1_000_000, False, -1, b"", SYN | ACK))
        items.append(_Item(-1, start + 2_000_000, True, 0, b"", ACK))
    end_key = float(len(kept) + len(extras) + 10)
    last = max((i.nominal_ns for i in data_items), default=now) + 1_000_000
    if conv.close == "fin":
        items.append(_Item(end_key, last, True, sent[True], b"", FIN | ACK))
        items.append(_Item(end_key + 1, last + 1_000_000, False, sent[False], b"", FIN | ACK))
        items.append(_Item(end_key + 2, last + 2_000_000, True, sent[True] + 1, b"", ACK))
    elif conv.close == "rst":
        items.append(_Item(end_key, last, True, sent[True], b"", RST))
    items.sort(key=lambda i: i.key)
    for direction in (truth.client_to_server, truth.server_to_client):
        direction.dropped = _merge(direction.dropped)
        direction.conflicts = _merge(direction.conflicts)
    return items, truth


def _drop(
    items: list[_Item], rate: float, rng: random.Random, truth: ConversationTruth
) -> list[_Item]:
    if rate <= 0:
        return list(items)
    last = {}
    for i, item in enumerate(items):
        last[item.from_client] = i
    kept = []
    for i, item in enumerate(items):
        if i != last[item.from_client] and rng.random() < rate:
            truth.direction(item.from_client).dropped.append((item.offset, len(item.data)))
        else:
            kept.append(item)
    return kept


def _shuffle(items: list[_Item], window: int, rng: random.Random) -> None:
    if window < 2:
        return
    for lo in range(0, len(items), window):
        part = items[lo : lo + window]
        rng.shuffle(part)
        items[lo : lo + window] = part


def _extras(
    kept: list[_Item], pert: Perturbation, rng: random.Random, truth: ConversationTruth
) -> list[_Item]:
    """Duplicates, overlapping rewrites and probes, each placed after what it re-sends."""
    extras: list[_Item] = []
    if not (pert.duplicate or pert.overlap or pert.keepalive or pert.zero_window_probe):
        return extras
    for from_client in (True, False):
        mine = sorted((i for i in kept if i.from_client == from_client), key=lambda i: i.offset)
        dropped = truth.direction(from_client).dropped
        # after[n]: capture position by which all data up to mine[n] is in;
        # before[n]: first capture position of any later data
        after = list(itertools.accumulate((i.key for i in mine), max))
        before = list(itertools.accumulate((i.key for i in reversed(mine)), min))[::-1]
        before = before[1:] + [float("inf")]
        for n, item in enumerate(mine):
            end = item.offset + len(item.data)
            if rng.random() < pert.duplicate:
                extras.append(_copy(item, item.data, after[n] + 0.5 + rng.random() * 2))
            nxt = mine[n + 1] if n + 1 < len(mine) else None
            if (
                nxt is not None
                and nxt.offset == end
                and not _touches(dropped, item.offset, nxt.offset + len(nxt.data))
                and rng.random() < pert.overlap
            ):
                lo = item.offset + len(item.data) // 2
                hi = nxt.offset + max(1, len(nxt.data) // 2)
                whole = item.data + nxt.data
                altered = bytes(b ^ 0xFF for b in whole[lo - item.offset : hi - item.offset])
                key = max(after[n], nxt.key) + 0.5 + rng.random() * 2
                extras.append(_Item(key, nxt.nominal_ns, from_client, lo, altered, PSH | ACK))
                truth.direction(from_client).conflicts.append((lo, hi - lo))
            idle = before[n] > after[n] + 0.02  # room for a probe between the two
            if idle and rng.random() < pert.keepalive:
                garbage = bytes([item.data[-1] ^ 0xFF])
                extras.append(
                    _Item(_between(after[n], before[n], rng), 0, from_client, end - 1, garbage, ACK)
                )
            if idle and rng.random() < pert.zero_window_probe:
                extras.append(
                    _Item(_between(after[n], before[n], rng), 0, from_client, end - 1, b"", ACK)
                )
    return extras


def _between(after: float, before: float, rng: random.Random) -> float:
    return after + min(before - after, 1.0) * (0.01 + 0.98 * rng.random())


def _copy(item: _Item, data: bytes, key: float) -> _Item:
    return _Item(key, item.nominal_ns, item.from_client, item.offset, data, item.flags)


def _touches(ranges: list[tuple[int, int]], lo: int, hi: int) -> bool:
    return any(off < hi and lo < off + size for off, size in ranges)


def _merge(ranges: list[tuple[int, int]]) -> list[tuple[int, int]]:
    merged: list[tuple[int, int]] = []
    for off, size in sorted(ranges):
        if merged and merged[-1][0] + merged[-1][1] >= off:
            last_off, last_size = merged[-1]
            merged[-1] = (last_off, max(last_size, off + size - last_off))
        else:
            merged.append((off, size))
    return merged


def _packets(conv: Conversation, items: list[_Item], step: int) -> list[SynthPacket]:
    packets = []
    ts = 0
    for ident, item in enumerate(items, 1):
        ts = max(ts + step, item.nominal_ns)
        src, dst = (conv.client, conv.server) if item.from_client else (conv.server, conv.client)
        isn = conv.client_isn if item.from_client else conv.server_isn
        peer_isn = conv.server_isn if item.from_client else conv.client_isn
        seq = (isn + 1 + item.offset) & 0xFFFFFFFF
        ack = (peer_isn + 1) & 0xFFFFFFFF if item.flags & ACK else 0
        tcp = tcp_segment(src[1], dst[1], seq, ack, item.flags, item.data, conv.tcp_options)
        ip, ethertype = ip_datagram(src[0], dst[0], tcp, ident, conv)
        packets.append(SynthPacket(ts, ip, ethertype))
    return packets


def tcp_segment(
    sport: int,
    dport: int,
    seq: int,
    ack: int,
    flags: int,
    payload: bytes,
    options: bytes = b"",
    window: int = 65535,
) -> bytes:
    options = options + b"\x01" * (-len(options) % 4)
    offset = (20 + len(options)) // 4
    header = struct.pack("!HHIIBBHHH", sport, dport, seq, ack, offset << 4, flags, window, 0, 0)
    return header + options + payload


def ip_datagram(
    src: str,
    dst: str,
    transport: bytes,
    ident: int,
    conv: Conversation | None = None,
    proto: int = 6,
) -> tuple[bytes, int]:
    """(IP datagram, ethertype) carrying `transport`; the family follows the address text."""
    s, d = ipaddress.ip_address(src), ipaddress.ip_address(dst)
    if s.version == 4:
        options = conv.ip_options if conv else b""
        options = options + b"\x00" * (-len(options) % 4)
        return ipv4(s.packed, d.packed, transport, ident, proto, options), ETHERTYPE_IPV4
    ext = b""
    next_header = proto
    if conv is not None and conv.ipv6_extension:
        # destination options then (first) hop-by-hop, each 8 bytes with a PadN option
        dest_opts = struct.pack("!BB", proto, 0) + b"\x01\x04\x00\x00\x00\x00"
        hop = struct.pack("!BB", 60, 0) + b"\x01\x04\x00\x00\x00\x00"
        ext = hop + dest_opts
        next_header = 0
    header = struct.pack(
        "!IHBB16s16s", 6 << 28, len(ext) + len(transport), next_header, 64, s.packed, d.packed
    )
    return header + ext + transport, ETHERTYPE_IPV6


def ipv4(
    src: bytes,
    dst: bytes,
    transport: bytes,
    ident: int,
    proto: int = 6,
    options: bytes = b"",
    frag: int = 0x4000,
) -> bytes:
    ihl = 5 + len(options) // 4
    header = (
        struct.pack(
            "!BBHHHBBH4s4s",
            0x40 | ihl,
            0,
            ihl * 4 + len(transport),
            ident & 0xFFFF,
            frag,
            64,
            proto,
            0,
            src,
            dst,
        )
        + options
    )
    checksum = _checksum(header)
    return header[:10] + struct.pack("!H", checksum) + header[12:] + transport


def _checksum(data: bytes) -> int:
    total = sum(struct.unpack(f"!{len(data) // 2}H", data))
    while total >> 16:
        total = (total & 0xFFFF) + (total >> 16)
    return ~total & 0xFFFF


def udp_packet(ts_ns: int, src: str, dst: str, payload: bytes = b"hello") -> SynthPacket:
    udp = struct.pack("!HHHH", 5353, 5353, 8 + len(payload), 0) + payload
    ip, ethertype = ip_datagram(src, dst, udp, 1, proto=17)
    return SynthPacket(ts_ns, ip, ethertype)


def arp_packet(ts_ns: int) -> SynthPacket:
    body = struct.pack(
        "!HHBBH6s4s6s4s", 1, 0x0800, 6, 4, 1, b"\x02" * 6, b"\x0a\0\0\1", b"\0" * 6, b"\x0a\0\0\2"
    )
    return SynthPacket(ts_ns, body, ETHERTYPE_ARP)


def fragment_packet(ts_ns: int, src: str = "10.9.9.1", dst: str = "10.9.9.2") -> SynthPacket:
    s, d = ipaddress.IPv4Address(src).packed, ipaddress.IPv4Address(dst).packed
    return SynthPacket(ts_ns, ipv4(s, d, b"\0" * 24, 7, 6, frag=0x2000), ETHERTYPE_IPV4)


# --- link layers -------------------------------------------------------------------------------

_NULL_FAMILY = {ETHERTYPE_IPV4: 2, ETHERTYPE_IPV6: 30}


def frame(packet: SynthPacket, linktype: int, *, vlans: tuple[int, ...] = ()) -> bytes | None:
    """The link-layer frame for a packet, or None when the link cannot carry it (ARP on raw)."""
    ip, ethertype = packet.ip, packet.ethertype
    if linktype == LINKTYPE_ETHERNET:
        tags = b"".join(
            struct.pack("!HH", 0x88A8 if i < len(vlans) - 1 else 0x8100, vid)
            for i, vid in enumerate(vlans)
        )
        out = b"\x00\x11\x22\x33\x44\x55\x66\x77\x88\x99\xaa\xbb" + tags
        out += struct.pack("!H", ethertype) + ip
        return out + b"\x00" * max(0, 60 - len(out))  # minimum frame size: padding after IP
    if ethertype not in _NULL_FAMILY and linktype not in (LINKTYPE_LINUX_SLL, LINKTYPE_LINUX_SLL2):
        return None
    if linktype == LINKTYPE_NULL:
        return struct.pack("<I", _NULL_FAMILY[ethertype]) + ip
    if linktype == LINKTYPE_LOOP:
        return struct.pack("!I", _NULL_FAMILY[ethertype]) + ip
    if linktype in (LINKTYPE_RAW, LINKTYPE_RAW_OPENBSD, LINKTYPE_RAW_BSDOS):
        return ip
    if linktype == LINKTYPE_IPV4:
        return ip if ethertype == ETHERTYPE_IPV4 else None
    if linktype == LINKTYPE_IPV6:
        return ip if ethertype == ETHERTYPE_IPV6 else None
    if linktype == LINKTYPE_LINUX_SLL:
        return struct.pack("!HHH8sH", 0, 1, 6, b"\x02" * 6 + b"\0\0", ethertype) + ip
    if linktype == LINKTYPE_LINUX_SLL2:
        return struct.pack("!HHIHBB8s", ethertype, 0, 1, 1, 0, 6, b"\x02" * 8) + ip
    raise ValueError(f"pcapgen cannot build link type {linktype}")


def carried_frame(packet: SynthPacket, linktype: int, *, vlans: tuple[int, ...] = ()) -> bytes:
    """frame() on a link type known to carry the packet."""
    out = frame(packet, linktype, vlans=vlans)
    assert out is not None, f"link type {linktype} cannot carry ethertype {packet.ethertype:#x}"
    return out


# --- writers -----------------------------------------------------------------------------------


def pcap_bytes(
    packets: list[SynthPacket],
    *,
    linktype: int = LINKTYPE_ETHERNET,
    nanos: bool = False,
    byte_order: str = "<",
    snaplen: int = 262144,
    vlans: tuple[int, ...] = (),
) -> bytes:
    magic = 0xA1B23C4D if nanos else 0xA1B2C3D4
    out = [struct.pack(byte_order + "IHHiIII", magic, 2, 4, 0, 0, snaplen, linktype)]
    record = struct.Struct(byte_order + "IIII")
    for packet in packets:
        data = frame(packet, linktype, vlans=vlans)
        if data is None:
            continue
        sec, ns = divmod(packet.ts_ns, 1_000_000_000)
        frac = ns if nanos else ns // 1000
        incl = min(len(data), snaplen)
        out.append(record.pack(sec, frac, incl, len(data)))
        out.append(data[:incl])
    return b"".join(out)


def write_pcap(path: str | Path, packets: list[SynthPacket], **options: object) -> Path:
    """Write a classic pcap; options as pcap_bytes (linktype, nanos, byte_order, snaplen, vlans)."""
    path = Path(path)
    path.write_bytes(pcap_bytes(packets, **options))  # type: ignore[arg-type]
    return path


def pcapng_bytes(
    packets: list[SynthPacket],
    *,
    interfaces: list[NgInterface] | None = None,
    byte_order: str = "<",
    spread: bool = False,
    simple: bool = False,
    comments: bool = False,
    vlans: tuple[int, ...] = (),
) -> bytes:
    """pcapng with one section; `spread` deals packets round-robin over the interfaces,
    otherwise SynthPacket.interface picks one; `simple` writes simple packet blocks (no
    timestamps, first interface only); `comments` adds section, interface and packet comments."""
    interfaces = interfaces or [NgInterface()]
    o = byte_order
    shb_opts = (
        _option(o, 1, b"synthetic capture from tests/support/pcapgen.py") if comments else b""
    )
    shb_opts += _option(o, 4, b"pcapgen") + (struct.pack(o + "HH", 0, 0))
    out = [_block(o, 0x0A0D0D0A, struct.pack(o + "IHHq", 0x1A2B3C4D, 1, 0, -1) + shb_opts)]
    for iface in interfaces:
        opts = _option(o, 2, iface.name.encode()) + _option(o, 9, bytes([iface.tsresol]))
        if iface.tsoffset_s:
            opts += _option(o, 14, struct.pack(o + "q", iface.tsoffset_s))
        if comments:
            opts += _option(o, 1, f"interface {iface.name}".encode())
        opts += struct.pack(o + "HH", 0, 0)
        out.append(_block(o, 1, struct.pack(o + "HHI", iface.linktype, 0, iface.snaplen) + opts))
    for n, packet in enumerate(packets):
        index = n % len(interfaces) if spread else packet.interface
        iface = interfaces[0] if simple else interfaces[index]
        data = frame(packet, iface.linktype, vlans=vlans)
        if data is None:
            continue
        incl = min(len(data), iface.snaplen) if iface.snaplen else len(data)
        body = data[:incl] + b"\x00" * (-incl % 4)
        if simple:
            out.append(_block(o, 3, struct.pack(o + "I", len(data)) + body))
            continue
        units = _ts_units(packet.ts_ns - iface.tsoffset_s * 10**9, iface.tsresol)
        head = struct.pack(o + "IIIII", index, units >> 32, units & 0xFFFFFFFF, incl, len(data))
        opts = b""
        if comments and n % 5 == 0:
            opts = _option(o, 1, f"packet {n}".encode()) + struct.pack(o + "HH", 0, 0)
        out.append(_block(o, 6, head + body + opts))
    return b"".join(out)


def write_pcapng(path: str | Path, packets: list[SynthPacket], **options: object) -> Path:
    """Write a pcapng; options as pcapng_bytes (interfaces, byte_order, spread, simple, ...)."""
    path = Path(path)
    path.write_bytes(pcapng_bytes(packets, **options))  # type: ignore[arg-type]
    return path


def write_rotated(
    directory: str | Path,
    packets: list[SynthPacket],
    files: int,
    fmt: str = "pcap",
    **options: object,
) -> list[Path]:
    """Cut the packet list into `files` consecutive parts, one capture file each (in order)."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    per_file = -(-len(packets) // files)
    writer = write_pcap if fmt == "pcap" else write_pcapng
    return [
        writer(
            directory / f"part{n:03d}.{fmt}", packets[n * per_file : (n + 1) * per_file], **options
        )
        for n in range(files)
    ]


def _ts_units(ts_ns: int, tsresol: int) -> int:
    exponent = tsresol & 0x7F
    if tsresol & 0x80:
        return (ts_ns << exponent) // 1_000_000_000
    if exponent <= 9:
        return ts_ns // 10 ** (9 - exponent)
    return ts_ns * 10 ** (exponent - 9)


def _option(order: str, code: int, value: bytes) -> bytes:
    return struct.pack(order + "HH", code, len(value)) + value + b"\x00" * (-len(value) % 4)


def _block(order: str, btype: int, body: bytes) -> bytes:
    length = 12 + len(body)
    return struct.pack(order + "II", btype, length) + body + struct.pack(order + "I", length)


# --- convenience -------------------------------------------------------------------------------


def stomp_conversation(
    index: int = 0,
    *,
    messages: int = 20,
    body_size: int = 3000,
    ipv6: bool = False,
    **options: object,
) -> Conversation:
    """A STOMP-looking conversation (CONNECT, SUBSCRIBE, SENDs, MESSAGEs, DISCONNECT)."""
    rng = random.Random(index)
    if ipv6:
        client, server = (f"fd00::{index + 1:x}", 40000 + index), ("fd00::100", 61613)
    else:
        client = (f"10.0.{index // 250}.{index % 250 + 1}", 40000 + index)
        server = ("10.1.0.1", 61613)
    chunks = [
        Chunk(True, b"CONNECT\naccept-version:1.2\nhost:/\n\n\x00"),
        Chunk(False, b"CONNECTED\nversion:1.2\nheart-beat:0,0\n\n\x00\n"),
        Chunk(True, b"SUBSCRIBE\nid:0\ndestination:/queue/a\nack:auto\n\n\x00"),
    ]
    for n in range(messages):
        body = bytes(rng.randrange(256) for _ in range(body_size))
        head = f"SEND\ndestination:/queue/a\ncontent-length:{body_size}\n\n".encode()
        chunks.append(Chunk(True, head + body + b"\x00", gap_ns=200_000))
        head = (
            f"MESSAGE\nsubscription:0\nmessage-id:m-{index}-{n}\ndestination:/queue/a\n"
            f"content-length:{body_size}\n\n"
        ).encode()
        chunks.append(Chunk(False, head + body + b"\x00\n", gap_ns=300_000))
    chunks.append(Chunk(True, b"DISCONNECT\nreceipt:77\n\n\x00"))
    chunks.append(Chunk(False, b"RECEIPT\nreceipt-id:77\n\n\x00\n"))
    start = DEFAULT_START_NS + index * 7_000_000
    return Conversation(client, server, chunks, start_ns=start, **options)  # type: ignore[arg-type]
