/* Optional compiled versions of the decoder's two hot paths (see speedups.py).
 *
 * scan():           Decoder._fast_python, the framing loop for clean LF-only frames, which
 *                   also decodes clean header blocks right away (cheap here).
 * decode_headers(): headers._decode_clean, the header block fast path.
 *
 * Each must give exactly what its Python twin gives, and decline (stop / return None) in exactly
 * the cases where the twin declines, so that the state machine or the line-by-line decoder takes
 * over. Tests run the decoder with and without this module and compare.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

static const char CONTENT_LENGTH_LINE[] = "\ncontent-length:";
#define CONTENT_LENGTH_LINE_SIZE 16
#define MAX_LENGTH_DIGITS 18 /* longer values go to the state machine (they exceed any limit) */

/* The two searches below go line by line (memchr for each LF): a head is a few short lines, and
 * memmem's set-up for a needle cost more than the search itself. */

/* Index of the first "\n\n" in [start, end), or -1. */
static Py_ssize_t
find_blank_line(const char *data, Py_ssize_t start, Py_ssize_t end)
{
    const char *at = data + start, *stop = data + end;
    while (at < stop) {
        const char *lf = memchr(at, '\n', (size_t)(stop - at));
        if (lf == NULL || lf + 1 >= stop) {
            return -1;
        }
        if (lf[1] == '\n') {
            return lf - data;
        }
        at = lf + 1;
    }
    return -1;
}

/* The first CONTENT_LENGTH_LINE wholly in [start, end), or NULL. */
static const char *
find_content_length(const char *data, Py_ssize_t start, Py_ssize_t end)
{
    const char *at = data + start, *stop = data + end;
    while (stop - at >= CONTENT_LENGTH_LINE_SIZE) {
        const char *lf = memchr(at, '\n', (size_t)(stop - at));
        if (lf == NULL || stop - lf < CONTENT_LENGTH_LINE_SIZE) {
            return NULL;
        }
        if (lf[1] == 'c' && memcmp(lf, CONTENT_LENGTH_LINE, CONTENT_LENGTH_LINE_SIZE) == 0) {
            return lf;
        }
        at = lf + 1;
    }
    return NULL;
}

static int
append_new(PyObject *out, PyObject *item)
{
    if (item == NULL) {
        return -1;
    }
    int failed = PyList_Append(out, item);
    Py_DECREF(item);
    return failed;
}

/* A new instance of a __slots__ class, its slots set through their descriptors, which
 * is what a frozen dataclass's own __init__ cannot be bypassed with from Python cheaply. */
static PyObject *
new_instance(PyObject *type, PyObject *slots, PyObject *const *values, Py_ssize_t count)
{
    if (!PyType_Check(type) || !PyTuple_Check(slots) || PyTuple_GET_SIZE(slots) != count) {
        PyErr_SetString(PyExc_TypeError, "new_instance(): a type and a tuple of its slots");
        return NULL;
    }
    /* tp_new, not tp_alloc: an extension type (Frame where events.py is compiled) sets its
     * fields and method table there. */
    static PyObject *no_args = NULL;
    if (no_args == NULL && (no_args = PyTuple_New(0)) == NULL) {
        return NULL;
    }
    PyTypeObject *tp = (PyTypeObject *)type;
    PyObject *instance = tp->tp_new(tp, no_args, NULL);
    for (Py_ssize_t i = 0; instance != NULL && i < count; i++) {
        PyObject *slot = PyTuple_GET_ITEM(slots, i);
        descrsetfunc set = Py_TYPE(slot)->tp_descr_set;
        if (set == NULL || set(slot, instance, values[i]) < 0) {
            if (!PyErr_Occurred()) {
                PyErr_SetString(PyExc_TypeError, "new_instance(): not a slot descriptor");
            }
            Py_CLEAR(instance);
        }
    }
    return instance;
}

static PyObject *
new_heartbeat(PyObject *type, PyObject *slots, long long offset)
{
    PyObject *at = PyLong_FromLongLong(offset);
    if (at == NULL) {
        return NULL;
    }
    PyObject *one = PyLong_FromLong(1); /* an LF beat is one byte; CRLF ones go the slow way */
    PyObject *values[2] = {at, one};
    PyObject *beat = one ? new_instance(type, slots, values, 2) : NULL;
    Py_DECREF(at);
    Py_XDECREF(one);
    return beat;
}

/* The first-wins dict of (name, value) pairs. */
static PyObject *
first_wins(PyObject *pairs)
{
    PyObject *headers = PyDict_New();
    for (Py_ssize_t i = 0; headers != NULL && i < PyList_GET_SIZE(pairs); i++) {
        PyObject *pair = PyList_GET_ITEM(pairs, i);
        if (PyDict_SetDefault(headers, PyTuple_GET_ITEM(pair, 0), PyTuple_GET_ITEM(pair, 1)) ==
            NULL) {
            Py_CLEAR(headers);
        }
    }
    return headers;
}

/* Unescape src[0:size] into dst; returns the new size, or -1 on an undefined escape. */
static Py_ssize_t
unescape(const char *src, Py_ssize_t size, char *dst, int with_cr)
{
    Py_ssize_t written = 0;
    for (Py_ssize_t i = 0; i < size; i++) {
        char c = src[i];
        if (c != '\\') {
            dst[written++] = c;
            continue;
        }
        if (++i == size) {
            return -1;
        }
        switch (src[i]) {
        case '\\': dst[written++] = '\\'; break;
        case 'n': dst[written++] = '\n'; break;
        case 'c': dst[written++] = ':'; break;
        case 'r':
            if (!with_cr) {
                return -1;
            }
            dst[written++] = '\r';
            break;
        default:
            return -1;
        }
    }
    return written;
}

/* Invalid UTF-8 declines (NULL without an exception) rather than fails. */
static PyObject *
decline_bad_utf8(PyObject *text)
{
    if (text == NULL && PyErr_ExceptionMatches(PyExc_UnicodeDecodeError)) {
        PyErr_Clear();
    }
    return text;
}

/* Header names repeat from frame to frame: a small direct-mapped cache hands out the same str
 * (its hash already computed) instead of decoding and later hashing a new one each time. */
#define TEXT_CACHE_SLOTS 512 /* a power of two */
#define TEXT_CACHE_MAX_SIZE 40

typedef struct {
    PyObject *text;
    Py_ssize_t size;
    char bytes[TEXT_CACHE_MAX_SIZE];
} CachedText;

static CachedText text_cache[TEXT_CACHE_SLOTS];

static PyObject *
cached_text(const char *src, Py_ssize_t size)
{
    if (size > TEXT_CACHE_MAX_SIZE) {
        return decline_bad_utf8(PyUnicode_DecodeUTF8(src, size, NULL));
    }
    uint32_t hash = 2166136261u; /* FNV-1a */
    for (Py_ssize_t i = 0; i < size; i++) {
        hash = (hash ^ (unsigned char)src[i]) * 16777619u;
    }
    CachedText *slot = &text_cache[hash & (TEXT_CACHE_SLOTS - 1)];
    if (slot->text != NULL && slot->size == size && memcmp(slot->bytes, src, (size_t)size) == 0) {
        return Py_NewRef(slot->text);
    }
    PyObject *text = decline_bad_utf8(PyUnicode_DecodeUTF8(src, size, NULL));
    if (text == NULL || PyObject_Hash(text) == -1) {
        Py_XDECREF(text);
        return NULL;
    }
    Py_XSETREF(slot->text, Py_NewRef(text));
    slot->size = size;
    memcpy(slot->bytes, src, (size_t)size);
    return text;
}

/* A str from UTF-8 bytes, unescaped first when asked; NULL without an exception = decline.
 * Names come from the cache when they need no unescaping. */
static PyObject *
header_text(const char *src, Py_ssize_t size, int escapes, int is_name)
{
    if (!escapes || memchr(src, '\\', (size_t)size) == NULL) {
        return is_name ? cached_text(src, size)
                       : decline_bad_utf8(PyUnicode_DecodeUTF8(src, size, NULL));
    }
    char small[256] = {0}; /* initialised only to quiet -Wmaybe-uninitialized */
    char *scratch = size <= (Py_ssize_t)sizeof(small) ? small : PyMem_Malloc((size_t)size);
    if (scratch == NULL) {
        return PyErr_NoMemory();
    }
    Py_ssize_t unescaped = unescape(src, size, scratch, escapes == 2);
    PyObject *text = unescaped < 0 ? NULL : PyUnicode_DecodeUTF8(scratch, unescaped, NULL);
    if (scratch != small) {
        PyMem_Free(scratch);
    }
    return decline_bad_utf8(text);
}

/* The (name, value) pairs of a clean header block, or NULL: with an exception set on failure,
 * without one to decline (a line without a colon, an empty name, invalid UTF-8, an undefined
 * escape). escapes: 0 none, 1 STOMP 1.1, 2 STOMP 1.2 (adds \r). CR is ruled out by callers. */
static PyObject *
decode_block(const char *data, Py_ssize_t size, int escapes)
{
    PyObject *pairs = PyList_New(0);
    Py_ssize_t start = 0;
    while (pairs != NULL && start <= size) {
        const char *newline = memchr(data + start, '\n', (size_t)(size - start));
        Py_ssize_t stop = newline ? newline - data : size;
        const char *colon = memchr(data + start, ':', (size_t)(stop - start));
        if (colon == NULL || colon == data + start) {
            Py_CLEAR(pairs);
            break;
        }
        Py_ssize_t split = colon - data;
        PyObject *name = header_text(data + start, split - start, escapes, 1);
        PyObject *value = name ? header_text(colon + 1, stop - split - 1, escapes, 0) : NULL;
        PyObject *pair = value ? PyTuple_Pack(2, name, value) : NULL;
        Py_XDECREF(name);
        Py_XDECREF(value);
        if (pair == NULL || PyList_Append(pairs, pair) < 0) {
            Py_XDECREF(pair);
            Py_CLEAR(pairs);
            break;
        }
        Py_DECREF(pair);
        start = stop + 1;
    }
    return pairs;
}

/* decode_headers(raw, escapes) -> list of (name, value) or None; see decode_block.
 * The caller has ruled out CR and empty blocks. */
static PyObject *
decode_headers(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    (void)module;
    if (nargs != 2 || !PyBytes_Check(args[0])) {
        PyErr_SetString(PyExc_TypeError, "decode_headers(raw: bytes, escapes: int)");
        return NULL;
    }
    int escapes = PyLong_AsLong(args[1]);
    if (escapes == -1 && PyErr_Occurred()) {
        return NULL;
    }
    PyObject *pairs = decode_block(PyBytes_AS_STRING(args[0]), PyBytes_GET_SIZE(args[0]), escapes);
    if (pairs == NULL && !PyErr_Occurred()) {
        Py_RETURN_NONE;
    }
    return pairs;
}

/* What scan() is told once per call. */
typedef struct {
    const char *data;
    Py_ssize_t end;
    long long base;
    PyObject *no_body, *unescaped, *version;
    PyObject *frame_type, *frame_slots;
    Py_ssize_t head_window;
    long long max_body;
    int escapes;
} Setup;

/* Where the body of the frame whose command line ends at lf lies: sets *body_start, *body_end
 * and *length (-1: no content-length). Returns 0 to decline. */
static int
locate_body(const Setup *setup, Py_ssize_t lf, Py_ssize_t *body_start, Py_ssize_t *body_end,
            long long *length)
{
    const char *data = setup->data;
    /* a blank line further away than the head window is the state machine's business */
    Py_ssize_t window_end = setup->end - lf < setup->head_window + 2 ? setup->end
                                                                      : lf + setup->head_window + 2;
    Py_ssize_t blank = find_blank_line(data, lf, window_end);
    if (blank < 0) {
        return 0;
    }
    if (memchr(data + lf, '\r', (size_t)(blank - lf)) != NULL ||
        memchr(data + lf, '\0', (size_t)(blank - lf)) != NULL) {
        return 0;
    }
    *body_start = blank + 2;
    *length = -1;
    const char *at = find_content_length(data, lf, blank);
    if (at == NULL) {
        const char *nul = memchr(data + *body_start, '\0', (size_t)(setup->end - *body_start));
        if (nul == NULL || (nul - data) - *body_start > setup->max_body) {
            return 0;
        }
        *body_end = nul - data;
        return 1;
    }
    /* the needle lies before the blank line, whose LF ends the value */
    const char *value = at + CONTENT_LENGTH_LINE_SIZE;
    const char *value_end = memchr(value, '\n', (size_t)(data + blank + 1 - value));
    Py_ssize_t digits = value_end - value;
    if (digits == 0 || digits > MAX_LENGTH_DIGITS) {
        return 0;
    }
    long long count = 0;
    for (Py_ssize_t i = 0; i < digits; i++) {
        if (value[i] < '0' || value[i] > '9') {
            return 0;
        }
        count = count * 10 + (value[i] - '0');
    }
    if (count > setup->max_body || *body_start + count >= setup->end ||
        data[*body_start + count] != '\0') {
        return 0;
    }
    *length = count;
    *body_end = *body_start + (Py_ssize_t)count;
    return 1;
}

/* The frame from pos (command line ending at lf, command known) into out, and *next past its
 * NUL. Returns 1 when emitted, 0 to decline, -1 on error. */
static int
emit_frame(const Setup *setup, PyObject *out, Py_ssize_t pos, Py_ssize_t lf, PyObject *command,
           Py_ssize_t *next)
{
    const char *data = setup->data;
    Py_ssize_t body_start, body_end;
    long long length;
    if (!locate_body(setup, lf, &body_start, &body_end, &length)) {
        return 0;
    }
    if (body_end > body_start) {
        int forbidden = PySet_Contains(setup->no_body, command);
        if (forbidden != 0) {
            return forbidden < 0 ? -1 : 0;
        }
    }
    int escapes = setup->escapes;
    if (escapes == 2) {
        int skip = PySet_Contains(setup->unescaped, command);
        if (skip < 0) {
            return -1;
        }
        escapes = skip ? 0 : 2;
    }
    /* body_start - 2 is the blank line's LF; it equals lf when there are no header lines */
    Py_ssize_t head_size = body_start - 2 > lf ? body_start - 2 - lf - 1 : 0;
    PyObject *pairs = head_size ? decode_block(data + lf + 1, head_size, escapes) : PyList_New(0);
    if (pairs == NULL && PyErr_Occurred()) {
        return -1;
    }
    PyObject *body = PyBytes_FromStringAndSize(data + body_start, body_end - body_start);
    PyObject *start = PyLong_FromLongLong(setup->base + pos);
    PyObject *stop = PyLong_FromLongLong(setup->base + body_end + 1);
    PyObject *size = length < 0 ? Py_NewRef(Py_None) : PyLong_FromLongLong(length);
    PyObject *headers = pairs ? first_wins(pairs) : Py_NewRef(Py_None);
    PyObject *undecoded = NULL;
    if (pairs == NULL) {
        /* (raw header bytes, their stream offset, version, lenient): see Frame._undecoded */
        PyObject *raw_head = PyBytes_FromStringAndSize(data + lf + 1, head_size);
        PyObject *head_offset = PyLong_FromLongLong(setup->base + lf + 1);
        if (raw_head && head_offset) {
            undecoded = PyTuple_Pack(4, raw_head, head_offset, setup->version, Py_False);
        }
        Py_XDECREF(raw_head);
        Py_XDECREF(head_offset);
    }
    PyObject *frame = NULL;
    if (body && start && stop && size && headers && (pairs || undecoded)) {
        /* in Frame.__slots__ order */
        PyObject *values[9] = {command, body, start, stop, size,
                               pairs ? pairs : Py_None, headers, PyTuple_New(0),
                               undecoded ? undecoded : Py_None};
        if (values[7] != NULL) {
            frame = new_instance(setup->frame_type, setup->frame_slots, values, 9);
        }
        Py_XDECREF(values[7]);
    }
    Py_XDECREF(pairs);
    Py_XDECREF(headers);
    Py_XDECREF(undecoded);
    Py_XDECREF(body);
    Py_XDECREF(start);
    Py_XDECREF(stop);
    Py_XDECREF(size);
    if (append_new(out, frame) < 0) {
        return -1;
    }
    *next = body_end + 1;
    return 1;
}

/* scan(buf, pos, base, exact, no_body, command_window, head_window, max_body, limit, out,
 *      version, escapes, unescaped, frame_type, frame_slots, beat_type, beat_slots) -> new pos
 *
 * Frames and heart-beats are built here (*_slots: the classes' member descriptors in __slots__
 * order). Clean header blocks are decoded right away, with their first-wins dict; other blocks
 * are left undecoded for the Python line-by-line decoder, which reports their problems. */
static PyObject *
scan(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    (void)module;
    if (nargs != 17 || !PyBytes_Check(args[0]) || !PyDict_Check(args[3]) ||
        !PyList_Check(args[9])) {
        PyErr_SetString(PyExc_TypeError, "scan() takes 17 arguments: bytes, ..., dict, ..., list");
        return NULL;
    }
    Setup setup = {
        .data = PyBytes_AS_STRING(args[0]),
        .end = PyBytes_GET_SIZE(args[0]),
        .base = PyLong_AsLongLong(args[2]),
        .no_body = args[4],
        .head_window = PyLong_AsSsize_t(args[6]),
        .max_body = PyLong_AsLongLong(args[7]),
        .version = args[10],
        .escapes = (int)PyLong_AsLong(args[11]),
        .unescaped = args[12],
        .frame_type = args[13],
        .frame_slots = args[14],
    };
    Py_ssize_t pos = PyLong_AsSsize_t(args[1]);
    PyObject *exact = args[3], *out = args[9], *beat_type = args[15], *beat_slots = args[16];
    Py_ssize_t command_window = PyLong_AsSsize_t(args[5]);
    Py_ssize_t limit = PyLong_AsSsize_t(args[8]);
    if (PyErr_Occurred()) {
        return NULL;
    }
    const char *data = setup.data;
    for (Py_ssize_t count = 0; count != limit && pos < setup.end; count++) {
        if (data[pos] == '\n') {
            if (append_new(out, new_heartbeat(beat_type, beat_slots, setup.base + pos)) < 0) {
                return NULL;
            }
            pos += 1;
            continue;
        }
        Py_ssize_t window = setup.end - pos < command_window ? setup.end - pos : command_window;
        const char *newline = memchr(data + pos, '\n', (size_t)window);
        if (newline == NULL) {
            break;
        }
        Py_ssize_t lf = newline - data;
        PyObject *key = PyBytes_FromStringAndSize(data + pos, lf - pos);
        if (key == NULL) {
            return NULL;
        }
        PyObject *command = PyDict_GetItemWithError(exact, key);
        Py_DECREF(key);
        if (command == NULL) {
            if (PyErr_Occurred()) {
                return NULL;
            }
            break;
        }
        Py_INCREF(command); /* the dict's reference is borrowed; Python code runs below */
        int emitted = emit_frame(&setup, out, pos, lf, command, &pos);
        Py_DECREF(command);
        if (emitted < 0) {
            return NULL;
        }
        if (emitted == 0) {
            break;
        }
    }
    return PyLong_FromSsize_t(pos);
}

static PyMethodDef methods[] = {
    {"scan", (PyCFunction)(void (*)(void))scan, METH_FASTCALL,
     "Frame clean LF-only frames into `out`; returns the new buffer position."},
    {"decode_headers", (PyCFunction)(void (*)(void))decode_headers, METH_FASTCALL,
     "Decode a clean header block into (name, value) pairs, or None."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT,
    .m_name = "pipeline.stomp._speedups",
    .m_doc = "Compiled hot paths of the STOMP decoder (optional).",
    .m_size = -1,
    .m_methods = methods,
};

PyMODINIT_FUNC
PyInit__speedups(void)
{
    return PyModule_Create(&module);
}
