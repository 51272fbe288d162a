# cython: language_level=3, boundscheck=True, wraparound=False
"""`digest.python_sha256_hex` compiled: a body's sha256 as hex text, from one OpenSSL digest
context kept for the process and reused for every body (the GIL held throughout, so no two
calls share it at once). A value that is not `bytes` goes to the reference.

`tests/pipeline/session/test_digest.py` holds the two to the same digests.
"""

from pipeline.session.digest import python_sha256_hex


cdef extern from "openssl/evp.h":
    ctypedef struct EVP_MD
    ctypedef struct EVP_MD_CTX
    EVP_MD* EVP_MD_fetch(void* libctx, const char* algorithm, const char* properties)
    EVP_MD_CTX* EVP_MD_CTX_new()
    int EVP_DigestInit_ex2(EVP_MD_CTX* ctx, const EVP_MD* type_, void* params)
    int EVP_DigestUpdate(EVP_MD_CTX* ctx, const void* data, size_t count)
    int EVP_DigestFinal_ex(EVP_MD_CTX* ctx, unsigned char* digest, unsigned int* size)

cdef extern from "Python.h":
    object PyUnicode_New(Py_ssize_t size, Py_UCS4 maxchar)
    void* PyUnicode_DATA(object text)
    char* PyBytes_AS_STRING(object data)
    Py_ssize_t PyBytes_GET_SIZE(object data)


cdef enum:
    DIGEST_BYTES = 32
cdef const char* HEX_DIGITS = b"0123456789abcdef"
cdef EVP_MD* SHA256 = EVP_MD_fetch(NULL, b"SHA256", NULL)
cdef EVP_MD_CTX* CONTEXT = EVP_MD_CTX_new()
if SHA256 == NULL or CONTEXT == NULL:
    raise ImportError("OpenSSL gives no SHA-256 digest: hashlib's is used")


def sha256_hex(data):
    """The sha256 of ``data`` as 64 lowercase hex digits, as ``hashlib.sha256(data).hexdigest()``."""
    cdef unsigned char digest[DIGEST_BYTES]
    cdef unsigned int size = 0
    cdef unsigned char* out
    cdef int i
    if type(data) is not bytes:
        return python_sha256_hex(data)
    if not (
        EVP_DigestInit_ex2(CONTEXT, SHA256, NULL)
        and EVP_DigestUpdate(CONTEXT, PyBytes_AS_STRING(data), PyBytes_GET_SIZE(data))
        and EVP_DigestFinal_ex(CONTEXT, digest, &size)
        and size == DIGEST_BYTES
    ):
        return python_sha256_hex(data)  # OpenSSL failed: the reference's answer or error
    text = PyUnicode_New(2 * DIGEST_BYTES, 127)
    out = <unsigned char*>PyUnicode_DATA(text)
    for i in range(DIGEST_BYTES):
        out[2 * i] = HEX_DIGITS[digest[i] >> 4]
        out[2 * i + 1] = HEX_DIGITS[digest[i] & 15]
    return text
