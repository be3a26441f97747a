/* BPE training's counting, compiled: GPT-2's pre-tokens of texts, counted (train.py's _count_batch).

   count(texts, classes) -> {pre-token: count}
   add(total, part): total[k] += part[k] for every key of part (dicts; a Counter is one)

   classes: one byte per code point (0x110000 of them), 1 for \p{L}, 2 for \p{N}, 3 for \s and 0 for
   the rest, as the `regex` module classifies them (train.py builds it with `regex`). With it the
   pattern '(?:[sdmt]|ll|ve|re)| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+ is matched by hand,
   alternative by alternative (see next_end), and each match is counted in a hash table of
   (text, start, length); the dict is made of the distinct matches only. */

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

enum { OTHER = 0, LETTER = 1, NUMBER = 2, SPACE = 3 };
#define N_CODE_POINTS 0x110000

typedef struct {
    int kind;
    const void *data;
    Py_ssize_t length;
    const unsigned char *classes;
} Text;

static inline Py_UCS4 char_at(const Text *t, Py_ssize_t i)
{
    return PyUnicode_READ(t->kind, t->data, i);
}

static inline int class_at(const Text *t, Py_ssize_t i)
{
    return t->classes[char_at(t, i)]; /* a str's code points are below 0x110000 */
}

/* The end of the pre-token that starts at i: the first alternative of the pattern that matches there. */
static Py_ssize_t next_end(const Text *t, Py_ssize_t i)
{
    Py_ssize_t n = t->length;
    Py_UCS4 c = char_at(t, i);
    if (c == '\'' && i + 1 < n) { /* '(?:[sdmt]|ll|ve|re) */
        Py_UCS4 d = char_at(t, i + 1);
        if (d == 's' || d == 'd' || d == 'm' || d == 't')
            return i + 2;
        if (i + 2 < n) {
            Py_UCS4 e = char_at(t, i + 2);
            if ((d == 'l' && e == 'l') || (d == 'v' && e == 'e') || (d == 'r' && e == 'e'))
                return i + 3;
        }
    }
    int cls = class_at(t, i);
    Py_ssize_t j = i + 1;
    if (c == ' ' && j < n && class_at(t, j) != SPACE) /* the optional space before a run */
        cls = class_at(t, j++);
    if (cls != SPACE) { /* \p{L}+, \p{N}+ or [^\s\p{L}\p{N}]+ */
        while (j < n && class_at(t, j) == cls)
            j++;
        return j;
    }
    while (j < n && class_at(t, j) == SPACE)
        j++;
    /* \s+(?!\S): a run of whitespace but its last character, where a non-space follows (that one
       goes with it); a single whitespace character before a non-space is \s+ alone */
    return j < n && j - i >= 2 ? j - 1 : j;
}

/* -- the counts: a hash table of the distinct pre-tokens -------------------------------------- */

typedef struct {
    uint64_t hash;
    Py_ssize_t text, start, length; /* text: its index in the list; length 0: an empty slot */
    int64_t count;
} Slot;

typedef struct {
    Slot *slots;
    Py_ssize_t n_slots, used; /* n_slots: a power of two; at most half used */
    const Text *texts;
} Counts;

static uint64_t hash_of(const Text *t, Py_ssize_t start, Py_ssize_t length)
{
    /* FNV-1a over the code points, so that equal strings of different kinds hash alike */
    uint64_t h = 0xcbf29ce484222325ull;
    for (Py_ssize_t i = start; i < start + length; i++)
        h = (h ^ char_at(t, i)) * 0x100000001b3ull;
    return h;
}

static int same(const Text *t, Py_ssize_t start, const Text *u, Py_ssize_t u_start, Py_ssize_t length)
{
    if (t->kind == u->kind)
        return memcmp((const char *)t->data + start * t->kind, (const char *)u->data + u_start * u->kind,
                      (size_t)(length * t->kind)) == 0;
    for (Py_ssize_t i = 0; i < length; i++)
        if (char_at(t, start + i) != char_at(u, u_start + i))
            return 0;
    return 1;
}

static Py_ssize_t find_slot(const Counts *counts, uint64_t hash, Py_ssize_t text, Py_ssize_t start, Py_ssize_t length)
{
    Py_ssize_t mask = counts->n_slots - 1, i = (Py_ssize_t)(hash >> 7) & mask;
    for (;; i = (i + 1) & mask) {
        const Slot *slot = &counts->slots[i];
        if (slot->length == 0)
            return i;
        if (slot->hash == hash && slot->length == length &&
            same(&counts->texts[slot->text], slot->start, &counts->texts[text], start, length))
            return i;
    }
}

static int resize(Counts *counts, Py_ssize_t n_slots)
{
    Slot *old = counts->slots;
    Py_ssize_t old_n = counts->n_slots;
    Slot *slots = calloc((size_t)n_slots, sizeof(Slot));
    if (!slots) {
        PyErr_NoMemory();
        return -1;
    }
    counts->slots = slots, counts->n_slots = n_slots;
    for (Py_ssize_t i = 0; i < old_n; i++) {
        if (old[i].length) {
            Py_ssize_t mask = n_slots - 1, j = (Py_ssize_t)(old[i].hash >> 7) & mask;
            while (slots[j].length)
                j = (j + 1) & mask;
            slots[j] = old[i];
        }
    }
    free(old);
    return 0;
}

static int count_one(Counts *counts, Py_ssize_t text, Py_ssize_t start, Py_ssize_t length)
{
    uint64_t hash = hash_of(&counts->texts[text], start, length);
    Py_ssize_t i = find_slot(counts, hash, text, start, length);
    if (counts->slots[i].length) {
        counts->slots[i].count++;
        return 0;
    }
    if (2 * (counts->used + 1) > counts->n_slots) {
        if (resize(counts, 2 * counts->n_slots) < 0)
            return -1;
        i = find_slot(counts, hash, text, start, length);
    }
    counts->slots[i] = (Slot){hash, text, start, length, 1};
    counts->used++;
    return 0;
}

static PyObject *count(PyObject *module, PyObject *args)
{
    PyObject *texts, *classes;
    if (!PyArg_ParseTuple(args, "O!O!:count", &PyList_Type, &texts, &PyBytes_Type, &classes))
        return NULL;
    if (PyBytes_GET_SIZE(classes) != N_CODE_POINTS) {
        PyErr_SetString(PyExc_ValueError, "classes: expected one byte per code point");
        return NULL;
    }
    Py_ssize_t n_texts = PyList_GET_SIZE(texts);
    Text *views = malloc((size_t)(n_texts + 1) * sizeof(Text));
    Counts counts = {NULL, 0, 0, views};
    PyObject *result = NULL;
    if (!views) {
        PyErr_NoMemory();
        goto done;
    }
    if (resize(&counts, 1 << 12) < 0)
        goto done;
    for (Py_ssize_t k = 0; k < n_texts; k++) {
        PyObject *text = PyList_GET_ITEM(texts, k);
        if (!PyUnicode_Check(text)) {
            PyErr_SetString(PyExc_TypeError, "texts: expected a list of str");
            goto done;
        }
#if PY_VERSION_HEX < 0x030C0000
        if (PyUnicode_READY(text) < 0) /* a no-op since 3.12 */
            goto done;
#endif
        views[k] = (Text){PyUnicode_KIND(text), PyUnicode_DATA(text), PyUnicode_GET_LENGTH(text),
                          (const unsigned char *)PyBytes_AS_STRING(classes)};
        for (Py_ssize_t i = 0; i < views[k].length;) {
            Py_ssize_t end = next_end(&views[k], i);
            if (count_one(&counts, k, i, end - i) < 0)
                goto done;
            i = end;
        }
    }
    result = PyDict_New();
    for (Py_ssize_t i = 0; result && i < counts.n_slots; i++) {
        const Slot *slot = &counts.slots[i];
        if (!slot->length)
            continue;
        PyObject *key = PyUnicode_Substring(PyList_GET_ITEM(texts, slot->text), slot->start, slot->start + slot->length);
        PyObject *value = key ? PyLong_FromLongLong(slot->count) : NULL;
        if (!value || PyDict_SetItem(result, key, value) < 0)
            Py_CLEAR(result);
        Py_XDECREF(key);
        Py_XDECREF(value);
    }
done:
    free(counts.slots);
    free(views);
    return result;
}

static PyObject *add(PyObject *module, PyObject *args)
{
    PyObject *total, *part, *key, *value;
    if (!PyArg_ParseTuple(args, "O!O!:add", &PyDict_Type, &total, &PyDict_Type, &part))
        return NULL;
    Py_ssize_t position = 0;
    while (PyDict_Next(part, &position, &key, &value)) {
        PyObject *old = PyDict_GetItemWithError(total, key); /* borrowed */
        if (!old && PyErr_Occurred())
            return NULL;
        PyObject *sum = old ? PyNumber_Add(old, value) : Py_NewRef(value);
        if (!sum)
            return NULL;
        int status = PyDict_SetItem(total, key, sum);
        Py_DECREF(sum);
        if (status < 0)
            return NULL;
    }
    Py_RETURN_NONE;
}

static PyMethodDef methods[] = {
    {"count", count, METH_VARARGS,
     "count(texts, classes) -> {pre-token: count}: GPT-2's pre-tokens of the texts, counted "
     "(gptkit.tokenizer.train)."},
    {"add", add, METH_VARARGS, "add(total, part): total[key] += part[key] for each key of part."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_pretokens", NULL, -1, methods};

PyMODINIT_FUNC PyInit__pretokens(void)
{
    return PyModule_Create(&module);
}
