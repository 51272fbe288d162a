# cython: language_level=3, boundscheck=True, wraparound=False
"""`pipeline.tls.bulk.open_records` in C: application-data records opened with OpenSSL's EVP
interface (AES-GCM and ChaCha20-Poly1305, TLS 1.2 and 1.3), their plaintext written straight
into the bytes returned; no Python object a record but the two offsets a record with plaintext
appends. AES-CBC suites go to the reference, which this module calls for them.

The records are cut out of ``source`` by lengths read from it: every read is checked against
the end of the bytes taken so far before it is made.
"""

from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_FromStringAndSize
from libc.string cimport memcpy

from pipeline.tls import bulk
from pipeline.tls.suites import CHACHA, GCM


cdef extern from "openssl/evp.h":
    ctypedef struct EVP_CIPHER_CTX:
        pass
    ctypedef struct EVP_CIPHER:
        pass
    EVP_CIPHER_CTX* EVP_CIPHER_CTX_new()
    void EVP_CIPHER_CTX_free(EVP_CIPHER_CTX* ctx)
    const EVP_CIPHER* EVP_aes_128_gcm()
    const EVP_CIPHER* EVP_aes_256_gcm()
    const EVP_CIPHER* EVP_chacha20_poly1305()
    int EVP_DecryptInit_ex(
        EVP_CIPHER_CTX* ctx, const EVP_CIPHER* cipher, void* engine,
        const unsigned char* key, const unsigned char* iv,
    )
    int EVP_DecryptUpdate(
        EVP_CIPHER_CTX* ctx, unsigned char* out, int* out_length,
        const unsigned char* data, int length,
    )
    int EVP_DecryptFinal_ex(EVP_CIPHER_CTX* ctx, unsigned char* out, int* out_length)
    int EVP_CIPHER_CTX_ctrl(EVP_CIPHER_CTX* ctx, int kind, int arg, void* ptr)
    int EVP_CTRL_AEAD_SET_TAG


cdef enum:
    APPLICATION_DATA = 23
    HEADER_LENGTH = 5
    TAG_LENGTH = 16
    NONCE_LENGTH = 12
    EXPLICIT_NONCE = 8  # TLS 1.2 GCM
    MAX_FRAGMENT = (1 << 14) + 2048


cdef class _Opener:
    """One direction's AEAD, kept on its `RecordCipher` (``bulk``) from one run to the next:
    the key set once, a nonce and the additional data a record."""

    cdef EVP_CIPHER_CTX* ctx
    cdef bint keyed, tls13, explicit_nonce
    cdef unsigned char iv[NONCE_LENGTH]
    cdef Py_ssize_t iv_length
    cdef unsigned long long seq

    def __cinit__(self):
        self.ctx = EVP_CIPHER_CTX_new()

    def __dealloc__(self):
        if self.ctx != NULL:
            EVP_CIPHER_CTX_free(self.ctx)

    cdef int set_key(self, bytes key, bytes iv, str kind, bint tls13):
        """0 (and `keyed`) when the suite is one this module opens, else -1."""
        cdef const EVP_CIPHER* evp
        if self.ctx == NULL:
            return -1
        if kind == GCM:
            evp = EVP_aes_128_gcm() if len(key) == 16 else EVP_aes_256_gcm()
            if len(key) not in (16, 32):
                return -1
        elif kind == CHACHA:
            evp = EVP_chacha20_poly1305()
            if len(key) != 32:
                return -1
        else:
            return -1
        self.tls13 = tls13
        self.explicit_nonce = kind == GCM and not tls13
        self.iv_length = len(iv)
        if self.iv_length != (4 if self.explicit_nonce else NONCE_LENGTH):
            return -1
        memcpy(self.iv, PyBytes_AS_STRING(iv), self.iv_length)
        if EVP_DecryptInit_ex(self.ctx, evp, NULL, <const unsigned char*>PyBytes_AS_STRING(key), NULL) != 1:
            return -1
        self.keyed = True
        return 0

    cdef Py_ssize_t open(
        self, const unsigned char* record, Py_ssize_t length, unsigned char* out, int* inner
    ):
        """The plaintext length of the record at ``record`` (header included, ``length`` bytes
        of fragment), written to ``out``, and its content type in ``inner``; -1 when it does not
        authenticate (nothing counted)."""
        cdef unsigned char nonce[NONCE_LENGTH]
        cdef unsigned char aad[13]
        cdef const unsigned char* fragment = record + HEADER_LENGTH
        cdef const unsigned char* sealed
        cdef Py_ssize_t sealed_length, i, plain_length
        cdef int written = 0, final = 0, aad_length
        cdef unsigned long long seq = self.seq
        if self.explicit_nonce:
            if length < EXPLICIT_NONCE + TAG_LENGTH:
                return -1
            memcpy(nonce, self.iv, 4)
            memcpy(nonce + 4, fragment, EXPLICIT_NONCE)
            sealed = fragment + EXPLICIT_NONCE
            sealed_length = length - EXPLICIT_NONCE - TAG_LENGTH
        else:
            if length < TAG_LENGTH + (1 if self.tls13 else 0):
                return -1
            memcpy(nonce, self.iv, NONCE_LENGTH)
            for i in range(8):
                nonce[NONCE_LENGTH - 1 - i] ^= (seq >> (8 * i)) & 0xFF
            sealed = fragment
            sealed_length = length - TAG_LENGTH
        if self.tls13:
            memcpy(aad, record, HEADER_LENGTH)
            aad_length = HEADER_LENGTH
        else:
            for i in range(8):
                aad[7 - i] = (seq >> (8 * i)) & 0xFF
            aad[8] = record[0]
            aad[9] = record[1]
            aad[10] = record[2]
            aad[11] = (sealed_length >> 8) & 0xFF
            aad[12] = sealed_length & 0xFF
            aad_length = 13
        if EVP_DecryptInit_ex(self.ctx, NULL, NULL, NULL, nonce) != 1:
            return -1
        if EVP_DecryptUpdate(self.ctx, NULL, &written, aad, aad_length) != 1:
            return -1
        if EVP_DecryptUpdate(self.ctx, out, &written, sealed, <int>sealed_length) != 1:
            return -1
        if EVP_CIPHER_CTX_ctrl(
            self.ctx, EVP_CTRL_AEAD_SET_TAG, TAG_LENGTH, <void*>(sealed + sealed_length)
        ) != 1:
            return -1
        if EVP_DecryptFinal_ex(self.ctx, out + written, &final) <= 0:
            return -1
        plain_length = written + final
        if not self.tls13:
            inner[0] = record[0]
            return plain_length
        while plain_length > 0 and out[plain_length - 1] == 0:  # TLS 1.3 padding
            plain_length -= 1
        if plain_length == 0:
            return -1  # no content type inside
        inner[0] = out[plain_length - 1]
        return plain_length - 1


def open_records(
    cipher,
    bytes source,
    Py_ssize_t first_packet,
    sizes,
    long long tcp_offset,
    long long plain_offset,
    list plain_starts,
    list tcp_starts,
):
    """See `pipeline.tls.bulk.open_records`: the same arguments, the same result."""
    cdef _Opener opener = cipher.bulk
    if opener is None:
        opener = _Opener()
        opener.set_key(cipher._key, cipher._iv, cipher.suite.cipher, cipher.tls13)
        cipher.bulk = opener  # kept, keyed or not (a suite this module leaves to the reference)
    if not opener.keyed:
        return bulk.open_records(
            cipher, source, first_packet, sizes, tcp_offset, plain_offset, plain_starts,
            tcp_starts,
        )
    opener.seq = cipher.seq
    cdef const unsigned char* data = <const unsigned char*>PyBytes_AS_STRING(source)
    cdef Py_ssize_t total = len(source)
    cdef object out = PyBytes_FromStringAndSize(NULL, total)
    cdef unsigned char* plain = <unsigned char*>PyBytes_AS_STRING(out)
    cdef Py_ssize_t written = 0, start = 0, end = first_packet, length, record_end, opened
    cdef Py_ssize_t produced, index = 0, count = len(sizes), size
    cdef int inner = 0
    cdef bint stopped = False
    cdef list plain_sizes = []
    for index in range(count):
        size = sizes[index]
        end += size
        if end > total:
            raise ValueError("the packets' sizes pass the end of the bytes")
        produced = 0
        while end - start >= HEADER_LENGTH:
            length = (data[start + 3] << 8) | data[start + 4]
            record_end = start + HEADER_LENGTH + length
            if data[start] != APPLICATION_DATA or data[start + 1] != 3 or length > MAX_FRAGMENT:
                stopped = True
                break
            if record_end > end:
                break
            # a record opens into no more bytes than it has: written + length <= total
            opened = opener.open(data + start, length, plain + written, &inner)
            if opened < 0 or inner != APPLICATION_DATA:
                stopped = True
                break
            opener.seq += 1
            if opened:
                plain_starts.append(plain_offset + written)
                tcp_starts.append(tcp_offset + start)
                written += opened
                produced += opened
            start = record_end
        plain_sizes.append(produced)
        if stopped:
            break
    cipher.seq = opener.seq
    plaintext = out if written == total else out[:written]
    return plaintext, plain_sizes, index if stopped else count, start
