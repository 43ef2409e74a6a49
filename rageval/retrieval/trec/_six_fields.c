/* The proof that a slice of a TREC run holds six fields a line, and its topics' blocks, in one
   pass over its bytes.

A slice (whole lines from a line start; the last line may lack its line end) is proven when
every byte is ASCII, the only whitespace in it is the single space between fields and the "\n"
ending a line, and every line holds exactly five spaces, none opening or ending it and no two
in a row: six non-empty fields a line. polars' CSV reader reads such lines as trec_eval reads
them, so the reader parses only the columns it needs (rageval.retrieval.trec.fast_read). On the
way the first field of each line is compared with the line before's: the slice's blocks of one
topic come back with the proof, and the topic column need not be parsed. Anything else (a tab,
"\r", a blank line, another number of fields, a byte above 0x7f, topics changing more often
than every 16 lines) is not proven, and the checks in Python decide that slice.

On x86-64 the bytes are classified 64 at a time with SSE2 (part of every x86-64 processor);
other processors take them one at a time. Both give the same answers, which the tests check. */

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#if defined(__SSE2__) || defined(_M_X64)
#include <emmintrin.h>
#define SIX_FIELDS_SSE2 1
#endif

#define SPACES_A_LINE 5
/* The shortest line: six one-byte fields, five spaces and its end. */
#define SHORTEST_LINE 12
/* More blocks than one in 16 lines (and 1024) is a run whose topics interleave: not proven.
   Blocks beyond that bound for the most lines a slice can hold are not kept: their memory
   stays within an eighth of the slice's. */
#define LINES_A_BLOCK 16
#define FEW_BLOCKS 1024

/* A block of lines of one topic: its first line, and where its topic lies in the slice. */
typedef struct {
    Py_ssize_t line, offset, length;
} Block;

typedef struct {
    Block *blocks;
    Py_ssize_t count, capacity, most;
    Py_ssize_t lines; /* line ends met so far: the index of the line being read */
    /* The last block's topic and the space after it as eight bytes, and which of them count
       (none where the topic is longer than seven bytes: compared byte by byte then). */
    uint64_t topic_word, topic_mask;
} Blocks;

enum { NOT_PROVEN = 0, PROVEN = 1, NO_MEMORY = -1 };

/* The line starting at offset `start` (line number b->lines) is the first of a new block.
   NOT_PROVEN where blocks are too many or no space follows; the proof, which goes on, decides
   whether the line is well-formed. */
static int new_block(Blocks *b, const unsigned char *p, Py_ssize_t n, Py_ssize_t start)
{
    const unsigned char *space = memchr(p + start, ' ', (size_t)(n - start));
    if (space == NULL || b->count >= b->most)
        return NOT_PROVEN;
    if (b->count == b->capacity) {
        Py_ssize_t capacity = b->capacity ? 2 * b->capacity : 64;
        Block *grown = realloc(b->blocks, (size_t)capacity * sizeof(Block));
        if (grown == NULL)
            return NO_MEMORY;
        b->blocks = grown;
        b->capacity = capacity;
    }
    Py_ssize_t length = space - (p + start);
    b->blocks[b->count++] = (Block){b->lines, start, length};
    b->topic_mask = 0;
    if (length < 8) {
        unsigned char word[8] = {0}, mask[8] = {0};
        memcpy(word, p + start, (size_t)length + 1);
        memset(mask, 0xff, (size_t)length + 1);
        memcpy(&b->topic_word, word, 8);
        memcpy(&b->topic_mask, mask, 8);
    }
    return PROVEN;
}

/* The line starting at offset `start`: the same topic as the line before (its topic, then a
   space), or the first line of a new block. */
static inline int topic_of_line(Blocks *b, const unsigned char *p, Py_ssize_t n,
                                Py_ssize_t start)
{
    if (b->count == 0)
        return new_block(b, p, n, start);
    if (b->topic_mask && start + 8 <= n) {
        uint64_t word;
        memcpy(&word, p + start, 8);
        return (word & b->topic_mask) == b->topic_word ? PROVEN : new_block(b, p, n, start);
    }
    const Block *last = &b->blocks[b->count - 1];
    Py_ssize_t length = last->length;
    if (start + length < n && p[start + length] == ' '
        && memcmp(p + start, p + last->offset, (size_t)length) == 0)
        return PROVEN;
    return new_block(b, p, n, start);
}

/* One byte at a time: every platform, and the reference the block version is tested against. */
static int proven_bytewise(const unsigned char *p, Py_ssize_t n, Blocks *b)
{
    int spaces = 0, status;
    unsigned char prev = '\n';
    if (n == 0 || (status = topic_of_line(b, p, n, 0)) != PROVEN)
        return n == 0 ? NOT_PROVEN : status;
    for (Py_ssize_t i = 0; i < n; i++) {
        unsigned char c = p[i];
        if (c == ' ') {
            if (prev == ' ' || prev == '\n')
                return NOT_PROVEN; /* two in a row, or opening a line */
            spaces++;
        } else if (c == '\n') {
            if (spaces != SPACES_A_LINE || prev == ' ' || prev == '\n')
                return NOT_PROVEN; /* another number of fields, a space ending it, a blank line */
            spaces = 0;
            b->lines++;
            if (i + 1 < n && (status = topic_of_line(b, p, n, i + 1)) != PROVEN)
                return status;
        } else if (c >= 0x80 || (c >= 0x09 && c <= 0x0d)) {
            return NOT_PROVEN; /* not ASCII, or whitespace trec_eval splits on and polars not */
        }
        prev = c;
    }
    return prev == '\n' || (spaces == SPACES_A_LINE && prev != ' ');
}

#ifdef SIX_FIELDS_SSE2

/* Set bits in a word: the processor's instruction where the compiler may use it, else the
   bit-parallel sum (a call to the compiler's library function costs more than either). */
static inline int count_bits(uint64_t x)
{
#if defined(__POPCNT__)
    return __builtin_popcountll(x);
#else
    x = x - ((x >> 1) & 0x5555555555555555ULL);
    x = (x & 0x3333333333333333ULL) + ((x >> 2) & 0x3333333333333333ULL);
    x = (x + (x >> 4)) & 0x0f0f0f0f0f0f0f0fULL;
    return (int)((x * 0x0101010101010101ULL) >> 56);
#endif
}

/* The index of the lowest set bit of a non-zero word. */
static inline int lowest_bit(uint64_t x)
{
#if defined(__GNUC__) || defined(__clang__)
    return __builtin_ctzll(x);
#else
    return count_bits((x & (0 - x)) - 1);
#endif
}

/* The high bit of each of 64 bytes (four compared or raw vectors), as one word. */
static inline uint64_t high_bits(__m128i a, __m128i b, __m128i c, __m128i d)
{
    return (uint64_t)(uint32_t)_mm_movemask_epi8(a)
           | (uint64_t)(uint32_t)_mm_movemask_epi8(b) << 16
           | (uint64_t)(uint32_t)_mm_movemask_epi8(c) << 32
           | (uint64_t)(uint32_t)_mm_movemask_epi8(d) << 48;
}

/* Which of the 64 bytes equal ch. */
static inline uint64_t equal_bits(const __m128i *v, __m128i ch)
{
    return high_bits(_mm_cmpeq_epi8(v[0], ch), _mm_cmpeq_epi8(v[1], ch),
                     _mm_cmpeq_epi8(v[2], ch), _mm_cmpeq_epi8(v[3], ch));
}

/* A byte from 0x09 to 0x0d ("\t\n\v\f\r") is itself when clamped to that range. */
static inline __m128i is_control_space(__m128i v)
{
    const __m128i low = _mm_set1_epi8(0x09), high = _mm_set1_epi8(0x0d);
    return _mm_cmpeq_epi8(_mm_min_epu8(_mm_max_epu8(v, low), high), v);
}

/* 64 bytes at a time, as bit masks: spaces, line ends, and the bytes that refuse a slice. */
static int proven_blocks(const unsigned char *p, Py_ssize_t n, Blocks *b)
{
    const __m128i space = _mm_set1_epi8(' '), line_end = _mm_set1_epi8('\n');
    uint64_t space_before = 0, end_before = 1; /* the byte before the slice: a line end */
    int pending = 0;                           /* spaces of the line not yet ended */
    int status;
    unsigned char tail[64];
    if (n == 0 || (status = topic_of_line(b, p, n, 0)) != PROVEN)
        return n == 0 ? NOT_PROVEN : status;
    for (Py_ssize_t at = 0; at < n; at += 64) {
        const unsigned char *q = p + at;
        if (n - at < 64) { /* the last bytes, padded with a byte that is none of the above */
            memset(tail, 'x', sizeof tail);
            memcpy(tail, q, (size_t)(n - at));
            q = tail;
        }
        __m128i v[4];
        for (int k = 0; k < 4; k++)
            v[k] = _mm_loadu_si128((const __m128i *)(q + 16 * k));
        uint64_t ends = equal_bits(v, line_end);
        uint64_t refused = high_bits(v[0], v[1], v[2], v[3])
                           | (high_bits(is_control_space(v[0]), is_control_space(v[1]),
                                        is_control_space(v[2]), is_control_space(v[3]))
                              & ~ends);
        if (refused)
            return NOT_PROVEN;
        uint64_t spaces = equal_bits(v, space);
        uint64_t after_space = spaces << 1 | space_before, after_end = ends << 1 | end_before;
        /* two spaces in a row, one opening a line, one ending it, a blank line */
        if ((spaces | ends) & (after_space | after_end))
            return NOT_PROVEN;
        uint64_t uncounted = spaces;
        for (uint64_t left = ends; left; left &= left - 1) {
            uint64_t end = left & (0 - left), upto = end | (end - 1);
            if (pending + count_bits(uncounted & upto) != SPACES_A_LINE)
                return NOT_PROVEN;
            uncounted &= ~upto;
            pending = 0;
            b->lines++;
            Py_ssize_t next = at + lowest_bit(end) + 1;
            if (next < n && (status = topic_of_line(b, p, n, next)) != PROVEN)
                return status;
        }
        pending += count_bits(uncounted);
        if (pending > SPACES_A_LINE)
            return NOT_PROVEN;
        space_before = spaces >> 63;
        end_before = ends >> 63;
    }
    return p[n - 1] == '\n' || (pending == SPACES_A_LINE && p[n - 1] != ' ');
}

#endif /* SIX_FIELDS_SSE2 */

typedef int (*proof_fn)(const unsigned char *, Py_ssize_t, Blocks *);

#ifdef SIX_FIELDS_SSE2
#define FASTEST_PROOF proven_blocks
#else
#define FASTEST_PROOF proven_bytewise
#endif

/* Blocks kept at most for a slice of n bytes (see LINES_A_BLOCK). */
static Py_ssize_t most_blocks(Py_ssize_t n)
{
    return ((n + 1) / SHORTEST_LINE + 1 + LINES_A_BLOCK * FEW_BLOCKS) / LINES_A_BLOCK;
}

/* (lines, topic of each block, first line of each block) for a proven slice of n bytes; None
   for one not proven (or whose topics change more often than the blocks' bound). */
static PyObject *proof_found(int status, const unsigned char *p, Py_ssize_t n, const Blocks *b)
{
    if (status == NO_MEMORY)
        return PyErr_NoMemory();
    Py_ssize_t lines = status == PROVEN ? b->lines + (p[n - 1] != '\n') : 0;
    if (status != PROVEN || b->count * LINES_A_BLOCK > lines + LINES_A_BLOCK * FEW_BLOCKS)
        return Py_NewRef(Py_None);
    PyObject *topics = PyList_New(b->count), *starts = PyList_New(b->count);
    if (topics == NULL || starts == NULL)
        goto failed;
    for (Py_ssize_t i = 0; i < b->count; i++) {
        const Block *block = &b->blocks[i];
        PyObject *topic = PyUnicode_DecodeASCII((const char *)p + block->offset,
                                                block->length, NULL);
        PyObject *start = PyLong_FromSsize_t(block->line);
        if (topic == NULL || start == NULL) {
            Py_XDECREF(topic);
            Py_XDECREF(start);
            goto failed;
        }
        PyList_SET_ITEM(topics, i, topic);
        PyList_SET_ITEM(starts, i, start);
    }
    return Py_BuildValue("(nNN)", lines, topics, starts);
failed:
    Py_XDECREF(topics);
    Py_XDECREF(starts);
    return NULL;
}

/* The proof over a bytes-like object, without the GIL (the buffer is held meanwhile). */
static PyObject *proven_by(proof_fn proof, PyObject *data)
{
    Py_buffer view;
    Blocks b = {NULL, 0, 0, 0, 0, 0, 0};
    int status;
    PyObject *result;
    if (PyObject_GetBuffer(data, &view, PyBUF_SIMPLE) < 0)
        return NULL;
    b.most = most_blocks(view.len);
    Py_BEGIN_ALLOW_THREADS
    status = proof((const unsigned char *)view.buf, view.len, &b);
    Py_END_ALLOW_THREADS
    result = proof_found(status, view.buf, view.len, &b);
    free(b.blocks);
    PyBuffer_Release(&view);
    return result;
}

static PyObject *six_field_blocks(PyObject *module, PyObject *data)
{
    (void)module;
    return proven_by(FASTEST_PROOF, data);
}

static PyObject *six_field_blocks_bytewise(PyObject *module, PyObject *data)
{
    (void)module;
    return proven_by(proven_bytewise, data);
}

static PyMethodDef methods[] = {
    {"six_field_blocks", six_field_blocks, METH_O,
     "six_field_blocks(data, /)\n--\n\n"
     "For whole lines of a run (bytes from a line start) that are each six non-empty fields\n"
     "split by single spaces, all ASCII, with no other whitespace than the line ends:\n"
     "(lines, the topic of each block of lines, the first line of each block). None otherwise,\n"
     "or where the topics change more often than every 16 lines."},
    {"six_field_blocks_bytewise", six_field_blocks_bytewise, METH_O,
     "six_field_blocks_bytewise(data, /)\n--\n\n"
     "six_field_blocks, one byte at a time (what processors without SSE2 run; for tests)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT, "_six_fields",
    "The proof that a slice of a TREC run holds six fields a line (see six_field_blocks).", -1,
    methods,
};

PyMODINIT_FUNC PyInit__six_fields(void)
{
    return PyModule_Create(&module_def);
}
