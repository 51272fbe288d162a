# cython: language_level=3, boundscheck=True, wraparound=False
"""`pipeline.tls.bulk.open_records` in C: application-data records opened with OpenSSL's EVP
interface (AES-GCM and ChaCha20-Poly1305, TLS 1.2 and 1.3; AES-CBC with HMAC, TLS 1.2, MAC then
encrypt or encrypt then MAC), their plaintext written straight into the bytes returned; no
Python object a record but the two offsets a record with plaintext appends. A suite this module
does not know goes to the reference, which it calls for it.

The records are cut out of ``source`` by lengths read from it: every read is checked against
the end of the bytes taken so far before it is made.
"""

from cpython.bytes cimport PyBytes_AS_STRING
from cpython.ref cimport PyObject, Py_XDECREF
from libc.string cimport memcpy

from pipeline.tls import bulk
from pipeline.tls.suites import CBC, CHACHA, GCM


cdef extern from "Python.h":
    PyObject* _new_bytes "PyBytes_FromStringAndSize"(const char* data, Py_ssize_t size) except NULL
    int _PyBytes_Resize(PyObject** data, Py_ssize_t size) except -1
    char* _bytes_of "PyBytes_AS_STRING"(PyObject* data)


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
    int EVP_CIPHER_CTX_set_padding(EVP_CIPHER_CTX* ctx, int padding)
    int EVP_CTRL_AEAD_SET_TAG
    const EVP_CIPHER* EVP_aes_128_cbc()
    const EVP_CIPHER* EVP_aes_256_cbc()

    ctypedef struct EVP_MAC:
        pass
    ctypedef struct EVP_MAC_CTX:
        pass
    EVP_MAC* EVP_MAC_fetch(void* library, const char* algorithm, const char* properties)
    void EVP_MAC_free(EVP_MAC* mac)
    EVP_MAC_CTX* EVP_MAC_CTX_new(EVP_MAC* mac)
    void EVP_MAC_CTX_free(EVP_MAC_CTX* ctx)
    int EVP_MAC_init(
        EVP_MAC_CTX* ctx, const unsigned char* key, size_t key_length, const OSSL_PARAM* params
    )
    int EVP_MAC_update(EVP_MAC_CTX* ctx, const unsigned char* data, size_t length)
    int EVP_MAC_final(EVP_MAC_CTX* ctx, unsigned char* out, size_t* out_length, size_t size)


cdef extern from "openssl/params.h":
    ctypedef struct OSSL_PARAM:
        pass
    OSSL_PARAM OSSL_PARAM_construct_utf8_string(const char* key, char* value, size_t size)
    OSSL_PARAM OSSL_PARAM_construct_end()


cdef extern from "openssl/crypto.h":
    int CRYPTO_memcmp(const void* a, const void* b, size_t length)


cdef enum:
    APPLICATION_DATA = 23
    HEADER_LENGTH = 5
    TAG_LENGTH = 16
    NONCE_LENGTH = 12
    EXPLICIT_NONCE = 8  # TLS 1.2 GCM
    MAX_FRAGMENT = (1 << 14) + 2048
    BLOCK = 16
    MAX_MAC = 64


cdef class _Opener:
    """One direction's AEAD, kept on its `RecordCipher` (``bulk``) from one run to the next:
    the key set once, a nonce and the additional data a record."""

    cdef EVP_CIPHER_CTX* ctx
    cdef EVP_MAC_CTX* mac  # CBC suites: HMAC keyed with the MAC key
    cdef bint keyed, tls13, explicit_nonce, cbc, encrypt_then_mac
    cdef unsigned char iv[NONCE_LENGTH]
    cdef Py_ssize_t iv_length, mac_length
    cdef unsigned long long seq

    def __cinit__(self):
        self.ctx = EVP_CIPHER_CTX_new()
        self.mac = NULL

    def __dealloc__(self):
        if self.ctx != NULL:
            EVP_CIPHER_CTX_free(self.ctx)
        if self.mac != NULL:
            EVP_MAC_CTX_free(self.mac)

    cdef int set_key(self, cipher):
        """0 (and `keyed`) when the suite of ``cipher`` (a `RecordCipher`) is one this module
        opens, else -1."""
        cdef bytes key = cipher._key
        suite = cipher.suite
        if suite.cipher == CBC:
            return self.set_cbc_key(key, cipher._mac_key, suite.mac_name, cipher._etm)
        return self.set_aead_key(key, cipher._iv, suite.cipher, cipher.tls13)

    cdef int set_cbc_key(self, bytes key, bytes mac_key, str mac_name, bint encrypt_then_mac):
        cdef const EVP_CIPHER* evp
        cdef EVP_MAC* hmac
        cdef OSSL_PARAM params[2]
        cdef bytes digest = {"sha1": b"SHA1", "sha256": b"SHA256", "sha384": b"SHA384"}.get(
            mac_name, b""
        )
        if self.ctx == NULL or not digest or len(key) not in (16, 32):
            return -1
        evp = EVP_aes_128_cbc() if len(key) == 16 else EVP_aes_256_cbc()
        if EVP_DecryptInit_ex(self.ctx, evp, NULL, <const unsigned char*>PyBytes_AS_STRING(key), NULL) != 1:
            return -1
        EVP_CIPHER_CTX_set_padding(self.ctx, 0)
        hmac = EVP_MAC_fetch(NULL, b"HMAC", NULL)
        if hmac == NULL:
            return -1
        self.mac = EVP_MAC_CTX_new(hmac)
        EVP_MAC_free(hmac)
        params[0] = OSSL_PARAM_construct_utf8_string(b"digest", PyBytes_AS_STRING(digest), 0)
        params[1] = OSSL_PARAM_construct_end()
        if self.mac == NULL or EVP_MAC_init(
            self.mac, <const unsigned char*>PyBytes_AS_STRING(mac_key), len(mac_key), params
        ) != 1:
            return -1
        self.mac_length = {"sha1": 20, "sha256": 32, "sha384": 48}[mac_name]
        self.cbc = True
        self.encrypt_then_mac = encrypt_then_mac
        self.keyed = True
        return 0

    cdef int set_aead_key(self, bytes key, bytes iv, str kind, bint tls13):
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
        if self.cbc:
            inner[0] = record[0]
            return self.open_cbc(record, length, out)
        return self.open_aead(record, length, out, inner)

    cdef int hmac_matches(
        self, const unsigned char* record, const unsigned char* data, Py_ssize_t length,
        const unsigned char* expected,
    ):
        """Whether ``expected`` is the record's HMAC over its sequence number, type, version,
        ``length`` and the ``length`` bytes at ``data`` (RFC 5246 6.2.3.1)."""
        cdef unsigned char header[13]
        cdef unsigned char mac[MAX_MAC]
        cdef size_t written = 0
        cdef int i
        for i in range(8):
            header[7 - i] = (self.seq >> (8 * i)) & 0xFF
        header[8] = record[0]
        header[9] = record[1]
        header[10] = record[2]
        header[11] = (length >> 8) & 0xFF
        header[12] = length & 0xFF
        if (
            EVP_MAC_init(self.mac, NULL, 0, NULL) != 1  # the key set once is kept
            or EVP_MAC_update(self.mac, header, 13) != 1
            or EVP_MAC_update(self.mac, data, length) != 1
            or EVP_MAC_final(self.mac, mac, &written, MAX_MAC) != 1
            or <Py_ssize_t>written != self.mac_length
        ):
            return 0
        return CRYPTO_memcmp(mac, expected, self.mac_length) == 0

    cdef Py_ssize_t unpadded(self, const unsigned char* sealed, Py_ssize_t length, unsigned char* out):
        """CBC decryption of ``length`` bytes at ``sealed`` (its IV, then whole blocks) into
        ``out``, and the length without its padding; -1 when the blocks or the padding are
        wrong."""
        cdef int written = 0
        cdef Py_ssize_t plain_length = length - BLOCK, i
        cdef unsigned char pad
        if length < 2 * BLOCK or length % BLOCK:
            return -1
        if EVP_DecryptInit_ex(self.ctx, NULL, NULL, NULL, sealed) != 1:
            return -1
        if EVP_DecryptUpdate(self.ctx, out, &written, sealed + BLOCK, <int>plain_length) != 1:
            return -1
        if written != plain_length:
            return -1
        pad = out[plain_length - 1]
        if pad + 1 > plain_length:
            return -1
        for i in range(plain_length - pad - 1, plain_length):
            if out[i] != pad:
                return -1
        return plain_length - pad - 1

    cdef Py_ssize_t open_cbc(self, const unsigned char* record, Py_ssize_t length, unsigned char* out):
        cdef const unsigned char* fragment = record + HEADER_LENGTH
        cdef Py_ssize_t sealed_length, content, data_length
        if self.encrypt_then_mac:
            if length < self.mac_length + 2 * BLOCK:
                return -1
            sealed_length = length - self.mac_length
            if not self.hmac_matches(record, fragment, sealed_length, fragment + sealed_length):
                return -1
            return self.unpadded(fragment, sealed_length, out)
        if length < 2 * BLOCK or length % BLOCK:
            return -1
        content = self.unpadded(fragment, length, out)
        if content < self.mac_length:
            return -1
        data_length = content - self.mac_length
        if not self.hmac_matches(record, out, data_length, out + data_length):
            return -1
        return data_length

    cdef Py_ssize_t open_aead(
        self, const unsigned char* record, Py_ssize_t length, unsigned char* out, int* inner
    ):
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
        opener.set_key(cipher)
        cipher.bulk = opener  # kept, keyed or not (a suite this module leaves to the reference)
    if not opener.keyed:
        return bulk.open_records(
            cipher, source, first_packet, sizes, tcp_offset, plain_offset, plain_starts,
            tcp_starts,
        )
    opener.seq = cipher.seq
    cdef const unsigned char* data = <const unsigned char*>PyBytes_AS_STRING(source)
    cdef Py_ssize_t total = len(source)
    # the plaintext, written in place and cut to its length at the end (it is never longer
    # than the records it came from); owned here until then
    cdef PyObject* out = _new_bytes(NULL, total)
    cdef unsigned char* plain = <unsigned char*>_bytes_of(out)
    cdef Py_ssize_t written = 0, start = 0, end = first_packet, length, record_end, opened
    cdef Py_ssize_t produced, index = 0, count = len(sizes), size
    cdef int inner = 0
    cdef bint stopped = False
    cdef list plain_sizes = []
    try:
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
        _PyBytes_Resize(&out, written)
        plaintext = <object>out
    finally:
        cipher.seq = opener.seq
        Py_XDECREF(out)
    return plaintext, plain_sizes, index if stopped else count, start
