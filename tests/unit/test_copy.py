"""eval/copy.py: the n-gram's counts equal a brute-force count over the stream before each
position, its interpolated probabilities sum to one over the vocabulary, the mixture of a
position depends on no later position, and the tokens it marks verbatim are those inside windows
that the training text holds."""

import numpy as np
import pytest

from gptkit.eval import copy


def brute_force(stream, first, p_model, max_n):
    """Each target's longest earlier context, its count and the interpolated probabilities, by
    comparing every earlier window with the context."""
    prob = np.tile(np.asarray(p_model, float), (len(copy.ALPHAS), 1))
    length, count = np.zeros(len(stream) - first, int), np.zeros(len(stream) - first, int)
    for row, i in enumerate(range(first, len(stream))):
        for k in range(1, min(max_n, i) + 1):
            context = list(stream[i - k : i])
            # the context ends at j + k - 1 < i - 1: what followed it is before position i
            followers = [stream[j + k] for j in range(0, i - k) if list(stream[j : j + k]) == context]
            if not followers:
                break
            length[row], count[row] = k, len(followers)
            hits = sum(f == stream[i] for f in followers)
            prob[:, row] = (hits + copy.ALPHAS * prob[:, row]) / (len(followers) + copy.ALPHAS)
    return prob, length, count


def brute_force_verbatim(stream, first, source, k):
    """Whether each target lies in a window of k tokens of the text (from `source` on) that occurs
    in the training text (before `source`)."""
    stream = list(stream)
    training = {tuple(stream[j : j + k]) for j in range(source - k + 1)}
    held = [a for a in range(source, len(stream) - k + 1) if tuple(stream[a : a + k]) in training]
    return np.array([any(a <= i < a + k for a in held) for i in range(first, len(stream))], bool)


@pytest.mark.parametrize("seed, vocab, max_n", [(0, 3, 4), (1, 5, 8), (2, 2, 32), (3, 40, 32)])
def test_counts_and_probabilities_equal_a_brute_force_count(seed, vocab, max_n):
    rng = np.random.default_rng(seed)
    parts = [rng.integers(0, vocab, int(rng.integers(1, 30))) for _ in range(12)]
    stream = np.concatenate(
        [parts[int(rng.integers(0, i + 1))] if i and rng.random() < 0.5 else parts[i] for i in range(len(parts))]
    )  # repeats of earlier parts, far apart
    first = len(stream) // 3
    p_model = rng.uniform(0.01, 1, len(stream) - first)
    got = copy.ngram(stream, first, p_model, max_n=max_n)
    prob, length, count = brute_force(stream, first, p_model, max_n)
    assert (got.length == length).all() and (got.count == count).all()
    np.testing.assert_allclose(got.prob, prob, rtol=1e-12)
    assert length.max() == max_n or max_n == 32 and length.max() > 8  # long matches were there to find
    verbatim = brute_force_verbatim(stream, first, first - 1, max_n)
    assert (got.verbatim == verbatim).all()
    assert verbatim.any() or max_n == 32  # short windows the training text holds were there to find


def test_the_probabilities_of_every_next_token_sum_to_one():
    rng = np.random.default_rng(7)
    vocab = 6
    prefix = np.tile(rng.integers(0, vocab, 9), 5)[:-3]
    totals = 0
    for token in range(vocab):
        got = copy.ngram(np.r_[prefix, token], len(prefix), [1 / vocab])
        totals += got.prob[:, 0]
    np.testing.assert_allclose(totals, 1, rtol=1e-12)


def test_the_mixture_of_a_position_depends_on_no_later_one():
    rng = np.random.default_rng(3)
    stream = np.tile(rng.integers(0, 50, 200), 8)
    p_model = rng.uniform(0.001, 0.1, len(stream) - 1)
    mixed = copy.mixed(p_model, copy.ngram(stream, 1, p_model))
    assert (mixed[: copy.FIRST_BLOCK] == p_model[: copy.FIRST_BLOCK]).all()  # the model alone before any fit
    assert np.log(mixed).sum() > np.log(p_model).sum() + 1000  # it copies the repeats
    cut = 4 * copy.FIRST_BLOCK
    later = stream.copy()
    later[cut + 1 :] = rng.integers(0, 50, len(stream) - cut - 1)
    p_later = np.r_[p_model[:cut], rng.uniform(0.001, 0.1, len(p_model) - cut)]
    np.testing.assert_array_equal(copy.mixed(p_later, copy.ngram(later, 1, p_later))[:cut], mixed[:cut])


def test_a_useless_ngram_leaves_the_model_alone():
    rng = np.random.default_rng(4)
    stream = rng.integers(0, 1000, 3000)  # no context of 2 tokens recurs: the n-gram knows nothing
    p_model = np.full(len(stream) - 1, 0.5)
    np.testing.assert_array_equal(copy.mixed(p_model, copy.ngram(stream, 1, p_model)), p_model)


def test_a_text_half_copied_from_the_training_text_has_half_its_tokens_verbatim():
    rng = np.random.default_rng(5)
    train = rng.integers(0, 1000, 5000)  # no window of 2 tokens recurs by chance
    fresh = rng.integers(0, 1000, 201)

    def share(text):
        stream = np.r_[train, text]
        return copy.ngram(stream, len(train) + 1, np.full(len(text) - 1, 0.5)).verbatim.mean()

    assert share(np.r_[fresh, train[1000:1200]]) == 0.5  # 200 of the 400 scored tokens
    assert share(fresh) == 0
    assert share(np.r_[fresh, train[1000 : 1000 + copy.MAX_N - 1]]) == 0  # a span one token short
    assert share(np.r_[train[: copy.MAX_N], fresh]) == (copy.MAX_N - 1) / (
        copy.MAX_N - 1 + 201
    )  # the first token is not scored
