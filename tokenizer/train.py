"""Byte-level BPE training.

Two phases. Counting: worker processes count the pre-tokens of document-aligned batches of
text (special tokens cut the text and are never counted). Merging: starting from the 256
bytes, repeatedly merge the most frequent adjacent pair, ties going to the
lexicographically greatest pair of byte strings. Only the words that contain the merged
pair are touched, the pair counts around each merge are adjusted in place, and the next
pair comes from a heap, so a merge costs what it changes rather than a pass over the table.
"""
import heapq
import re
from collections import Counter, defaultdict, deque

from shared.corpus import Corpus
from shared.errors import InputError
from shared.progress import Progress
from shared.workers import process_pool

from . import split
from .bpe import Tokenizer

BATCH_CHARS = 1 << 21  # text per counting task: large enough to amortize the hand-off


def train_bpe(corpus, vocab_size, special_tokens=("<|endoftext|>",), *, workers=1, max_bytes=None, quiet=False):
    """Learn a byte-level BPE of `vocab_size` tokens (256 bytes + merges + special tokens) from a `Corpus`."""
    special_tokens = list(special_tokens)
    if any(not s for s in special_tokens):
        raise InputError("--special-token: a special token cannot be empty")
    if len(set(special_tokens)) != len(special_tokens):
        duplicate = next(s for s in special_tokens if special_tokens.count(s) > 1)
        raise InputError(f"--special-token: {duplicate!r} is given twice")
    if vocab_size < 256 + len(special_tokens):
        raise InputError(f"--vocab-size {vocab_size}: must be at least 256 + {len(special_tokens)} special token(s)")
    counts = count_pretokens(corpus, special_tokens, workers=workers, max_bytes=max_bytes, quiet=quiet)
    if not counts:
        raise InputError(f"{', '.join(map(str, corpus.paths))}: the corpus holds no text to train on")
    vocab, merges = learn_merges(counts, vocab_size - 256 - len(special_tokens), quiet=quiet)
    specials = {s: len(vocab) + i for i, s in enumerate(special_tokens)}
    return Tokenizer(vocab + [s.encode("utf-8") for s in special_tokens], merges, specials)


# -- counting ----------------------------------------------------------------------------------


def count_pretokens(corpus: Corpus, special_tokens, *, workers=1, max_bytes=None, quiet=False):
    """{pre-token: count} over the corpus, or over its first `max_bytes` bytes of whole documents."""
    special_re = re.compile("|".join(map(re.escape, sorted(special_tokens, key=len, reverse=True)))) if special_tokens else None
    progress = Progress("counting", "MB", total=corpus.total_bytes, scale=1e6, quiet=quiet)
    counts = Counter()
    batches = _batches(corpus, max_bytes, progress)
    if workers <= 1:
        for batch in batches:
            counts.update(_count_batch(batch, special_re))
    else:
        with process_pool(workers) as pool:
            pending = deque()
            for batch in batches:
                pending.append(pool.submit(_count_batch, batch, special_re))
                if len(pending) >= 2 * workers:  # bounded read-ahead: memory stays flat
                    counts.update(pending.popleft().result())
            for future in pending:
                counts.update(future.result())
    progress.update(corpus.bytes_read)
    progress.close()
    return counts


def _batches(corpus, max_bytes, progress):
    """Lists of texts of about BATCH_CHARS characters. A document cut into pieces by the reader
    is cut again only where that cannot change its pre-tokens (split.safe_cut)."""
    batch, size, taken, carry = [], 0, 0, ""
    for piece, ends_document in corpus.pieces():
        text = carry + piece
        cut = len(text) if ends_document else split.safe_cut(text, len(text) - 1)
        text, carry = text[:cut], text[cut:]
        batch.append(text)
        size += len(text)
        if max_bytes is not None:
            taken += len(text.encode("utf-8"))
        if size >= BATCH_CHARS:
            progress.update(corpus.bytes_read)
            yield batch
            batch, size = [], 0
        if ends_document and max_bytes is not None and taken >= max_bytes:
            break
    if batch:
        yield batch


def _count_batch(texts, special_re):
    segments = [s for text in texts for s in (special_re.split(text) if special_re else [text])]
    chunked = [split.chunks(s) for s in segments]
    counts = Counter(pretoken for c in chunked for pretoken in split.PRETOKEN.findall(c[0]))
    chunk_counts = Counter(chunk for c in chunked for chunk in c[1:])
    pretokens, sizes = split.pretokens_of_chunks(list(chunk_counts))
    weights = [n for n, size in zip(chunk_counts.values(), sizes) for _ in range(size)]
    for pretoken, weight in zip(pretokens, weights):
        counts[pretoken] += weight
    return counts


# -- merging -----------------------------------------------------------------------------------


def _descending(token):
    """A key that sorts byte strings in reverse: so the heap, a min-heap, gives the
    greatest pair first among equal counts. The end marker 256 exceeds every byte,
    which puts a string after its extensions."""
    return tuple(255 - b for b in token) + (256,)


def learn_merges(pretoken_counts, n_merges, *, quiet=False):
    """The vocabulary (bytes of each token) and the merges, learned from {pre-token: count}."""
    words = [list(p.encode("utf-8")) for p in pretoken_counts]
    freqs = list(pretoken_counts.values())
    vocab = [bytes([b]) for b in range(256)]
    keys = [_descending(t) for t in vocab]
    pair_counts = defaultdict(int)
    # pair -> the words that contain it, or once did, maybe more than once: checked on use.
    # Lists rather than sets: a quarter of the memory, and cheaper to extend.
    containing = defaultdict(list)
    for index, (word, freq) in enumerate(zip(words, freqs)):
        for pair in zip(word, word[1:]):
            pair_counts[pair] += freq
            containing[pair].append(index)
    heap = [(-count, keys[a], keys[b], a, b) for (a, b), count in pair_counts.items()]
    heapq.heapify(heap)

    merges = []
    progress = Progress("merging", "merges", total=n_merges, quiet=quiet)
    while len(merges) < n_merges and heap:
        negative_count, _, _, a, b = heapq.heappop(heap)
        count = pair_counts.get((a, b), 0)
        if count != -negative_count:
            # A stale entry: the pair's count fell since. Increases push a fresh entry,
            # decreases are fixed here, when the stale one surfaces.
            if 0 < count < -negative_count:
                heapq.heappush(heap, (-count, keys[a], keys[b], a, b))
            continue
        new = len(vocab)
        vocab.append(vocab[a] + vocab[b])
        keys.append(_descending(vocab[new]))
        merges.append((a, b))
        grown = _merge_pair(a, b, new, words, freqs, pair_counts, containing)
        del pair_counts[(a, b)]
        for pair in grown:
            heapq.heappush(heap, (-pair_counts[pair], keys[pair[0]], keys[pair[1]], *pair))
        if len(merges) % 100 == 0:
            progress.update(len(merges))
    progress.update(len(merges))
    progress.close()
    return vocab, merges


def _merge_pair(a, b, new, words, freqs, pair_counts, containing):
    """Replace the pair (a, b) by `new` in every word that holds it, adjusting the counts of the
    neighbouring pairs. Returns the pairs whose counts grew."""
    grown = set()
    for index in containing.pop((a, b)):
        word = words[index]
        n = len(word)
        occurrences, i = [], -1
        try:
            while True:
                i = word.index(a, i + 1)  # a C-level scan; words hold the pair once, typically
                if i + 1 < n and word[i + 1] == b:
                    occurrences.append(i)
                    i += 1
        except ValueError:
            pass
        if not occurrences:
            continue  # the word lost the pair to an earlier merge
        freq = freqs[index]
        merged, previous_end = [], 0
        for i in occurrences:
            if i > 0 and i != previous_end:  # a pair shared with the previous occurrence is counted there
                pair_counts[(word[i - 1], a)] -= freq
            if i + 2 < n:
                pair_counts[(b, word[i + 2])] -= freq
            merged += word[previous_end:i]
            merged.append(new)
            previous_end = i + 2
        merged += word[previous_end:]
        words[index] = merged
        last = len(merged) - 1
        for k, i in enumerate(occurrences):
            j = i - k  # where the k-th new token landed: each merge before it took one place
            if j > 0:
                pair = (merged[j - 1], new)
                pair_counts[pair] += freq
                containing[pair].append(index)
                grown.add(pair)
            if j < last and merged[j + 1] != new:  # (new, new) is counted as the next one's left pair
                pair = (new, merged[j + 1])
                pair_counts[pair] += freq
                containing[pair].append(index)
                grown.add(pair)
    return grown
