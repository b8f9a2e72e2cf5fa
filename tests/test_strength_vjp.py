"""attncore._vjp: checks added to kill surviving mutants (see the appendix "How strong is the evidence")."""

import numpy as np
import pytest

import attncore as ac
from messages import raises_message

N, M, K, V = 3, 4, 2, 5
LONG = np.finfo(np.longdouble).eps < np.finfo(np.float64).eps
needs_long = pytest.mark.skipif(not LONG, reason="long double is float64 on this platform")


def inputs(fname):
    """Good inputs of each vjp, as keyword arguments (``g`` of the forward output's shape)."""
    rng = np.random.default_rng(7)
    r = lambda *shape: rng.normal(size=shape)  # noqa: E731
    return {
        "softmax_vjp": lambda: dict(x=r(N, M), g=r(N, M)),
        "normalize_vjp": lambda: dict(s=r(N, M), g=r(N, M)),
        "relative_bias_vjp": lambda: dict(g=r(N, M)),
        "rope_vjp": lambda: dict(g=r(N, 4), positions=r(N)),
        "shaw_relative_embeddings_vjp": lambda: dict(g=r(N, M, K), clip=1),
        "attention_vjp": lambda: dict(q=r(N, K), k=r(M, K), v=r(M, V), g=r(N, V)),
        "attention_bias_vjp": lambda: dict(q=r(N, K), k=r(M, K), v=r(M, V), g=r(N, V), bias=r(N, M)),
        "shaw_attention_vjp": lambda: dict(q=r(N, K), k=r(M, K), v=r(M, V), rel_k=r(N, M, K),
                                           rel_v=r(N, M, V), g=r(N, V)),
    }[fname]()


ARRAYS = [("softmax_vjp", "x"), ("softmax_vjp", "g"), ("normalize_vjp", "s"), ("normalize_vjp", "g"),
          ("relative_bias_vjp", "g"), ("rope_vjp", "g"), ("rope_vjp", "positions"),
          ("shaw_relative_embeddings_vjp", "g"), ("attention_vjp", "g"), ("attention_bias_vjp", "bias")]
ARRAYS += [("shaw_attention_vjp", a) for a in ("q", "k", "v", "rel_k", "rel_v", "g")]


@pytest.mark.parametrize("fname,name", ARRAYS)
def test_vjp_names_an_argument_of_the_wrong_type(fname, name):
    kwargs = inputs(fname)
    kwargs[name] = kwargs[name] > 0
    with raises_message(TypeError, name):
        getattr(ac, fname)(**kwargs)


@pytest.mark.parametrize("fname,name,bad", [(f, a, bad) for f, a in ARRAYS for bad in (np.nan, np.inf)
                                            if not (f, a) == ("attention_bias_vjp", "bias")])
def test_vjp_names_an_argument_holding_nan_or_inf(fname, name, bad):
    kwargs = inputs(fname)
    kwargs[name].flat[1] = bad
    with raises_message(ValueError, name):
        getattr(ac, fname)(**kwargs)


@pytest.mark.parametrize("fname,name,shape,others,shapes", [
    ("normalize_vjp", "s", (M,), [], ["(..., n, m)"]),
    ("relative_bias_vjp", "g", (M,), [], ["(..., n, m)"]),
    ("rope_vjp", "g", (4,), [], ["(..., n, d)"]),
    ("shaw_relative_embeddings_vjp", "g", (N, M), [], ["(n, m, k)"]),
    # g must have the shape of the forward output, and the message says which output and its shape
    ("softmax_vjp", "g", (N, M + 1), ["x"], [(N, M)]),
    ("normalize_vjp", "g", (N, M + 1), ["s"], [(N, M)]),
    ("attention_vjp", "g", (N, V + 1), ["output"], ["(..., n, v)", (N, V)]),
    ("shaw_attention_vjp", "g", (N, V + 1), ["output"], ["(..., n, v)", (N, V)]),
])
def test_vjp_names_an_argument_of_the_wrong_shape(fname, name, shape, others, shapes):
    kwargs = inputs(fname)
    kwargs[name] = np.zeros(shape)
    with raises_message(ValueError, name, names=others, shapes=[*shapes, shape]):
        getattr(ac, fname)(**kwargs)


def test_softmax_vjp_names_x_for_an_axis_out_of_range():
    with raises_message(ValueError, "x", names=["axis"], values=[2], says="out of range"):
        ac.softmax_vjp(**inputs("softmax_vjp"), axis=2)


def test_shaw_relative_embeddings_vjp_names_a_negative_clip():
    with raises_message(ValueError, "clip", values=[0, -1], says="out of range"):
        ac.shaw_relative_embeddings_vjp(inputs("shaw_relative_embeddings_vjp")["g"], -1)


def test_shaw_relative_embeddings_vjp_with_clip_0_sums_everything_into_its_one_row():
    # K = 0: every offset clips to 0, so the table's one row is the sum of g over all pairs (a loop)
    g = inputs("shaw_relative_embeddings_vjp")["g"]
    total = sum(g[i, j] for i in range(N) for j in range(M))
    np.testing.assert_allclose(ac.shaw_relative_embeddings_vjp(g, 0), total[None], rtol=1e-14)


@pytest.mark.parametrize("dtype", [np.float16, np.float32])
def test_shaw_relative_embeddings_vjp_keeps_the_dtype_of_g(dtype):
    g = inputs("shaw_relative_embeddings_vjp")["g"].astype(dtype)
    assert ac.shaw_relative_embeddings_vjp(g, 1).dtype == dtype


@pytest.mark.parametrize("n,m", [(1, 1), (3, 1), (1, 4), (2, 3)])
def test_relative_bias_vjp_sums_the_diagonals_also_with_one_key(n, m):
    g = np.random.default_rng(n * 10 + m).normal(size=(2, n, m))
    want = np.zeros((2, n + m - 1))
    for i in range(n):
        for j in range(m):
            want[:, j - i + n - 1] += g[:, i, j]
    np.testing.assert_allclose(ac.relative_bias_vjp(g), want, rtol=1e-14, atol=1e-15)


@pytest.mark.parametrize("shape", [(0, 3), (3, 0)])
def test_relative_bias_vjp_without_queries_or_keys_names_g(shape):
    with raises_message(ValueError, "g", values=[1], shapes=[shape], says="out of range"):
        ac.relative_bias_vjp(np.zeros(shape))


# --- the overflow message names the gradient that overflows -------------------------------------

@pytest.mark.parametrize("fname,name,grad", [
    ("softmax_vjp", "x", "dx"), ("normalize_vjp", "s", "ds"),
    ("attention_vjp", "q", "dq"), ("attention_vjp", "k", "dk"), ("attention_vjp", "v", "dv"),
    ("attention_bias_vjp", "q", "dq"), ("attention_bias_vjp", "k", "dk"), ("attention_bias_vjp", "v", "dv"),
    ("attention_bias_vjp", "bias", "dbias"),
    ("shaw_attention_vjp", "q", "dq"), ("shaw_attention_vjp", "k", "dk"), ("shaw_attention_vjp", "v", "dv"),
    ("shaw_attention_vjp", "rel_k", "drel_k"), ("shaw_attention_vjp", "rel_v", "drel_v"),
])
def test_vjp_names_the_gradient_that_overflows_float16(fname, name, grad):
    # only `name` is float16, so only its gradient is rounded to float16; g = 1e9 makes it overflow
    kwargs = inputs(fname)
    kwargs[name] = kwargs[name].astype(np.float16)
    kwargs["g"] = kwargs["g"] * 1e9
    with raises_message(ValueError, grad, dtypes=["float16"], says="overflow", remedy=("shrink", "g")):
        getattr(ac, fname)(**kwargs)


# --- arguments passed on: checked against central differences of the forward function --------

def central(f, kwargs, name, g, h=1e-6):
    """d sum(g * f(**kwargs)) / d kwargs[name], by central differences (an independent route)."""
    x = kwargs[name]
    out = np.zeros_like(x)
    for idx in np.ndindex(x.shape):
        if not np.isfinite(x[idx]):
            continue
        up, down = x.copy(), x.copy()
        up[idx] += h
        down[idx] -= h
        out[idx] = (np.sum(g * f(**{**kwargs, name: up})) - np.sum(g * f(**{**kwargs, name: down}))) / (2 * h)
    return out


def test_normalize_vjp_defaults_to_softmax_and_gives_0_at_minus_inf():
    kw = inputs("normalize_vjp")
    s, g = kw["s"], kw["g"]
    s[0, 1] = -np.inf  # allowed: a masked score
    ds = ac.normalize_vjp(s, g)
    assert ds[0, 1] == 0
    np.testing.assert_allclose(ds, central(lambda s: ac.softmax(s), dict(s=s), "s", g), atol=1e-8)


@pytest.mark.parametrize("normalize", ["softmax", "l2"])
def test_attention_bias_vjp_passes_scale_mask_and_a_minus_inf_bias_on(normalize):
    kw = inputs("attention_bias_vjp")
    g = kw.pop("g")
    kw["bias"][1, 2] = -np.inf  # a bias may mask
    mask = np.ones((N, M), bool)
    mask[0, 0] = mask[2, 3] = False
    grads = ac.attention_bias_vjp(**kw, g=g, scale=0.3, mask=mask, normalize=normalize)
    f = lambda **a: ac.attention(**a, scale=0.3, mask=mask, normalize=normalize)  # noqa: E731
    for got, name in zip(grads, ("q", "k", "v", "bias")):
        np.testing.assert_allclose(got, central(f, kw, name, g), atol=1e-7, err_msg=name)
    assert grads[3][1, 2] == grads[3][0, 0] == 0


@pytest.mark.parametrize("normalize", ["softmax", "l2"])
def test_shaw_attention_vjp_passes_scale_mask_and_normalize_on(normalize):
    kw = inputs("shaw_attention_vjp")
    g = kw.pop("g")
    mask = np.ones((N, M), bool)
    mask[0, 0] = mask[2, 3] = False
    grads = ac.shaw_attention_vjp(**kw, g=g, scale=0.3, mask=mask, normalize=normalize)
    f = lambda **a: ac.shaw_attention(**a, scale=0.3, mask=mask, normalize=normalize)  # noqa: E731
    for got, name in zip(grads, ("q", "k", "v", "rel_k", "rel_v")):
        np.testing.assert_allclose(got, central(f, kw, name, g), atol=1e-7, err_msg=name)


def test_shaw_attention_vjp_names_a_bad_mask():
    kw = inputs("shaw_attention_vjp")
    with raises_message(ValueError, "mask"):
        ac.shaw_attention_vjp(**kw, mask=np.ones((N + 1, M), bool))


# --- dtypes: float16 in, float16 out; longer types computed in their own precision ------------

@pytest.mark.parametrize("fname", ["softmax_vjp", "normalize_vjp", "attention_bias_vjp", "shaw_attention_vjp"])
@pytest.mark.parametrize("dtype", [np.float16, np.float32])
def test_vjp_returns_gradients_in_the_dtype_of_their_arguments(fname, dtype):
    kwargs = {a: x.astype(dtype) for a, x in inputs(fname).items()}
    out = getattr(ac, fname)(**kwargs)
    for grad in out if isinstance(out, tuple) else (out,):
        assert grad.dtype == dtype


def long_inputs(*shapes):
    """long double arrays whose entries are not float64 numbers: a third of a float64 number is off
    any float64 number by about 1e-17 of it, 100 times the long double rounding (so float64 work shows)."""
    rng = np.random.default_rng(11)
    return [rng.normal(size=s).astype(np.longdouble) / 3 for s in shapes]


def long_softmax(x):
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


@needs_long
@pytest.mark.parametrize("fname", ["softmax_vjp", "normalize_vjp"])
@pytest.mark.parametrize("g_dtype", [np.longdouble, np.float64])
def test_softmax_backward_computes_long_double_in_long_double(fname, g_dtype):
    # the closed form a * (g - sum(g a)) written out in long double; float64 work misses it by ~1e-16
    x, g = long_inputs((N, M), (N, M))
    g = g.astype(g_dtype)
    a = long_softmax(x)
    want = a * (g - (g * a).sum(axis=-1, keepdims=True))
    got = getattr(ac, fname)(x, g)  # normalize_vjp's default normalisation is the softmax
    assert got.dtype == np.longdouble
    np.testing.assert_allclose(got, want, rtol=0, atol=float(20 * np.finfo(np.longdouble).eps))


@needs_long
def test_shaw_attention_vjp_computes_long_double_in_long_double():
    # softmax rows sum to 1, so drel_v[i, j] = w_ij g_i sums over j to g_i, to long double rounding
    q, k, v, rel_k, rel_v = long_inputs((N, K), (M, K), (M, V), (N, M, K), (N, M, V))
    g = np.random.default_rng(5).normal(size=(N, V))  # float64: the work dtype comes from all six
    drel_v = ac.shaw_attention_vjp(q, k, v, rel_k, rel_v, g)[4]
    assert drel_v.dtype == np.longdouble
    np.testing.assert_allclose(drel_v.sum(axis=1), g, rtol=0, atol=float(20 * np.finfo(np.longdouble).eps))


def test_layer_norm_vjp_overflow_names_x_its_shape_and_a_larger_eps():
    """A variance so small that the derivative (var + eps)**-1/2 overflows float64: the message
    names x and its shape, says it overflows, and proposes a larger eps as a remedy."""
    with raises_message(ValueError, "x", shapes=[(1, 3)], says="overflow", remedy=("pass", "eps")):
        ac.layer_norm_vjp(np.array([[0.0, 5e-324, 0.0]]), np.ones((1, 3)), eps=0.0)
