/* BPE training's merge loop, compiled: train.py's learn_merges loop, step for step, in C arrays.

   learn(words, freqs, n_merges, byte_ranks, progress) -> [(a, b), ...]

   words: the distinct pre-tokens as UTF-8 bytes objects; freqs: their counts (ints); byte_ranks:
   None for the lexicographic tie-break, or 256 bytes (each byte's rank) for "hf"; progress: None,
   or called with the number of merges done every 100 merges. The merges come out as pairs of
   token ids, token 256 + k being made by merge k.

   As in Python: each word is an array of token ids; each pair has its count and the list of the
   words that hold it (or once did); a heap ordered by (count, tie-break key) gives the next pair,
   a stale entry (its pair's count fell since it was pushed) going back with the current count. A
   merge rewrites only the words on its pair's list and adjusts the counts of the pairs around
   each occurrence. The heap's order is total (equal counts and keys are ordered by the ids, as
   the last item of Python's heap tuples), so it pops what heapq pops, and the merges are the same. */

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    int32_t *items;
    int32_t len, cap;
} WordList; /* indices of the words that hold a pair, each listed once */

typedef struct {
    int32_t a, b;
    int64_t count;
    WordList words;
} Pair;

typedef struct {
    int64_t count;
    int32_t a, b, pair;
} Entry; /* a heap entry: a pair (its ids and index) with its count when pushed */

typedef struct {
    Py_ssize_t offset, size;
} Token; /* where the token's bytes are in State.bytes */

typedef struct {
    Py_ssize_t start, length; /* the word is ids[start .. start + length) */
    int64_t freq;
} Word;

typedef struct {
    int32_t *ids;
    Word *words;
    Token *tokens;
    Py_ssize_t n_tokens, tokens_cap;
    unsigned char *bytes;
    Py_ssize_t bytes_len, bytes_cap;
    Pair *pairs;
    Py_ssize_t n_pairs, pairs_cap;
    /* a hash table of the pairs: (a, b) -> index in pairs; a power of two slots, at most half full */
    uint64_t *slot_key;
    int32_t *slot_pair;
    Py_ssize_t n_slots;
    Entry *heap;
    Py_ssize_t heap_len, heap_cap;
    int hf;
    unsigned char byte_rank[256];
} State;

#define EMPTY_SLOT UINT64_MAX
#if defined(__GNUC__) || defined(__clang__)
#define PREFETCH(address) __builtin_prefetch(address)
#else
#define PREFETCH(address) ((void)0)
#endif

/* Room in *array for `need` items, doubling its capacity. */
static int grow(void **array, Py_ssize_t *cap, Py_ssize_t need, size_t item)
{
    if (need <= *cap)
        return 0;
    Py_ssize_t cap2 = *cap ? *cap : 16;
    while (cap2 < need)
        cap2 *= 2;
    void *grown = realloc(*array, (size_t)cap2 * item);
    if (!grown) {
        PyErr_NoMemory();
        return -1;
    }
    *array = grown;
    *cap = cap2;
    return 0;
}

/* -- the heap and its order: the tie-break ---------------------------------------------------- */

/* As Python compares bytes: a string before its extensions. */
static int compare_tokens(const State *s, int32_t p, int32_t q)
{
    if (p == q)
        return 0;
    Token tp = s->tokens[p], tq = s->tokens[q];
    int c = memcmp(s->bytes + tp.offset, s->bytes + tq.offset, (size_t)(tp.size < tq.size ? tp.size : tq.size));
    if (c)
        return c;
    return tp.size < tq.size ? -1 : tp.size > tq.size;
}

static int64_t hf_rank(const State *s, int32_t t)
{
    return t < 256 ? s->byte_rank[t] : t;
}

/* Whether x pops before y: the greater count; among equal counts the greatest (bytes, bytes), or
   with "hf" the smallest (rank, rank); then the smaller (a, b). */
static int before(const State *s, const Entry *x, const Entry *y)
{
    if (x->count != y->count)
        return x->count > y->count;
    if (s->hf) {
        int64_t rx = hf_rank(s, x->a), ry = hf_rank(s, y->a);
        if (rx != ry)
            return rx < ry;
        rx = hf_rank(s, x->b), ry = hf_rank(s, y->b);
        if (rx != ry)
            return rx < ry;
    } else {
        int c = compare_tokens(s, x->a, y->a);
        if (c)
            return c > 0;
        c = compare_tokens(s, x->b, y->b);
        if (c)
            return c > 0;
    }
    return x->a != y->a ? x->a < y->a : x->b < y->b;
}

static void sift_down(State *s, Py_ssize_t i)
{
    Entry e = s->heap[i];
    for (;;) {
        Py_ssize_t child = 2 * i + 1;
        if (child >= s->heap_len)
            break;
        if (child + 1 < s->heap_len && before(s, &s->heap[child + 1], &s->heap[child]))
            child++;
        if (!before(s, &s->heap[child], &e))
            break;
        s->heap[i] = s->heap[child];
        i = child;
    }
    s->heap[i] = e;
}

/* Push the pair with its current count. */
static int push(State *s, int32_t pair)
{
    if (grow((void **)&s->heap, &s->heap_cap, s->heap_len + 1, sizeof(Entry)) < 0)
        return -1;
    const Pair *p = &s->pairs[pair];
    Entry e = {p->count, p->a, p->b, pair};
    Py_ssize_t i = s->heap_len++;
    while (i > 0) {
        Py_ssize_t parent = (i - 1) / 2;
        if (!before(s, &e, &s->heap[parent]))
            break;
        s->heap[i] = s->heap[parent];
        i = parent;
    }
    s->heap[i] = e;
    return 0;
}

static Entry pop(State *s)
{
    Entry top = s->heap[0];
    s->heap[0] = s->heap[--s->heap_len];
    if (s->heap_len)
        sift_down(s, 0);
    return top;
}

/* -- pairs and tokens ------------------------------------------------------------------------- */

static Py_ssize_t slot_of(const State *s, uint64_t key)
{
    Py_ssize_t mask = s->n_slots - 1;
    Py_ssize_t i = (Py_ssize_t)((key * 0x9E3779B97F4A7C15ull) >> 24) & mask; /* Fibonacci hashing */
    while (s->slot_key[i] != EMPTY_SLOT && s->slot_key[i] != key)
        i = (i + 1) & mask;
    return i;
}

static int rehash(State *s, Py_ssize_t n_slots)
{
    uint64_t *old_key = s->slot_key;
    int32_t *old_pair = s->slot_pair;
    Py_ssize_t old_n = s->n_slots;
    uint64_t *keys = malloc((size_t)n_slots * sizeof(uint64_t));
    int32_t *pairs = malloc((size_t)n_slots * sizeof(int32_t));
    if (!keys || !pairs) {
        free(keys), free(pairs);
        PyErr_NoMemory();
        return -1;
    }
    memset(keys, 0xff, (size_t)n_slots * sizeof(uint64_t));
    s->slot_key = keys, s->slot_pair = pairs, s->n_slots = n_slots;
    for (Py_ssize_t i = 0; i < old_n; i++) {
        if (old_key[i] != EMPTY_SLOT) {
            Py_ssize_t j = slot_of(s, old_key[i]);
            keys[j] = old_key[i];
            pairs[j] = old_pair[i];
        }
    }
    free(old_key), free(old_pair);
    return 0;
}

/* The index of the pair (a, b), made (count 0, no words) if it is new; -1 on an error. */
static int32_t pair_of(State *s, int32_t a, int32_t b)
{
    uint64_t key = (uint64_t)(uint32_t)a << 32 | (uint32_t)b;
    Py_ssize_t i = slot_of(s, key);
    if (s->slot_key[i] == key)
        return s->slot_pair[i];
    if (s->n_pairs >= INT32_MAX) {
        PyErr_SetString(PyExc_MemoryError, "more than 2**31 distinct pairs");
        return -1;
    }
    if (grow((void **)&s->pairs, &s->pairs_cap, s->n_pairs + 1, sizeof(Pair)) < 0)
        return -1;
    if (2 * (s->n_pairs + 1) > s->n_slots) {
        if (rehash(s, 2 * s->n_slots) < 0)
            return -1;
        i = slot_of(s, key);
    }
    int32_t pair = (int32_t)s->n_pairs++;
    s->slot_key[i] = key, s->slot_pair[i] = pair;
    s->pairs[pair] = (Pair){a, b, 0, {NULL, 0, 0}};
    return pair;
}

/* The pair (a, b) occurs `freq` more times, in word w (listed once: words are handled one by one). */
static int add(State *s, int32_t a, int32_t b, int64_t freq, int32_t w)
{
    int32_t pair = pair_of(s, a, b);
    if (pair < 0)
        return -1;
    Pair *p = &s->pairs[pair];
    p->count += freq;
    WordList *list = &p->words;
    if (list->len && list->items[list->len - 1] == w)
        return 0;
    if (list->len == list->cap) {
        if (list->cap > INT32_MAX / 2) {
            PyErr_SetString(PyExc_MemoryError, "a pair in more than 2**30 words");
            return -1;
        }
        int32_t cap = list->cap ? 2 * list->cap : 2;
        int32_t *grown = realloc(list->items, (size_t)cap * sizeof(int32_t));
        if (!grown) {
            PyErr_NoMemory();
            return -1;
        }
        list->items = grown, list->cap = cap;
    }
    list->items[list->len++] = w;
    return 0;
}

static int subtract(State *s, int32_t a, int32_t b, int64_t freq)
{
    int32_t pair = pair_of(s, a, b);
    if (pair < 0)
        return -1;
    s->pairs[pair].count -= freq;
    return 0;
}

/* A new token of `size` bytes: where its bytes go (the caller writes them), or NULL on an error. */
static unsigned char *new_token(State *s, Py_ssize_t size)
{
    if (s->n_tokens >= INT32_MAX) {
        PyErr_SetString(PyExc_MemoryError, "more than 2**31 tokens");
        return NULL;
    }
    if (grow((void **)&s->tokens, &s->tokens_cap, s->n_tokens + 1, sizeof(Token)) < 0 ||
        grow((void **)&s->bytes, &s->bytes_cap, s->bytes_len + size, 1) < 0)
        return NULL;
    s->tokens[s->n_tokens++] = (Token){s->bytes_len, size};
    s->bytes_len += size;
    return s->bytes + s->bytes_len - size;
}

/* The token made by merging a and b: their bytes joined. */
static int joined_token(State *s, int32_t a, int32_t b)
{
    Token ta = s->tokens[a], tb = s->tokens[b];
    unsigned char *text = new_token(s, ta.size + tb.size);
    if (!text)
        return -1;
    memcpy(text, s->bytes + ta.offset, (size_t)ta.size);
    memcpy(text + ta.size, s->bytes + tb.offset, (size_t)tb.size);
    return 0;
}

/* -- a merge ---------------------------------------------------------------------------------- */

/* Replace the pair (a, b) by `made` in word w, left to right without overlap (as str.replace),
   subtracting the pairs around each occurrence and adding those around each new token. */
static int merge_word(State *s, int32_t w, int32_t a, int32_t b, int32_t made)
{
    Word *word = &s->words[w];
    int32_t *t = s->ids + word->start;
    Py_ssize_t n = word->length, first = 0;
    while (first + 1 < n && !(t[first] == a && t[first + 1] == b))
        first++;
    if (first + 1 >= n)
        return 0; /* the word lost the pair to an earlier merge */
    int64_t freq = word->freq;
    /* The old word is read at r and rewritten at o <= r; `previous` is the old token before r. */
    Py_ssize_t r = first, o = first, previous_end = 0;
    int32_t previous = first ? t[first - 1] : 0;
    while (r < n) {
        if (r + 1 < n && t[r] == a && t[r + 1] == b) {
            /* a pair shared with the previous occurrence is subtracted there */
            if (r > 0 && r != previous_end && subtract(s, previous, a, freq) < 0)
                return -1;
            if (r < n - 2 && subtract(s, b, t[r + 2], freq) < 0)
                return -1;
            t[o++] = made;
            previous = b, previous_end = r + 2, r += 2;
        } else {
            previous = t[r];
            t[o++] = t[r++];
        }
    }
    word->length = n = o;
    for (Py_ssize_t j = first; j < n; j++) {
        if (t[j] != made)
            continue;
        if (j > 0 && add(s, t[j - 1], made, freq, w) < 0)
            return -1;
        /* (made, made) is counted as the second one's left pair */
        if (j < n - 1 && t[j + 1] != made && add(s, made, t[j + 1], freq, w) < 0)
            return -1;
    }
    return 0;
}

/* Merge the pair into the token `made` in every word on its list; the pairs this makes (each holds
   `made`) go onto the heap with their counts, and the merged pair's count becomes 0, as if deleted. */
static int merge(State *s, int32_t pair, int32_t made)
{
    int32_t a = s->pairs[pair].a, b = s->pairs[pair].b;
    WordList list = s->pairs[pair].words;
    s->pairs[pair].words = (WordList){NULL, 0, 0};
    Py_ssize_t first_new = s->n_pairs;
    int status = 0;
    for (int32_t k = 0; k < list.len && status == 0; k++) {
        /* The words are far apart in memory: fetch a word's place ahead, then its tokens. */
        if (k + 16 < list.len)
            PREFETCH(&s->words[list.items[k + 16]]);
        if (k + 8 < list.len)
            PREFETCH(s->ids + s->words[list.items[k + 8]].start);
        status = merge_word(s, list.items[k], a, b, made);
    }
    free(list.items);
    for (Py_ssize_t p = first_new; p < s->n_pairs && status == 0; p++)
        if (s->pairs[p].a == made || s->pairs[p].b == made)
            status = push(s, (int32_t)p);
    s->pairs[pair].count = 0;
    return status;
}

/* -- the loop --------------------------------------------------------------------------------- */

static void release(State *s)
{
    for (Py_ssize_t p = 0; p < s->n_pairs; p++)
        free(s->pairs[p].words.items);
    free(s->ids), free(s->words);
    free(s->tokens), free(s->bytes), free(s->pairs);
    free(s->slot_key), free(s->slot_pair), free(s->heap);
}

/* The words from the bytes objects and their counts, the byte tokens, the byte pairs counted and
   listed, the heap made of them. */
static int start(State *s, PyObject *words, PyObject *freqs)
{
    Py_ssize_t n = PyList_GET_SIZE(words), total = 0;
    if (n >= INT32_MAX) {
        PyErr_SetString(PyExc_MemoryError, "more than 2**31 distinct pre-tokens");
        return -1;
    }
    for (Py_ssize_t w = 0; w < n; w++) {
        PyObject *word = PyList_GET_ITEM(words, w);
        if (!PyBytes_Check(word)) {
            PyErr_SetString(PyExc_TypeError, "words: expected a list of bytes");
            return -1;
        }
        total += PyBytes_GET_SIZE(word);
    }
    s->ids = malloc((size_t)(total + 1) * sizeof(int32_t));
    s->words = malloc((size_t)(n + 1) * sizeof(Word));
    if (!s->ids || !s->words) {
        PyErr_NoMemory();
        return -1;
    }
    for (int byte = 0; byte < 256; byte++) {
        unsigned char *text = new_token(s, 1);
        if (!text)
            return -1;
        *text = (unsigned char)byte;
    }
    if (rehash(s, 1 << 17) < 0) /* room for every byte pair */
        return -1;
    Py_ssize_t at = 0;
    for (Py_ssize_t w = 0; w < n; w++) {
        PyObject *word = PyList_GET_ITEM(words, w);
        const unsigned char *text = (const unsigned char *)PyBytes_AS_STRING(word);
        Py_ssize_t size = PyBytes_GET_SIZE(word);
        long long freq = PyLong_AsLongLong(PyList_GET_ITEM(freqs, w));
        if (freq == -1 && PyErr_Occurred())
            return -1;
        s->words[w] = (Word){at, size, freq};
        for (Py_ssize_t i = 0; i < size; i++)
            s->ids[at + i] = text[i];
        for (Py_ssize_t i = 0; i + 1 < size; i++)
            if (add(s, text[i], text[i + 1], freq, (int32_t)w) < 0)
                return -1;
        at += size;
        if ((w & 0xffff) == 0xffff && PyErr_CheckSignals() < 0)
            return -1;
    }
    if (grow((void **)&s->heap, &s->heap_cap, s->n_pairs, sizeof(Entry)) < 0)
        return -1;
    for (Py_ssize_t p = 0; p < s->n_pairs; p++)
        s->heap[p] = (Entry){s->pairs[p].count, s->pairs[p].a, s->pairs[p].b, (int32_t)p};
    s->heap_len = s->n_pairs;
    for (Py_ssize_t i = s->heap_len / 2 - 1; i >= 0; i--)
        sift_down(s, i);
    return 0;
}

static PyObject *learn(PyObject *module, PyObject *args)
{
    PyObject *words, *freqs, *byte_ranks, *progress;
    Py_ssize_t n_merges;
    if (!PyArg_ParseTuple(args, "O!O!nOO:learn", &PyList_Type, &words, &PyList_Type, &freqs, &n_merges,
                          &byte_ranks, &progress))
        return NULL;
    if (PyList_GET_SIZE(words) != PyList_GET_SIZE(freqs)) {
        PyErr_SetString(PyExc_ValueError, "words and freqs differ in length");
        return NULL;
    }
    State s;
    memset(&s, 0, sizeof s);
    if (byte_ranks != Py_None) {
        if (!PyBytes_Check(byte_ranks) || PyBytes_GET_SIZE(byte_ranks) != 256) {
            PyErr_SetString(PyExc_ValueError, "byte_ranks: expected None or 256 bytes");
            return NULL;
        }
        s.hf = 1;
        memcpy(s.byte_rank, PyBytes_AS_STRING(byte_ranks), 256);
    }
    PyObject *merges = PyList_New(0);
    if (!merges || start(&s, words, freqs) < 0)
        goto error;
    while (PyList_GET_SIZE(merges) < n_merges && s.heap_len) {
        Entry top = pop(&s);
        int64_t count = s.pairs[top.pair].count;
        if (count != top.count) {
            /* a stale entry: counts only fall, so the pair goes back with its current count */
            if (0 < count && count < top.count && push(&s, top.pair) < 0)
                goto error;
            continue;
        }
        PyObject *merge_ids = Py_BuildValue("(ii)", top.a, top.b);
        if (!merge_ids)
            goto error;
        int appended = PyList_Append(merges, merge_ids);
        Py_DECREF(merge_ids);
        if (appended < 0 || joined_token(&s, top.a, top.b) < 0 || merge(&s, top.pair, (int32_t)(s.n_tokens - 1)) < 0)
            goto error;
        if (PyList_GET_SIZE(merges) % 100 == 0) {
            if (PyErr_CheckSignals() < 0)
                goto error;
            if (progress != Py_None) {
                PyObject *result = PyObject_CallFunction(progress, "n", PyList_GET_SIZE(merges));
                if (!result)
                    goto error;
                Py_DECREF(result);
            }
        }
    }
    release(&s);
    return merges;
error:
    release(&s);
    Py_XDECREF(merges);
    return NULL;
}

static PyMethodDef methods[] = {
    {"learn", learn, METH_VARARGS,
     "learn(words, freqs, n_merges, byte_ranks, progress) -> merges: BPE training's merge loop "
     "(gptkit.tokenizer.train.learn_merges)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_merge_loop", NULL, -1, methods};

PyMODINIT_FUNC PyInit__merge_loop(void)
{
    return PyModule_Create(&module);
}
