"""attncore._kernels: checks added to kill surviving mutants (see the appendix "How strong is the evidence")."""

import itertools
import math
import warnings

import numpy as np
import pytest

from attncore._kernels import (
    exp_limit_features,
    gaussian_features,
    linear_attention,
    linear_attention_weights,
    positive_random_features,
    taylor_features,
    trig_random_features,
)
from messages import raises_message


def taylor_loop(row, order):
    # phi(x) = [x^{(x)p} / sqrt(p!) for p = 0..order], each tensor power flattened in C order
    out = []
    for p in range(order + 1):
        for idx in itertools.product(range(len(row)), repeat=p):
            out.append(math.prod(float(row[i]) for i in idx) / math.sqrt(math.factorial(p)))
    return np.array(out)


def exp_limit_loop(row, n):
    # phi(x) = (1, x / sqrt(n))^{(x)n}, flattened in C order
    y = np.concatenate([[1.0], np.asarray(row, float) / math.sqrt(n)])
    return np.array([math.prod(y[i] for i in idx) for idx in itertools.product(range(len(y)), repeat=n)])


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_feature_maps_of_batched_tokens_match_the_loop_and_keep_the_dtype(dtype):
    x = np.random.default_rng(3).normal(size=(2, 3, 4)).astype(dtype)
    tol = 1e-5 if dtype == np.float32 else 1e-12
    for features, loop, arg in ((taylor_features, taylor_loop, 2), (exp_limit_features, exp_limit_loop, 2)):
        got = features(x, arg)
        assert got.dtype == dtype and got.shape[:2] == (2, 3)
        for b in range(2):
            for i in range(3):
                np.testing.assert_allclose(got[b, i], loop(x[b, i], arg), rtol=tol, atol=tol)


def test_feature_map_errors_name_x_and_its_shape():
    for features in (taylor_features, exp_limit_features):
        letters = "(..., n, d)" if features is taylor_features else "(..., l, d)"
        for bad in (np.float64(1.0), np.ones(3)):
            with raises_message(ValueError, "x", shapes=[letters, bad.shape]):
                features(bad, 2)
        with raises_message(TypeError, "x"):
            features(np.ones((2, 3), bool), 2)


def test_feature_map_size_limit_counts_every_row_of_a_batch():
    # x (2, 3, 4): 6 rows; order 1 gives 1 + 4 = 5 features per row, 30 entries;
    # exp_limit_features(n=2) gives (4 + 1)^2 = 25 per row, 150 entries
    x = np.ones((2, 3, 4))
    for call, what, width in ((lambda m: taylor_features(x, 1, max_entries=m), "taylor_features(order=1)", 5),
                              (lambda m: exp_limit_features(x, 2, max_entries=m), "exp_limit_features(n=2)", 25)):
        entries = 6 * width
        assert call(entries).shape == (2, 3, width)  # exactly at the limit is allowed
        # the facts: the map, its width per row, the entries it needs, x's shape, and the limit
        with raises_message(ValueError, "max_entries", names=[what.split("(")[0]], values=[width, entries, entries - 1],
                            shapes=[(2, 3, 4)]):
            call(entries - 1)


def test_feature_maps_of_no_tokens_fit_in_max_entries_zero():
    # no rows: no entries at all, so a limit of 0 is met; a negative limit names max_entries
    for features in (taylor_features, exp_limit_features):
        assert features(np.ones((0, 3)), 2, max_entries=0).shape[0] == 0
        with raises_message(ValueError, "max_entries", values=[0, -1], says="out of range"):
            features(np.ones((2, 3)), 2, max_entries=-1)


def phi(x):
    return np.exp(x)  # positive features, one per input feature


def qkv(dtype=np.float64, n=6):
    rng = np.random.default_rng(5)
    return [(rng.normal(size=(n, s)) * 0.5).astype(dtype) for s in (3, 3, 2)]


def test_linear_attention_errors_name_the_feature_map():
    q, k, v = qkv()
    with raises_message(TypeError, "feature_map", values=["callable", "int"]):
        linear_attention(q, k, v, 3)
    with raises_message(TypeError, "key_feature_map", values=["callable", "None", "str"]):
        linear_attention(q, k, v, phi, key_feature_map="exp")
    with raises_message(ValueError, "feature_map(q)", shapes=["(..., 6, D)"]):
        linear_attention(q, k, v, lambda x: phi(x)[:-1])
    with raises_message(ValueError, "feature_map(q)", shapes=["(..., 6, D)"]):
        linear_attention(q, k, v, lambda x: phi(x)[0])
    with raises_message(TypeError, "feature_map(q)"):
        linear_attention(q, k, v, lambda x: x > 0)
    # the keys' features: under the name of the map that made them
    with raises_message(ValueError, "feature_map(k)", shapes=["(..., 5, 3)"]):
        linear_attention(q, k[:5], v[:5], lambda x: phi(x) if len(x) == 6 else phi(x)[:, :2])
    with raises_message(ValueError, "key_feature_map(k)", shapes=["(..., 6, 3)"]):
        linear_attention(q, k, v, phi, key_feature_map=lambda x: phi(x)[:, :2])
    with raises_message(ValueError, "chunk"):
        linear_attention(q, k, v, phi, causal=True, chunk=0)


def test_causal_linear_attention_names_features_whose_batch_axes_do_not_broadcast():
    q, k, v = qkv()
    with raises_message(ValueError, "q", names=["k", "v", "features"], shapes=[(2, 6, 3), (3, 6, 3), (6, 2)], says="broadcast"):
        linear_attention(q, k, v, lambda x: np.broadcast_to(phi(x), (2, 6, 3)), causal=True,
                         key_feature_map=lambda x: np.broadcast_to(phi(x), (3, 6, 3)))


@pytest.mark.parametrize("wide", ["q", "k", "v"])
def test_causal_linear_attention_result_has_the_dtype_of_its_widest_operand(wide):
    # float32 features and values with one of the three float64: the result is float64, as
    # without the causal mask, and it matches the masked weights times v
    q, k, v = qkv(np.float32)
    maps = {"q": lambda x: phi(x), "k": lambda x: phi(x)}
    if wide == "v":
        v = v.astype(np.float64)
    else:
        maps[wide] = lambda x: phi(x).astype(np.float64)
    got = linear_attention(q, k, v, maps["q"], causal=True, key_feature_map=maps["k"], chunk=4)
    assert got.dtype == np.float64
    assert linear_attention(q, k, v, maps["q"], key_feature_map=maps["k"]).dtype == np.float64
    fq, fk = maps["q"](q).astype(np.float64), maps["k"](k).astype(np.float64)
    w = np.tril(fq @ fk.T)
    np.testing.assert_allclose(got, (w / w.sum(-1, keepdims=True)) @ v.astype(np.float64), rtol=1e-6)


def test_causal_linear_attention_default_chunk_is_64():
    # the signature's default, bit for bit: 130 tokens are three chunks of 64, 64 and 2
    rng = np.random.default_rng(8)
    q, k = rng.normal(size=(2, 130, 4)) * 0.3
    v = rng.normal(size=(130, 3))
    got = linear_attention(q, k, v, phi, causal=True)
    np.testing.assert_array_equal(got, linear_attention(q, k, v, phi, causal=True, chunk=64))


# --- linear_attention: sums that overflow the dtype are an error, not inf (the bug of the appendix's
# "Found while killing mutants"); the scale of the features cancels, so a float64 route without it is exact

def scaled_exp(scale, dtype):
    return lambda x: (np.exp(x.astype(np.float64)) * scale).astype(dtype)  # positive, finite


def exp_features_reference(q, k, v, causal):
    # phi(x) = c exp(x): phi(q_i) . phi(k_j) = c^2 sum_t exp(q_it + k_jt), and c^2 cancels in the ratio
    q, k, v = (a.astype(np.float64) for a in (q, k, v))
    w = np.exp(q[:, None, :] + k[None, :, :]).sum(-1)  # (n, m)
    if causal:
        w = np.tril(w)
    return (w / w.sum(-1, keepdims=True)) @ v


OVERFLOWS = {  # dtype: (feature scale whose normaliser overflows, feature scale and value scale whose numerator does)
    np.float32: (1e20, 1e17, 1e30),
    np.float64: (1e160, 1e150, 1e200),
}


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_linear_attention_sums_that_overflow_are_an_error_naming_the_operands(dtype, causal):
    # before the fix: inf or nan with a RuntimeWarning at best; now a ValueError naming the features,
    # v and their shapes, and no warning escapes on the way
    q, k, v = qkv(dtype)
    name = np.dtype(dtype).name
    big_norm, big_num, big_v = OVERFLOWS[dtype]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with raises_message(ValueError, "feature_map(q)", names=["feature_map(k)"], shapes=[(6, 3)], dtypes=[name],
                            says=["normaliser", "overflow"], remedy=("shrink", "features")):
            linear_attention(q, k, v, scaled_exp(big_norm, dtype), causal=causal, chunk=4)
        with raises_message(ValueError, "feature_map(q)", names=["key_feature_map(k)"], not_names=["feature_map(k)"],
                            shapes=[(6, 3)], dtypes=[name], says=["normaliser", "overflow"], remedy=("shrink", "features")):
            # keys' features a quarter of the largest float: 6 keys (4 in the first block) overflow the sum
            linear_attention(q, k, v, scaled_exp(1, dtype), causal=causal, chunk=4,
                             key_feature_map=lambda x: np.full(x.shape, np.finfo(dtype).max / 4, dtype))
        # only the first column of v is large: one column of the numerator overflows, the other does not
        v_big = (v * np.array([big_v, 1])).astype(dtype)
        with raises_message(ValueError, "feature_map(q)", names=["feature_map(k)", "v"], shapes=[(6, 3), (6, 2)], dtypes=[name],
                            says=["numerator", "overflow"], remedy=("shrink", "v", "features")):
            linear_attention(q, k, v_big, scaled_exp(big_num, dtype), causal=causal, chunk=4)


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_linear_attention_weights_that_overflow_are_the_same_error(dtype, causal):
    # the explicit matrix: scores phi(q_i) . phi(k_j) near 1e40 (float32) overflow, and so does their sum;
    # the same error as linear_attention's, naming the features; scores near 1e34 are still computed
    q, k, _ = qkv(dtype)
    big_norm, big_num, _ = OVERFLOWS[dtype]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with raises_message(ValueError, "feature_map(q)", names=["feature_map(k)"], shapes=[(6, 3)], dtypes=[dtype],
                            says=["normaliser", "overflow"]):
            linear_attention_weights(q, k, scaled_exp(big_norm, dtype), causal=causal)
        with raises_message(ValueError, "feature_map(q)", names=["key_feature_map(k)"], not_names=["feature_map(k)"],
                            says=["normaliser", "overflow"]):
            linear_attention_weights(q, k, scaled_exp(1, dtype), causal=causal,
                                     key_feature_map=lambda x: np.full(x.shape, np.finfo(dtype).max / 4, dtype))
        got = linear_attention_weights(q, k, scaled_exp(big_num, dtype), causal=causal)
    assert got.dtype == dtype
    eye = np.eye(6)
    want = exp_features_reference(q, k, eye, causal)  # the weights are the output for v = I
    tol = 1e-5 if dtype == np.float32 else 1e-12
    np.testing.assert_allclose(got, want, rtol=tol, atol=tol)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_linear_attention_numerator_overflowing_both_ways_is_the_same_error_without_a_warning(dtype):
    # phi(k_1) v_1 overflows to +inf in one feature and phi(k_2) v_2 to -inf in the other; the query sums
    # them, inf - inf = nan (numpy's "invalid value" warning, which must not escape either)
    big = {np.float32: 1e20, np.float64: 1e200}[dtype]
    q, k, v = np.ones((1, 2), dtype), np.diag([big, big]).astype(dtype), np.array([[big], [-big]], dtype)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with raises_message(ValueError, "feature_map(q)", names=["feature_map(k)", "v"], shapes=[(2, 1)], says=["numerator", "overflow"]):
            linear_attention(q, k, v, lambda x: x)


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_linear_attention_of_large_but_finite_sums_is_still_computed(dtype, causal):
    # the numerator reaches 16% (float32) and 3% (float64) of the largest float: no error, no warning,
    # and the result is the float64 reference, in which the features' scale cancels
    q, k, v = qkv(dtype)
    big_feature, big_v = {np.float32: (1e17, 1e3), np.float64: (1e150, 1e6)}[dtype]
    v = (v * big_v).astype(dtype)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        got = linear_attention(q, k, v, scaled_exp(big_feature, dtype), causal=causal, chunk=4)
    assert got.dtype == dtype
    tol = 1e-5 if dtype == np.float32 else 1e-12
    np.testing.assert_allclose(got, exp_features_reference(q, k, v, causal), rtol=tol, atol=tol * big_v)


@pytest.mark.parametrize("which", ["state", "total"])
def test_causal_linear_attention_running_sums_overflow_in_the_dtype_of_the_result(which):
    # Kills the 4 mutants that build the causal running sums `state` or `total` with np.zeros(..., dtype=None)
    # or without dtype (float64 accumulators for float32 input).  One token per block, so each block's own
    # products fit in float32 and only a running sum over earlier blocks overflows: the last of 5 queries
    # sees 4 keys' phi(k) v = 1e38, which sum to 4e38 (state); the last of 3 sees 2 keys' phi(k) = 2e38
    # (total); the largest float32 is 3.4e38.  The sums are in float32, as without the mask, so both are
    # the same error; float64 accumulators returned a result.
    n, fk, fv, fq = {"state": (5, 1e19, 1e19, 1e-20), "total": (3, 2e38, 1e-10, 1e-30)}[which]
    q, k, v = (np.full((n, 1), x, np.float32) for x in (fq, fk, fv))
    part = "numerator" if which == "state" else "normaliser"
    for causal in (False, True):
        with raises_message(ValueError, "feature_map(q)", names=["feature_map(k)"], shapes=[(n, 1)], dtypes=["float32"],
                            says=[part, "overflow"]):
            linear_attention(q, k, v, lambda x: x, causal=causal, chunk=1)


# --- gaussian_features

def generator_with_zero_draws(words):
    # an MT19937 generator whose next `words` 32-bit outputs are 0 (tempering maps 0 to 0): each pair of
    # them is a 64-bit 0, which numpy's ziggurat turns into a standard normal draw of exactly 0.0
    bits = np.random.MT19937(0)
    key = bits.state["state"]["key"].copy()
    key[600:600 + words] = 0
    bits.state = {"bit_generator": "MT19937", "state": {"key": key, "pos": 600}}
    return np.random.Generator(bits)


@pytest.mark.parametrize("d", [1, 2])
def test_orthogonal_gaussian_features_of_a_singular_draw_keep_every_row(d):
    # A draw whose first row is 0 is singular, so QR gives r a zero on its diagonal.  The signs used to be
    # np.sign(diag(r)), 0 there, which zeroed a row of the result (a bug, fixed with copysign); the mutant
    # that divides by those signs instead of multiplying made it inf.  Every row must be a unit direction
    # times a chi norm: finite, nonzero, and orthogonal to the other rows of its block.
    assert np.all(generator_with_zero_draws(2 * d).standard_normal((d, d))[0] == 0)  # the draw is singular
    w = gaussian_features(d, d, generator_with_zero_draws(2 * d), orthogonal=True)
    assert np.all(np.isfinite(w))
    gram = w @ w.T
    assert np.all(np.diag(gram) > 0)
    np.testing.assert_allclose(gram - np.diag(np.diag(gram)), 0, atol=1e-12)


def test_gaussian_features_error_names_orthogonal():
    # kills check_bool(orthogonal, "XXorthogonalXX")
    with raises_message(TypeError, "orthogonal"):
        gaussian_features(2, 2, np.random.default_rng(0), orthogonal=1)


# --- positive_random_features, trig_random_features

def positive_loop(x, omega, stabilizer=None):
    # exp(x . w - |x|^2/2) / sqrt(m) entry by entry in the inputs' own scalars (float64 or longdouble);
    # "row" rescales each row, "global" the whole array, so that the largest entry is 1/sqrt(m)
    rows = x.reshape(-1, x.shape[-1])
    m = len(omega)
    f = np.array([[np.exp(np.sum(r * w) - np.sum(r * r) / 2) for w in omega] for r in rows])
    if stabilizer == "row":
        f = f / f.max(axis=1, keepdims=True)
    elif stabilizer == "global":
        f = f / f.max()
    return (f / np.sqrt(f.dtype.type(m))).reshape(x.shape[:-1] + (m,))


def trig_loop(x, omega):
    # exp(|x|^2/2) / sqrt(m) times the m cosines, then the m sines, of x . w
    rows = x.reshape(-1, x.shape[-1])
    m = len(omega)
    f = np.array([np.exp(np.sum(r * r) / 2) / np.sqrt(r.dtype.type(m))
                  * np.array([np.cos(np.sum(r * w)) for w in omega] + [np.sin(np.sum(r * w)) for w in omega])
                  for r in rows])
    return f.reshape(x.shape[:-1] + (2 * m,))


RANDOM_MAPS = {
    "positive": (positive_random_features, positive_loop),
    "positive-row": (lambda x, w: positive_random_features(x, w, stabilizer="row"),
                     lambda x, w: positive_loop(x, w, "row")),
    "positive-global": (lambda x, w: positive_random_features(x, w, stabilizer="global"),
                        lambda x, w: positive_loop(x, w, "global")),
    "trig": (trig_random_features, trig_loop),
}


@pytest.mark.parametrize("kind", list(RANDOM_MAPS))
def test_random_features_of_batched_rows_match_the_loop(kind):
    # Kills the mutants that take a reduction or a concatenation along axis +1 instead of -1 (the row
    # maximum of stabilizer="row", the trig radius |x|^2 and the cos/sin concatenation): for x (2, 3, 4)
    # axis 1 is the token axis, for a single (n, d) matrix it is the last one, which is why they survived.
    rng = np.random.default_rng(21)
    x, w = 0.5 * rng.normal(size=(2, 3, 4)), rng.normal(size=(5, 4))
    features, loop = RANDOM_MAPS[kind]
    got = features(x, w)
    np.testing.assert_allclose(got, loop(x, w), rtol=1e-12, atol=0)


@pytest.mark.parametrize("kind", list(RANDOM_MAPS))
@pytest.mark.parametrize("x_dtype, w_dtype", [(np.float32, np.float32), (np.float32, np.float64),
                                              (np.float64, np.float32), (np.float64, np.float64)])
def test_random_features_have_the_dtype_of_the_wider_input(kind, x_dtype, w_dtype):
    # The result is np.result_type(x, omega), and float64 if either input is, computed as accurately
    # as that: kills result_type(omega), result_type(x), result_type(None, ...) and dtype = None
    # (float32 or float64 in the wrong place), the trig result cast .astype(None) (float64 for float32
    # input), and positive features whose offset |x|^2/2 is rounded to float32 for a float64 x.
    rng = np.random.default_rng(22)
    x, w = (0.5 * rng.normal(size=(3, 4))).astype(x_dtype), rng.normal(size=(5, 4)).astype(w_dtype)
    features, loop = RANDOM_MAPS[kind]
    got = features(x, w)
    wide = np.result_type(x_dtype, w_dtype)
    assert got.dtype == wide
    tol = 1e-12 if wide == np.float64 else 2e-6
    np.testing.assert_allclose(got, loop(x.astype(np.float64), w.astype(np.float64)), rtol=tol, atol=tol)


@pytest.mark.skipif(np.finfo(np.longdouble).eps >= np.finfo(np.float64).eps, reason="longdouble is float64 here")
@pytest.mark.parametrize("kind", list(RANDOM_MAPS))
def test_random_features_of_longdouble_input_keep_its_precision(kind):
    # longdouble is a float dtype the package accepts; its features must not pass through float64.
    # Kills the positive features' offset cast .astype(None) (to float64: an error near 1e-15 in an
    # offset |x|^2/2 near 40) and the trig omega cast .astype(None) (angles from a float64-rounded omega).
    # x and omega have bits beyond float64 (thirds).  The bound 2e-16 leaves room for the one float64
    # constant of the code, log(m)/2 (an error of 2e-17 relative); m = 4, so 1/sqrt(m) = 1/2 is exact.
    rng = np.random.default_rng(23)
    x = rng.normal(size=(3, 4)).astype(np.longdouble) * 13 / 3
    w = rng.normal(size=(4, 4)).astype(np.longdouble) / 3
    features, loop = RANDOM_MAPS[kind]
    got = features(x, w)
    assert got.dtype == np.longdouble
    want = loop(x, w)
    assert np.max(np.abs(got - want) / np.abs(want).max()) < 2e-16


@pytest.mark.parametrize("kind", list(RANDOM_MAPS))
def test_random_features_of_zero_width_rows_are_the_formula(kind):
    # d = 0: x . w = 0 and |x| = 0, so positive features are 1/sqrt(m) and trig ones [1, .., 1, 0, .., 0]/sqrt(m).
    # Kills the mutants that test omega.shape[1] == 0 (the width) for omega.shape[0] == 0 (no features,
    # already refused) and return the zero angles or exponents themselves.
    features, loop = RANDOM_MAPS[kind]
    got = features(np.zeros((3, 0)), np.zeros((4, 0)))
    want = np.full((3, 4), 0.5) if kind != "trig" else np.concatenate([np.full((3, 4), 0.5), np.zeros((3, 4))], 1)
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("kind", list(RANDOM_MAPS))
def test_random_feature_errors_name_x_omega_and_their_shapes(kind):
    # Kills _check_omega's mutants that rename the letters of the shapes, (..., n, d) for x and (m, d) for
    # omega (to XXnXX, N, ...), or the argument omega's width is matched against (x, to XXxXX)
    features, _ = RANDOM_MAPS[kind]
    with raises_message(ValueError, "x", shapes=["(..., n, d)", "(3,)"]):
        features(np.ones(3), np.ones((2, 3)))
    with raises_message(ValueError, "omega", names=["x"], shapes=["(m, 3)", "(5, 2)", "(4, 3)"]):
        features(np.ones((4, 3)), np.ones((5, 2)))


def test_positive_random_features_error_names_stabilizer():
    # kills check_choice(stabilizer, "XXstabilizerXX", ...)
    with raises_message(ValueError, "stabilizer", values=["rows"], options=["row", "global"]):
        positive_random_features(np.ones((2, 3)), np.ones((4, 3)), stabilizer="rows")


# --- _validate_qkv: the errors of linear_attention and linear_attention_weights name q, k, v and shapes

def test_linear_attention_shape_errors_name_q_k_v_letters_and_the_matched_argument():
    # Kills _validate_qkv's mutants that drop the shape of q or k (spec None or left out: a 1-D q or k
    # then fails later, with an IndexError), rename q, k, causal or a letter (n, k, m, v to XXnXX, N, ...),
    # or drop or rename the argument a shape is matched against (match=None, left out, XXqXX, Q, XXkXX, K)
    q, k, v = qkv()  # (6, 3), (6, 3), (6, 2)
    for call in (lambda q, k, v, **kw: linear_attention(q, k, v, phi, **kw),
                 lambda q, k, v, **kw: linear_attention_weights(q, k, phi, **kw)):
        with raises_message(ValueError, "q", shapes=["(..., n, k)", "(3,)"]):
            call(q[0], k, v)
        with raises_message(ValueError, "k", names=["q"], shapes=["(..., m, 3)", "(3,)", "(6, 3)"]):
            call(q, k[0], v)
        with raises_message(ValueError, "k", names=["q"], shapes=["(..., m, 3)", "(6, 2)", "(6, 3)"]):
            call(q, k[:, :2], v)
        with raises_message(TypeError, "causal"):
            call(q, k, v, causal=1)
    with raises_message(ValueError, "v", names=["k"], shapes=["(..., 6, v)", "(5, 2)", "(6, 3)"]):
        linear_attention(q, k, v[:5], phi)


@pytest.mark.parametrize("shapes", [((2,), (3,), ()), ((2,), (), (3,)), ((), (2,), (3,))])
def test_linear_attention_batch_error_names_q_k_and_v(shapes):
    # Kills the mutants that leave q, k or v out of the batch check, or misname them: the error
    # lists all three with their shapes (before, a numpy broadcasting error came later, or v was unnamed)
    q, k, v = qkv()
    q, k, v = (np.broadcast_to(a, b + a.shape) for a, b in zip((q, k, v), shapes))
    with raises_message(ValueError, "q", names=["k", "v"], shapes=[q.shape, k.shape, v.shape], says="broadcast"):
        linear_attention(q, k, v, phi)


@pytest.mark.parametrize("shapes", [((2,), (3,)), ((3,), (2,))])
def test_linear_attention_weights_batch_error_names_q_and_k(shapes):
    # the same for the check without v (linear_attention_weights): q or k left out, or misnamed
    q, k, _ = qkv()
    q, k = (np.broadcast_to(a, b + a.shape) for a, b in zip((q, k), shapes))
    with raises_message(ValueError, "q", names=["k"], shapes=[q.shape, k.shape], says="broadcast"):
        linear_attention_weights(q, k, phi)


def test_weights_whose_scores_overflow_to_nan_are_an_error_and_warn_nothing():
    """Features of mixed sign whose products overflow float32 to +inf and -inf: their sum is
    inf - inf = nan (IEEE invalid).  The weights refuse it with the normaliser's ValueError and
    let no RuntimeWarning escape.  Kills, in linear_attention_weights, np.errstate(over="ignore",
    invalid="ignore") => invalid=None or invalid dropped (numpy's default, "warn")."""
    q = np.array([[1e20, 1e20]], np.float32)
    k = np.array([[1e20, -1e20]], np.float32)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with raises_message(ValueError, "feature_map(q)", dtypes=["float32"], says=["normaliser", "overflow"]):
            linear_attention_weights(q, k, lambda x: x)


@pytest.mark.parametrize("batch", [(), (3,), (2, 3)])
def test_a_feature_map_with_no_features_is_an_error_with_batch_axes(batch):
    """D = 0 is read from the last axis of the features, whatever the batch axes in front."""
    q, k, v = np.ones(batch + (4, 2)), np.ones(batch + (5, 2)), np.ones(batch + (5, 1))
    empty = lambda z: z[..., :0]  # noqa: E731
    for call in (lambda: linear_attention(q, k, v, empty), lambda: linear_attention_weights(q, k, empty)):
        with raises_message(ValueError, "feature_map(q)", shapes=[batch + (4, 0)], says="not empty"):
            call()
