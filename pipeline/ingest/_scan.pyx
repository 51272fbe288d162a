# cython: language_level=3, boundscheck=True, wraparound=False, cdivision=True
"""The capture readers' hot loop in compiled code: whole TCP packets of the common shapes.

`PacketScanner.scan_pcap` / `scan_pcapng` walk records (blocks) from an offset and write each
packet into column arrays for as long as the record is regular and its packet takes the
one-unpack route of `fastpath.py` (IPv4 without options or IPv6 without extension headers,
TCP, fully captured; a pcapng block without options, of an interface whose clock needs no
offset). They stop at the first record that is anything else and return its offset: the
pure-Python reader (`pcap.read_pcap`, `pcapng.read_pcapng`), which stays the reference, reads
that record, then hands back. What the scanner accepts it decodes exactly as the reader would;
`tests/pipeline/ingest/test_scan.py` holds the two to the same output.

The file is hostile input. A record's header and packet headers are read through a pointer
(`be16`, `be32`, `u32`) only past an explicit length check that covers every byte read, the
checks the reader makes too: the record header once ``size - off`` holds it, its trailer once
the record's length is within ``size``, a packet's link, IP and TCP headers once its captured
length holds them (`_packet`). The pointer itself is taken from the bounds-checked memoryview.
Read through the memoryview instead, each field cost four bounds checks and a call: a fifth of
the capture pass's CPU.
"""

import numpy as np

cimport numpy as cnp

from pipeline.ingest import decode as link
from pipeline.ingest import pcapng_blocks as blocks

cnp.import_array()

# How the one-unpack route finds the IP header (fastpath._combined), by link kind.
cdef enum:
    LINK_NONE = -1  # not on the fast route
    LINK_ETHERNET = 0
    LINK_SLL = 1
    LINK_SLL2 = 2
    LINK_RAW = 3
    LINK_NULL = 4
    LINK_LOOP = 5
    LINK_IPV4 = 6
    LINK_IPV6 = 7

# The pcapng constants as C values, taken from their one definition.
cdef unsigned int SHB = blocks.SHB
cdef unsigned int IDB = blocks.IDB
cdef unsigned int OPB = blocks.OPB
cdef unsigned int EPB = blocks.EPB
cdef unsigned int MAX_BLOCK_LEN = blocks.MAX_BLOCK_LEN
cdef long long MAX_TS_NS = blocks.MAX_TS_NS

LINK_KINDS = {
    link.LINKTYPE_ETHERNET: LINK_ETHERNET,
    link.LINKTYPE_LINUX_SLL: LINK_SLL,
    link.LINKTYPE_LINUX_SLL2: LINK_SLL2,
    link.LINKTYPE_RAW: LINK_RAW,
    link.LINKTYPE_RAW_OPENBSD: LINK_RAW,
    link.LINKTYPE_RAW_BSDOS: LINK_RAW,
    link.LINKTYPE_NULL: LINK_NULL,
    link.LINKTYPE_LOOP: LINK_LOOP,
    link.LINKTYPE_IPV4: LINK_IPV4,
    link.LINKTYPE_IPV6: LINK_IPV6,
}


# Unchecked: each caller has checked that the bytes read lie within the buffer.
cdef inline unsigned int be16(const unsigned char* p) noexcept nogil:
    return (p[0] << 8) | p[1]


cdef inline unsigned int be32(const unsigned char* p) noexcept nogil:
    return (<unsigned int>p[0] << 24) | (p[1] << 16) | (p[2] << 8) | p[3]


cdef inline unsigned int u32(const unsigned char* p, bint little) noexcept nogil:
    if little:
        return (<unsigned int>p[3] << 24) | (p[2] << 16) | (p[1] << 8) | p[0]
    return be32(p)


cdef class PacketScanner:
    """Column arrays of up to `capacity` packets; `count` filled so far."""

    cdef readonly Py_ssize_t capacity
    cdef readonly Py_ssize_t count
    cdef readonly long long packets  # records read (all of them TCP: see the module docstring)
    cdef readonly long long bytes  # captured bytes of those records
    cdef readonly long long payload_bytes
    cdef readonly long long last_ts_ns
    cdef readonly unsigned int last_sec
    cdef public object columns
    cdef long long[:] ts_ns
    cdef long long[:] payload_offset
    cdef long long[:] record_offset
    cdef unsigned int[:] seq
    cdef unsigned int[:] ack
    cdef int[:] payload_len
    cdef int[:] window
    cdef unsigned short[:] flags
    cdef unsigned char[:] family
    cdef unsigned short[:] src_port
    cdef unsigned short[:] dst_port
    cdef unsigned char[:, :] src
    cdef unsigned char[:, :] dst
    cdef unsigned long long[:] pair_hash
    # pcapng interfaces of the section being read: link kind and clock (mul, div) per id
    cdef Py_ssize_t n_interfaces
    cdef object interface_arrays
    cdef int[:] kinds
    cdef long long[:] muls
    cdef long long[:] divs

    def __init__(self, Py_ssize_t capacity):
        self.capacity = capacity
        self.columns = {
            "ts_ns": np.empty(capacity, np.int64),
            "payload_offset": np.empty(capacity, np.int64),
            "record_offset": np.empty(capacity, np.int64),
            "seq": np.empty(capacity, np.uint32),
            "ack": np.empty(capacity, np.uint32),
            "payload_len": np.empty(capacity, np.int32),
            "window": np.empty(capacity, np.int32),
            "flags": np.empty(capacity, np.uint16),
            "family": np.empty(capacity, np.uint8),
            "src_port": np.empty(capacity, np.uint16),
            "dst_port": np.empty(capacity, np.uint16),
            "src": np.zeros((capacity, 16), np.uint8),
            "dst": np.zeros((capacity, 16), np.uint8),
            # FNV-1a of (src, dst, ports): groups packets by directed pair without sorting
            # the addresses; equal hashes are checked for equal pairs by the caller
            "pair_hash": np.empty(capacity, np.uint64),
        }
        c = self.columns
        self.ts_ns = c["ts_ns"]
        self.payload_offset = c["payload_offset"]
        self.record_offset = c["record_offset"]
        self.seq = c["seq"]
        self.ack = c["ack"]
        self.payload_len = c["payload_len"]
        self.window = c["window"]
        self.flags = c["flags"]
        self.family = c["family"]
        self.src_port = c["src_port"]
        self.dst_port = c["dst_port"]
        self.src = c["src"]
        self.dst = c["dst"]
        self.pair_hash = c["pair_hash"]
        self.forget_interfaces()
        self.clear()

    def clear(self):
        """Forget the packets held (the counters run on)."""
        self.count = 0

    def reset_counters(self):
        self.packets = 0
        self.bytes = 0
        self.payload_bytes = 0

    def forget_interfaces(self):
        """A new pcapng section: no interface yet."""
        self.n_interfaces = 0
        self._grow(16)

    def add_interface(self, linktype, mul, div, shift):
        """The section's next interface (ids in order); amortised constant time, so that a
        flood of interface blocks costs linear time here as in the reader."""
        if self.n_interfaces == self.kinds.shape[0]:
            self._grow(2 * self.n_interfaces)
        cdef Py_ssize_t i = self.n_interfaces
        # the clocks the scan's 64-bit arithmetic holds exactly; others are read in Python
        scanned = shift == 0 and 0 < mul <= 1_000_000_000 and 0 < div < (1 << 62)
        self.kinds[i] = LINK_KINDS.get(linktype, LINK_NONE) if scanned else LINK_NONE
        self.muls[i] = mul if scanned else 1
        self.divs[i] = div if scanned else 1
        self.n_interfaces = i + 1

    def _grow(self, Py_ssize_t capacity):
        kinds = np.full(capacity, LINK_NONE, np.int32)
        muls = np.ones(capacity, np.int64)
        divs = np.ones(capacity, np.int64)
        if self.n_interfaces:
            kinds[: self.n_interfaces] = self.interface_arrays[0][: self.n_interfaces]
            muls[: self.n_interfaces] = self.interface_arrays[1][: self.n_interfaces]
            divs[: self.n_interfaces] = self.interface_arrays[2][: self.n_interfaces]
        self.interface_arrays = (kinds, muls, divs)
        self.kinds, self.muls, self.divs = kinds, muls, divs

    cdef bint _packet(
        self, const unsigned char[:] buf, Py_ssize_t off, Py_ssize_t caplen, int kind,
        long long ts_ns, Py_ssize_t record,
    ):
        """Decode one captured packet onto the fast route, as `fastpath._combined` does; False
        (nothing written) for anything that route would hand to the general decoders."""
        cdef Py_ssize_t link_len
        cdef int is_v4, is_v6
        cdef unsigned int link, vihl, total, frag, proto, hlen, plen, nxt, vtf
        cdef Py_ssize_t i, n = self.count
        cdef const unsigned char* r  # the captured packet
        cdef const unsigned char* ip
        cdef const unsigned char* tcp
        cdef unsigned char* src
        cdef unsigned char* dst
        cdef unsigned long long h
        if kind == LINK_ETHERNET:
            link_len = 14
        elif kind == LINK_SLL:
            link_len = 16
        elif kind == LINK_SLL2:
            link_len = 20
        elif kind == LINK_NULL or kind == LINK_LOOP:
            link_len = 4
        elif kind == LINK_RAW or kind == LINK_IPV4 or kind == LINK_IPV6:
            link_len = 0
        else:
            return False
        # Every read below lies within the link header and 40 bytes past it (60 for IPv6,
        # checked there), all of them within the captured packet, itself within the buffer.
        if caplen < link_len + 40 or off < 0 or caplen > buf.shape[0] - off:
            return False
        r = &buf[off]
        ip = r + link_len
        # Which IP version the link field announces (fastpath: link == v4_link / v6_link).
        if kind == LINK_ETHERNET:
            link = be16(r + 12)
            is_v4, is_v6 = link == 0x0800, link == 0x86DD
        elif kind == LINK_SLL:
            link = be16(r + 14)
            is_v4, is_v6 = link == 0x0800, link == 0x86DD
        elif kind == LINK_SLL2:
            link = be16(r)
            is_v4, is_v6 = link == 0x0800, link == 0x86DD
        elif kind == LINK_NULL:
            link = be32(r)
            is_v4, is_v6 = link == 0x02000000, link == 0x1E000000
        elif kind == LINK_LOOP:
            link = be32(r)
            is_v4, is_v6 = link == 2, link == 0x1E
        elif kind == LINK_RAW:
            is_v4, is_v6 = True, True
        elif kind == LINK_IPV4:
            is_v4, is_v6 = True, False
        else:
            is_v4, is_v6 = False, True
        vihl = ip[0]
        if is_v4 and vihl == 0x45:
            total = be16(ip + 2)
            frag = be16(ip + 6)
            proto = ip[9]
            tcp = ip + 20
            hlen = (tcp[12] >> 4) << 2
            if not (
                proto == 6
                and not frag & 0x3FFF
                and link_len + total <= caplen
                and 20 <= hlen
                and hlen + 20 <= total
            ):
                return False
            self._addresses(n, 4, ip + 12, ip + 16)
            self.payload_len[n] = total - 20 - hlen
        elif is_v6 and caplen >= link_len + 60:
            vtf = be32(ip)
            plen = be16(ip + 4)
            nxt = ip[6]
            tcp = ip + 40
            hlen = (tcp[12] >> 4) << 2
            if not (
                vtf >> 28 == 6 and nxt == 6 and link_len + 40 + plen <= caplen
                and 20 <= hlen and hlen <= plen
            ):
                return False
            self._addresses(n, 6, ip + 8, ip + 24)
            self.payload_len[n] = plen - hlen
        else:
            return False
        self.payload_offset[n] = off + (tcp - r) + hlen
        self.src_port[n] = be16(tcp)
        self.dst_port[n] = be16(tcp + 2)
        src, dst = &self.src[n, 0], &self.dst[n, 0]
        h = 14695981039346656037ULL
        for i in range(16):
            h = (h ^ src[i]) * 1099511628211ULL
        for i in range(16):
            h = (h ^ dst[i]) * 1099511628211ULL
        for i in range(4):
            h = (h ^ tcp[i]) * 1099511628211ULL
        self.pair_hash[n] = h
        self.seq[n] = be32(tcp + 4)
        self.ack[n] = be32(tcp + 8)
        self.flags[n] = tcp[13]
        self.window[n] = be16(tcp + 14)
        self.ts_ns[n] = ts_ns
        self.record_offset[n] = record
        self.count = n + 1
        self.packets += 1
        self.bytes += caplen
        self.payload_bytes += self.payload_len[n]
        return True

    cdef void _addresses(
        self, Py_ssize_t n, int family, const unsigned char* src, const unsigned char* dst
    ):
        cdef Py_ssize_t i, width = 4 if family == 4 else 16
        cdef unsigned char* src_row = &self.src[n, 0]
        cdef unsigned char* dst_row = &self.dst[n, 0]
        self.family[n] = family
        for i in range(width):
            src_row[i] = src[i]
            dst_row[i] = dst[i]

    def scan_pcap(
        self, const unsigned char[:] buf, Py_ssize_t off, Py_ssize_t end, bint little,
        int hlen, unsigned int limit, unsigned int frac_limit, long long frac_ns, int linktype,
    ):
        """Records from `off` while regular and fast; returns the offset of the first one not
        taken (`end` or past it when all were). `last_sec` is the last record's seconds."""
        cdef Py_ssize_t size = buf.shape[0]
        cdef unsigned int sec, frac, incl, orig
        cdef const unsigned char* r
        cdef int kind = LINK_KINDS.get(linktype, LINK_NONE)
        if kind == LINK_NONE or hlen < 16:
            return off
        while off < end and self.count < self.capacity:
            if size - off < hlen:
                break
            r = &buf[off]
            sec = u32(r, little)
            frac = u32(r + 4, little)
            incl = u32(r + 8, little)
            orig = u32(r + 12, little)
            if not (
                incl <= limit and incl == orig and frac < frac_limit
                and off + hlen + <Py_ssize_t>incl <= size
            ):
                break
            if not self._packet(
                buf, off + hlen, incl, kind, sec * 1_000_000_000LL + frac * frac_ns, off
            ):
                break
            self.last_sec = sec
            off += hlen + incl
        return off

    def scan_pcapng(
        self, const unsigned char[:] buf, Py_ssize_t off, Py_ssize_t end, bint little
    ):
        """Enhanced packet blocks from `off` while well formed, without options, of an
        interface given by `add_interface`, and fast. Returns the offset of the first block not
        taken; `last_ts_ns` is the last block's time."""
        cdef Py_ssize_t size = buf.shape[0]
        cdef Py_ssize_t n_ifaces = self.n_interfaces
        cdef unsigned int btype, blen, iface, incl, orig
        cdef unsigned long long units
        cdef long long ts
        cdef const unsigned char* r
        cdef int[:] kinds = self.kinds
        cdef long long[:] muls = self.muls
        cdef long long[:] divs = self.divs
        while off < end and self.count < self.capacity:
            if size - off < 32:
                break
            r = &buf[off]
            btype = u32(r, little)
            blen = u32(r + 4, little)
            iface = u32(r + 8, little)
            incl = u32(r + 20, little)
            orig = u32(r + 24, little)
            if not (
                btype == EPB and 32 <= blen <= MAX_BLOCK_LEN and blen & 3 == 0
                and off + <Py_ssize_t>blen <= size
                and iface < n_ifaces
                and incl <= blen - 32
                and blen == 32 + ((incl + 3) & ~3u)  # no options: comments are the reader's
                and incl == orig
                and u32(r + blen - 4, little) == blen  # within size, checked above
                and kinds[iface] != LINK_NONE
            ):
                break
            units = (<unsigned long long>u32(r + 12, little) << 32) | u32(r + 16, little)
            if units > <unsigned long long>(MAX_TS_NS // muls[iface]):
                break
            ts = <long long>units * muls[iface] // divs[iface]
            if not self._packet(buf, off + 28, incl, kinds[iface], ts, off):
                break
            self.last_ts_ns = ts
            off += blen
        return off


# -- the splitter's walk -------------------------------------------------------------------------
# `pipeline.ingest.split` cuts a capture where a reader of the previous range stops: it visits
# every record (block) header. These walk the regular ones, as `PcapRecords.offsets` and
# `PcapngBlocks.next_block` take them, and stop at anything else for those to decide.

def walk_pcap(
    const unsigned char[:] buf, Py_ssize_t off, Py_ssize_t stop, bint little, Py_ssize_t hlen,
    unsigned long long limit, unsigned int frac_limit, long long last_sec,
):
    """Regular records from `off` while `off < stop`: (the offset reached, the seconds of the
    last record walked, else `last_sec`)."""
    cdef Py_ssize_t size = buf.shape[0]
    cdef unsigned int sec, frac, incl, orig
    cdef const unsigned char* r
    if hlen < 16:
        return off, last_sec
    while off < stop and size - off >= hlen:
        r = &buf[off]
        sec = u32(r, little)
        frac = u32(r + 4, little)
        incl = u32(r + 8, little)
        orig = u32(r + 12, little)
        if not (
            incl <= limit and incl <= orig and frac < frac_limit
            and off + hlen + <Py_ssize_t>incl <= size
        ):
            break
        last_sec = sec
        off += hlen + incl
    return off, last_sec


cdef class PcapngWalk:
    """Blocks of one section from an offset: those `PcapngBlocks.next_block` would only step
    over, and enhanced packet blocks, whose time it keeps (a split's context carries it)."""

    cdef long long[:] muls
    cdef long long[:] divs
    cdef Py_ssize_t n_interfaces

    def __init__(self):
        self.set_clocks([])

    def set_clocks(self, clocks):
        """The section's interfaces as (ts_mul, ts_div, ts_offset_ns); an interface whose
        clock has an offset is left to the Python walk (mul 0)."""
        n = len(clocks)
        muls = np.zeros(max(n, 1), dtype=np.int64)
        divs = np.ones(max(n, 1), dtype=np.int64)
        for i, (mul, div, shift) in enumerate(clocks):
            if shift == 0 and 0 < mul <= MAX_TS_NS and 0 < div <= MAX_TS_NS:
                muls[i], divs[i] = mul, div
        self.muls, self.divs, self.n_interfaces = muls, divs, n

    def walk(
        self, const unsigned char[:] buf, Py_ssize_t off, Py_ssize_t stop, bint little,
        long long last_ts,
    ):
        """(The offset reached, the time of the last packet block walked, else `last_ts`)."""
        cdef Py_ssize_t size = buf.shape[0]
        cdef unsigned int btype, blen, iface, incl
        cdef unsigned long long units
        cdef long long mul
        cdef const unsigned char* r
        while off < stop and size - off >= 12:
            r = &buf[off]
            btype = u32(r, little)
            blen = u32(r + 4, little)
            if (
                btype == SHB or btype == IDB or btype == OPB
                or blen < 12 or blen & 3 or blen > MAX_BLOCK_LEN
                or off + <Py_ssize_t>blen > size
                or u32(r + blen - 4, little) != blen  # within size, checked just before
            ):
                break
            if btype == EPB and blen >= 32:  # the block's 32 bytes within size
                iface = u32(r + 8, little)
                incl = u32(r + 20, little)
                if iface < self.n_interfaces and incl <= blen - 32:
                    mul = self.muls[iface]
                    units = (<unsigned long long>u32(r + 12, little) << 32) | u32(r + 16, little)
                    if mul == 0 or units > <unsigned long long>(MAX_TS_NS // mul):
                        break
                    last_ts = <long long>units * mul // self.divs[iface]
            off += blen
        return off, last_ts
