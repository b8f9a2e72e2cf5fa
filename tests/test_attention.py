"""attention, attention_weights, multi_head_attention against plain loops; invariants."""

import math

import numpy as np
import pytest
from hypothesis import given, strategies as st

from attncore import (
    attention,
    attention_weights,
    causal_mask,
    merge_heads,
    multi_head_attention,
    split_heads,
)
from messages import assert_message, raises_message
from strategies import batch_shapes, dtypes, lengths, normal, permutations, seeds, tol, widths


def attention_loop(q, k, v, mask=None, bias=None, scale=None):
    """Attention for one sequence (2-d inputs), written from the definition with loops."""
    n, m = len(q), len(k)
    scale = 1 / math.sqrt(len(q[0])) if scale is None else scale
    out = np.zeros((n, len(v[0])))
    weights = np.zeros((n, m))
    for i in range(n):
        keep = [j for j in range(m) if mask is None or mask[i][j]]
        if not keep:
            continue  # a query with nothing to attend gets 0
        s = {j: scale * sum(float(a) * float(b) for a, b in zip(q[i], k[j])) + (0.0 if bias is None else float(bias[i][j])) for j in keep}
        top = max(s.values())
        e = {j: math.exp(s[j] - top) for j in keep}
        total = math.fsum(e.values())
        for j in keep:
            weights[i, j] = e[j] / total
            out[i] += weights[i, j] * np.asarray(v[j], dtype=float)
    return weights, out


@pytest.mark.parametrize("use_mask", [False, True])
@pytest.mark.parametrize("use_bias", [False, True])
def test_matches_loop(rng, use_mask, use_bias):
    n, m, dk, dv = 4, 6, 5, 3
    q, k, v = rng.normal(size=(n, dk)), rng.normal(size=(m, dk)), rng.normal(size=(m, dv))
    mask = rng.random((n, m)) < 0.7 if use_mask else None
    if use_mask:
        mask[0] = False  # one query that may attend nothing
    bias = rng.normal(size=(n, m)) if use_bias else None
    w_ref, out_ref = attention_loop(q, k, v, mask, bias)
    np.testing.assert_allclose(attention_weights(q, k, mask=mask, bias=bias), w_ref, rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(attention(q, k, v, mask=mask, bias=bias), out_ref, rtol=1e-12, atol=1e-15)


def test_custom_scale(rng):
    q, k, v = rng.normal(size=(3, 4)), rng.normal(size=(5, 4)), rng.normal(size=(5, 2))
    _, ref = attention_loop(q, k, v, scale=0.25)
    np.testing.assert_allclose(attention(q, k, v, scale=0.25), ref, rtol=1e-12)
    # scale = 0 gives uniform weights: every output row is the mean of the values.
    np.testing.assert_allclose(attention(q, k, v, scale=0.0), np.tile(v.mean(0), (3, 1)), rtol=1e-12)


def test_batch_axes_broadcast(rng):
    q = rng.normal(size=(2, 3, 4, 5))
    k = rng.normal(size=(3, 6, 5))  # shared across the first batch axis
    v = rng.normal(size=(3, 6, 2))
    out = attention(q, k, v)
    assert out.shape == (2, 3, 4, 2)
    for a in range(2):
        for b in range(3):
            _, ref = attention_loop(q[a, b], k[b], v[b])
            np.testing.assert_allclose(out[a, b], ref, rtol=1e-12)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_dtype_preserved(rng, dtype):
    q, k, v = (rng.normal(size=s).astype(dtype) for s in [(3, 4), (5, 4), (5, 2)])
    assert attention_weights(q, k).dtype == dtype
    assert attention(q, k, v, bias=np.zeros((3, 5))).dtype == dtype


def test_fully_masked_query_outputs_zero(rng):
    q, k, v = rng.normal(size=(2, 3)), rng.normal(size=(4, 3)), rng.normal(size=(4, 2))
    mask = np.array([[False] * 4, [True] * 4])
    out = attention(q, k, v, mask=mask)
    assert np.all(out[0] == 0.0) and not np.any(np.isnan(out))


def test_causal_mask_matches_loop():
    for n, m in [(1, 1), (3, 3), (2, 5), (5, 2)]:
        ref = np.array([[j <= i for j in range(m)] for i in range(n)])
        assert np.array_equal(causal_mask(n, m), ref)


@pytest.mark.parametrize(
    "call, name, facts",
    [
        (lambda: attention_weights(np.zeros((3, 4)), np.zeros((5, 3))), "k", dict(shapes=["(..., m, 4)", (5, 3)])),
        (lambda: attention_weights(np.zeros(4), np.zeros((5, 4))), "q", dict(shapes=["(..., n, k)", (4,)])),
        (lambda: attention(np.zeros((3, 4)), np.zeros((5, 4)), np.zeros((4, 2))), "v", dict(shapes=["(..., 5, v)", (4, 2)])),
        (lambda: attention_weights(np.zeros((2, 3, 4)), np.zeros((3, 5, 4))), "q",
         dict(names=["k"], shapes=[(2, 3, 4), (3, 5, 4)], says="broadcast")),
        (lambda: attention_weights(np.zeros((3, 4)), np.zeros((5, 4)), bias=np.zeros((5, 3))), "bias",
         dict(shapes=[(5, 3), (3, 5)], says="broadcast")),
        (lambda: attention_weights(np.zeros((3, 4)), np.zeros((5, 4)), mask=np.ones((3, 4), bool)), "mask",
         dict(shapes=[(3, 4), (3, 5)], says="broadcast")),
        (lambda: attention_weights(np.zeros((3, 4)), np.zeros((5, 4)), scale=np.inf), "scale", dict(values=["inf"], says="finite")),
        (lambda: attention_weights(np.full((3, 4), np.nan), np.zeros((5, 4))), "q", dict(values=["nan"], says="finite")),
        (lambda: multi_head_attention(np.zeros((3, 6)), *[np.zeros((6, 6))] * 4, 4), "num_heads",
         dict(names=["d"], values=[6, 4], says="divisible")),
        (lambda: multi_head_attention(np.zeros((3, 6)), np.zeros((6, 5)), *[np.zeros((6, 6))] * 3, 2), "w_q",
         dict(shapes=[(6, 6), (6, 5)])),
        (lambda: multi_head_attention(np.zeros((3, 6)), *[np.zeros((6, 6))] * 4, 2, b_v=np.zeros(5)), "b_v",
         dict(shapes=[(6,), (5,)])),
        (lambda: multi_head_attention(np.zeros((3, 6)), *[np.zeros((6, 6))] * 4, 2, context=np.zeros((4, 5))), "context",
         dict(shapes=["(..., m, 6)", (4, 5)])),
    ],
)
def test_errors_name_argument_and_shapes(call, name, facts):
    with raises_message(ValueError, name, **facts):
        call()


def test_type_errors():
    with raises_message(TypeError, "mask", dtypes=["float64"], says="boolean", remedy=("pass", "bias")):
        attention(np.zeros((3, 4)), np.zeros((5, 4)), np.zeros((5, 2)), mask=np.zeros((3, 5)))
    with raises_message(TypeError, "num_heads", values=[2.0], says="integer"):
        multi_head_attention(np.zeros((3, 6)), *[np.zeros((6, 6))] * 4, 2.0)


# ---- multi-head -----------------------------------------------------------

def mha_loop(x, ws, bs, h, context=None, mask=None):
    """Multi-head attention from its definition: per-head column blocks, then concat."""
    c = x if context is None else context
    w_q, w_k, w_v, w_o = ws
    b_q, b_k, b_v, b_o = (np.zeros(x.shape[-1]) if b is None else b for b in bs)
    q, k, v = x @ w_q + b_q, c @ w_k + b_k, c @ w_v + b_v
    dk = x.shape[-1] // h
    heads = []
    for i in range(h):
        cols = slice(i * dk, (i + 1) * dk)
        heads.append(attention_loop(q[:, cols], k[:, cols], v[:, cols], mask)[1])
    return np.concatenate(heads, axis=1) @ w_o + b_o


@pytest.mark.parametrize("h", [1, 2, 4])
@pytest.mark.parametrize("cross", [False, True])
@pytest.mark.parametrize("biases", [False, True])
def test_multi_head_matches_loop(rng, h, cross, biases):
    d, n, m = 8, 5, 3
    x = rng.normal(size=(n, d))
    context = rng.normal(size=(m, d)) if cross else None
    ws = [rng.normal(size=(d, d)) for _ in range(4)]
    bs = [rng.normal(size=d) if biases else None for _ in range(4)]
    mask = rng.random((n, m if cross else n)) < 0.8
    got = multi_head_attention(x, *ws, h, b_q=bs[0], b_k=bs[1], b_v=bs[2], b_o=bs[3], context=context, mask=mask)
    np.testing.assert_allclose(got, mha_loop(x, ws, bs, h, context, mask), rtol=1e-11, atol=1e-12)


def test_multi_head_batched(rng):
    d, h = 6, 3
    x = rng.normal(size=(2, 4, d))
    ws = [rng.normal(size=(d, d)) for _ in range(4)]
    got = multi_head_attention(x, *ws, h, mask=causal_mask(4))
    for b in range(2):
        np.testing.assert_allclose(got[b], mha_loop(x[b], ws, [None] * 4, h, mask=causal_mask(4)), rtol=1e-11)


def test_split_merge_roundtrip(rng):
    x = rng.normal(size=(2, 5, 12))
    parts = split_heads(x, 3)
    assert parts.shape == (2, 3, 5, 4)
    np.testing.assert_array_equal(parts[:, 1], x[..., 4:8])
    np.testing.assert_array_equal(merge_heads(parts), x)


# ---- properties -----------------------------------------------------------

@st.composite
def qkv(draw):
    rng = np.random.default_rng(draw(seeds))
    dtype = draw(dtypes)
    batch, n, m, dk, dv = draw(batch_shapes), draw(lengths), draw(lengths), draw(widths), draw(widths)
    q, k, v = (normal(rng, batch + s, dtype) for s in [(n, dk), (m, dk), (m, dv)])
    return q, k, v


@given(qkv())
def test_weights_rows_sum_to_one(arrays):
    q, k, _ = arrays
    w = attention_weights(q, k)
    assert w.shape == q.shape[:-1] + (k.shape[-2],) and w.dtype == q.dtype
    np.testing.assert_allclose(w.sum(-1), 1.0, **tol(q.dtype))


@given(qkv(), st.data())
def test_equivariant_under_query_permutation(arrays, data):
    q, k, v = arrays
    perm = data.draw(permutations(q.shape[-2]))
    np.testing.assert_allclose(attention(q[..., perm, :], k, v), attention(q, k, v)[..., perm, :], **tol(q.dtype))


@given(qkv(), st.data())
def test_invariant_under_joint_key_value_permutation(arrays, data):
    q, k, v = arrays
    perm = data.draw(permutations(k.shape[-2]))
    np.testing.assert_allclose(attention(q, k[..., perm, :], v[..., perm, :]), attention(q, k, v), **tol(q.dtype))


@given(qkv(), st.data())
def test_masked_weights_are_zero(arrays, data):
    q, k, _ = arrays
    rng = np.random.default_rng(data.draw(seeds))
    mask = rng.random(q.shape[-2:-1] + k.shape[-2:-1]) < 0.5
    w = attention_weights(q, k, mask=mask)
    assert np.all(w[..., ~mask] == 0)


@given(seed=seeds, n=st.integers(2, 7), d=st.sampled_from([2, 4, 6]), dtype=dtypes, data=st.data())
def test_causal_outputs_ignore_future_tokens(seed, n, d, dtype, data):
    """Changing tokens after position t leaves the causal outputs at 0..t unchanged.

    Unchanged up to rounding: whether attention may skip the max shift depends on a
    bound over every key, masked ones included, and the two routes round differently
    (a leak of a future token changes the outputs by O(1), not by a few eps).
    """
    rng = np.random.default_rng(seed)
    t = data.draw(st.integers(0, n - 2))
    x = normal(rng, (n, d), dtype)
    ws = [normal(rng, (d, d), dtype) for _ in range(4)]
    x2 = x.copy()
    x2[t + 1:] = normal(rng, (n - t - 1, d), dtype)
    a = multi_head_attention(x, *ws, 2, mask=causal_mask(n))
    b = multi_head_attention(x2, *ws, 2, mask=causal_mask(n))
    scale = np.abs(a[: t + 1]).max() + np.finfo(dtype).tiny
    np.testing.assert_allclose(a[: t + 1], b[: t + 1], rtol=0, atol=64 * np.finfo(dtype).eps * scale)


# ---- other normalisations and re-weighting (the relative-position remedies) ----

def normalized_row_loop(scores, kind, keep):
    """One row of weights from its definition, in Python floats."""
    m = len(scores)
    if kind == "relu2":
        return [max(s, 0.0) ** 2 / m if k else 0.0 for s, k in zip(scores, keep)]
    e = [math.exp(s) if k else 0.0 for s, k in zip(scores, keep)]
    if kind == "none":
        return e
    if kind == "softmax":
        total = math.fsum(e)
    else:  # l2
        total = math.sqrt(math.fsum(x * x for x in e))
    return [x / total if total else 0.0 for x in e]


@pytest.mark.parametrize("kind", ["softmax", "l2", "relu2", "none"])
def test_normalizers_match_loop(rng, kind):
    q, k = rng.normal(size=(4, 3)), rng.normal(size=(5, 3))
    mask = rng.random((4, 5)) < 0.7
    mask[1] = False
    got = attention_weights(q, k, mask=mask, normalize=kind)
    scores = (q @ k.T) / math.sqrt(3)
    ref = np.array([normalized_row_loop(list(scores[i]), kind, list(mask[i])) for i in range(4)])
    np.testing.assert_allclose(got, ref, rtol=1e-12, atol=1e-15)
    assert np.all(got[1] == 0)


@given(qkv())
def test_l2_rows_have_unit_norm_and_relu2_rows_are_bounded(arrays):
    q, k, _ = arrays
    np.testing.assert_allclose(np.linalg.norm(attention_weights(q, k, normalize="l2"), axis=-1), 1.0, **tol(q.dtype))
    w = attention_weights(q, k, normalize="relu2")
    assert np.all(w >= 0)


def test_none_normalizer_refuses_overflow():
    with raises_message(ValueError, "exp", names=["normalize"], values=["none"], says="overflow"):
        attention_weights(np.full((1, 1), 100.0), np.full((1, 1), 100.0), normalize="none")


def test_unknown_normalizer():
    with raises_message(ValueError, "normalize", values=["max"], options=["softmax", "l2", "relu2", "none"]):
        attention_weights(np.zeros((2, 3)), np.zeros((2, 3)), normalize="max")


def test_reweight_multiplies_weights(rng):
    q, k, v = rng.normal(size=(3, 4)), rng.normal(size=(3, 4)), rng.normal(size=(3, 2))
    c = rng.normal(size=(3, 3))
    np.testing.assert_allclose(attention(q, k, v, reweight=c), (attention_weights(q, k) * c) @ v, rtol=1e-12)
    with raises_message(ValueError, "reweight", names=["weights"], shapes=[(2, 3), (3, 3)], says="broadcast"):
        attention(q, k, v, reweight=np.ones((2, 3)))


def test_toeplitz_matches_loop(rng):
    from attncore import toeplitz

    for n in (1, 2, 5):
        c = rng.normal(size=2 * n - 1)
        ref = np.array([[c[j - i + n - 1] for j in range(n)] for i in range(n)])
        np.testing.assert_array_equal(toeplitz(c), ref)
    with raises_message(ValueError, "diagonals", shapes=["2n-1", (4,)]):
        toeplitz(np.zeros(4))


@pytest.mark.parametrize("mask_shape", [None, (7, 5), (5,), (3, 1, 7, 5), (1, 5)])
@pytest.mark.parametrize("bias_shape", [None, (7, 5), (2, 7, 5), (7, 1)])
def test_row_blocks_match_whole_matrix(rng, monkeypatch, mask_shape, bias_shape):
    """attention works on blocks of query rows; every block layout gives the same answer."""
    import sys

    module = sys.modules["attncore._attention"]

    q, k, v = rng.normal(size=(3, 2, 7, 4)), rng.normal(size=(2, 5, 4)), rng.normal(size=(3, 2, 5, 6))
    mask = None if mask_shape is None else rng.random(mask_shape) < 0.7
    bias = None if bias_shape is None else rng.normal(size=bias_shape)
    reweight = rng.normal(size=(7, 5))
    whole = (attention_weights(q, k, mask=mask, bias=bias) * reweight) @ v
    for block_rows in (1, 3, 1 << 30):  # one row, a few rows, everything
        monkeypatch.setattr(module, "BLOCK_ROWS", block_rows)
        got = attention(q, k, v, mask=mask, bias=bias, reweight=reweight)
        np.testing.assert_allclose(got, whole, rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("big", ["queries", "bias"])
def test_large_scores_stay_exact(rng, dtype, big):
    """Scores far beyond exp's range (|s| ~ 1e4) still give the exact softmax average."""
    q, k, v = rng.normal(size=(4, 3)), rng.normal(size=(5, 3)), rng.normal(size=(5, 2))
    bias = None
    if big == "queries":
        q = 1e4 * q
    else:
        bias = 1e4 * rng.normal(size=(4, 5))
    _, ref = attention_loop(q, k, v, bias=bias)
    got = attention(q.astype(dtype), k.astype(dtype), v.astype(dtype), bias=bias)
    assert np.all(np.isfinite(got))
    np.testing.assert_allclose(got, ref, **tol(dtype))


# ------------------------------------------------- blocks of query rows, causal key slicing, heads


def loop_over_batch(q, k, v, mask=None, bias=None, reweight=None, causal=False):
    """attention_loop on every (batch, head) slice after explicit broadcasting; causal as a mask
    built here with loops (key j visible to query i when j <= i), and reweight applied to the
    loop's weights before the values."""
    n, m = q.shape[-2], k.shape[-2]
    batch = np.broadcast_shapes(q.shape[:-2], k.shape[:-2], v.shape[:-2])
    full = batch + (n, m)
    keep = np.ones(full, bool) if mask is None else np.broadcast_to(mask, full)
    if causal:
        keep = keep & np.array([[j <= i for j in range(m)] for i in range(n)])
    bias = None if bias is None else np.broadcast_to(bias, full)
    qb, kb, vb = (np.broadcast_to(a, batch + a.shape[-2:]) for a in (q, k, v))
    out = np.zeros(batch + (n, v.shape[-1]))
    for idx in np.ndindex(batch):
        w, o = attention_loop(qb[idx], kb[idx], vb[idx], mask=keep[idx], bias=None if bias is None else bias[idx])
        if reweight is not None:
            o = (w * np.broadcast_to(reweight, full)[idx]) @ vb[idx].astype(float)
        out[idx] = o
    return out


SMALL_BLOCKS = [1, 3, 1 << 30]  # one row per block, a few rows, everything in one block


@pytest.mark.parametrize("n, m", [(7, 7), (5, 9), (9, 4)])
@pytest.mark.parametrize("user_mask", [None, "random", "rows fully masked", "band"])
@pytest.mark.parametrize("block_rows", SMALL_BLOCKS)
def test_causal_flag_and_causal_mask_match_loop(rng, monkeypatch, n, m, user_mask, block_rows):
    """causal=True, and the same mask given as booleans, against the loop: m != n both ways,
    fully masked rows, several block sizes (so that key blocks are really skipped), batch axes."""
    import sys

    module = sys.modules["attncore._attention"]
    monkeypatch.setattr(module, "BLOCK_ROWS", block_rows)
    q, k, v = rng.normal(size=(2, 3, n, 4)), rng.normal(size=(3, m, 4)), rng.normal(size=(2, 1, m, 5))
    mask = None
    if user_mask == "random":
        mask = rng.random((2, 1, n, m)) < 0.6
    elif user_mask == "rows fully masked":
        mask = rng.random((n, m)) < 0.5
        mask[::2] = False
    elif user_mask == "band":  # a sliding window of 2 keys ending one key before the query
        mask = np.array([[i - 2 <= j < i for j in range(m)] for i in range(n)])
    want = loop_over_batch(q, k, v, mask=mask, causal=True)
    got = attention(q, k, v, mask=mask, causal=True)
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-14)
    both = causal_mask(n, m) if mask is None else causal_mask(n, m) & mask
    np.testing.assert_allclose(attention(q, k, v, mask=both), want, rtol=1e-12, atol=1e-14)
    if mask is None:  # no causal mask: the mask alone skips keys too
        np.testing.assert_allclose(attention_weights(q, k, causal=True), attention_weights(q, k, mask=both), rtol=1e-12)


@pytest.mark.parametrize("normalize", ["softmax", "l2", "relu2", "none"])
@pytest.mark.parametrize("block_rows", SMALL_BLOCKS)
def test_causal_with_every_normalizer_bias_and_reweight(rng, monkeypatch, normalize, block_rows):
    """The skipped keys leave every normaliser's answer unchanged (relu2 divides by all m keys)."""
    import sys

    module = sys.modules["attncore._attention"]
    monkeypatch.setattr(module, "BLOCK_ROWS", block_rows)
    n, m = 6, 8
    q, k, v = rng.normal(size=(3, n, 4)), rng.normal(size=(3, m, 4)), rng.normal(size=(3, m, 2))
    bias, reweight = rng.normal(size=(n, m)), rng.normal(size=(3, n, m))
    whole = attention_weights(q, k, bias=bias, normalize=normalize, mask=causal_mask(n, m))
    assert np.all(whole[..., np.triu_indices(n, 1, m)[0], np.triu_indices(n, 1, m)[1]] == 0)
    np.testing.assert_allclose(attention(q, k, v, bias=bias, reweight=reweight, normalize=normalize, causal=True),
                               (whole * reweight) @ v, rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(attention_weights(q, k, bias=bias, normalize=normalize, causal=True), whole, rtol=1e-12)


@pytest.mark.parametrize("block_rows", [1, 4, 1 << 30])
def test_per_head_blocks_match_loop(rng, monkeypatch, block_rows):
    """Blocks of rows over batch and head axes, with every operand broadcasting on its own axes."""
    import sys

    module = sys.modules["attncore._attention"]
    monkeypatch.setattr(module, "BLOCK_ROWS", block_rows)
    n, m, h = 6, 5, 4
    q, k, v = rng.normal(size=(2, h, n, 3)), rng.normal(size=(1, m, 3)), rng.normal(size=(2, 1, m, 2))
    mask = rng.random((h, n, m)) < 0.7
    bias, reweight = rng.normal(size=(2, 1, n, m)), rng.normal(size=(h, 1, m))
    want = loop_over_batch(q, k, v, mask=mask, bias=bias, reweight=reweight)
    got = attention(q, k, v, mask=mask, bias=bias, reweight=reweight)
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-14)


def test_multi_head_causal_matches_mask(rng):
    x, ctx = rng.normal(size=(2, 5, 8)), rng.normal(size=(2, 7, 8))
    ws = [rng.normal(size=(8, 8)) for _ in range(4)]
    for context, m in ((None, 5), (ctx, 7)):
        np.testing.assert_allclose(multi_head_attention(x, *ws, 2, context=context, causal=True),
                                   multi_head_attention(x, *ws, 2, context=context, mask=causal_mask(5, m)), rtol=1e-12)


# ------------------------------------------------- the definition: blocks, causal slicing, errors


def _module():
    import sys

    return sys.modules["attncore._attention"]


def mutate(monkeypatch, name, old, new):
    """Replace ``old`` by ``new`` in the source of ``attncore._attention.<name>`` for this test:
    the wrong variant a check must reject."""
    import __future__
    import inspect
    import textwrap

    module = _module()
    if "mutmut" in open(module.__file__).read():  # make mutate: the module's source is mutmut's rewrite
        pytest.skip("a wrong variant is written into the package's own source, which mutmut has replaced")
    source = textwrap.dedent(inspect.getsource(getattr(module, name)))
    assert source.count(old) == 1, (name, old)
    code = compile(source.replace(old, new), module.__file__, "exec",
                   flags=__future__.annotations.compiler_flag, dont_inherit=True)
    namespace = {}
    exec(code, module.__dict__, namespace)
    monkeypatch.setattr(module, name, namespace[name])
    if name in globals():  # imported here by name too
        monkeypatch.setitem(globals(), name, namespace[name])


@given(st.integers(1, 9), st.integers(1, 9), st.integers(1, 12), st.booleans(), st.booleans(), st.booleans(), seeds)
def test_block_size_does_not_change_the_answer(n, m, block_rows, causal, with_mask, with_bias, seed):
    """Any number of rows per block gives attention_loop's answer (an independent route), with a
    mask, a bias and causal=True, m != n both ways."""
    import contextlib

    rng = np.random.default_rng(seed)
    q, k, v = rng.normal(size=(n, 3)), rng.normal(size=(m, 3)), rng.normal(size=(m, 2))
    mask = rng.random((n, m)) < 0.7 if with_mask else None
    bias = rng.normal(size=(n, m)) if with_bias else None
    keep = np.ones((n, m), bool) if mask is None else mask.copy()
    if causal:
        keep &= np.array([[j <= i for j in range(m)] for i in range(n)])
    _, want = attention_loop(q, k, v, mask=keep, bias=bias)
    with contextlib.ExitStack() as stack:
        patch = stack.enter_context(pytest.MonkeyPatch.context())
        patch.setattr(_module(), "BLOCK_ROWS", block_rows)
        got = attention(q, k, v, mask=mask, bias=bias, causal=causal)
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("n, m", [(300, 300), (300, 200), (200, 300)])
def test_causal_blocks_equal_the_whole_masked_computation(rng, monkeypatch, n, m):
    """Blocks of 64 rows, keys sliced to each block's last query: the same numbers as the whole
    (n, m) softmax under causal_mask written out in numpy."""
    monkeypatch.setattr(_module(), "BLOCK_ROWS", 64)
    q, k, v = rng.normal(size=(2, n, 8)), rng.normal(size=(2, m, 8)), rng.normal(size=(2, m, 3))
    s = np.where(causal_mask(n, m), q @ np.swapaxes(k, -1, -2) / math.sqrt(8), -np.inf)
    e = np.exp(s - s.max(axis=-1, keepdims=True))
    want = (e / e.sum(axis=-1, keepdims=True)) @ v
    np.testing.assert_allclose(attention(q, k, v, causal=True), want, rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("old, new", [
    ("min(rows.stop, m) if causal", "min(rows.stop - 1, m) if causal"),  # the block's last query loses its own key
    ("first=start if causal", "first=start + 1 if causal"),  # the causal mask one key late
    ("first=start if causal", "first=start - 1 if causal"),  # one key early
])
def test_a_causal_slice_off_by_one_is_rejected(monkeypatch, old, new):
    """The checks above fail for the wrong variants of the causal slicing."""
    mutate(monkeypatch, "attention", old, new)
    with pytest.raises(AssertionError):
        test_causal_blocks_equal_the_whole_masked_computation(np.random.default_rng(0), monkeypatch, 300, 300)


def test_a_key_slice_one_past_the_block_changes_nothing(monkeypatch, rng):
    """Keys 0:stop + 1 add one key after every query of the block, which the diagonal mask
    removes: the slice is the smallest correct one, not the only one (a variant the causal
    tests must not, and do not, reject)."""
    mutate(monkeypatch, "attention", "min(rows.stop, m) if causal", "min(rows.stop + 1, m) if causal")
    test_causal_blocks_equal_the_whole_masked_computation(rng, monkeypatch, 300, 300)


def test_large_scores_need_the_shift_by_the_row_maximum(monkeypatch):
    """Scores near 1000: exp(s) overflows without the shift (a ValueError, or NaN), exp(s - max s)
    does not, and the answer is the softmax average."""
    q, k, v = np.array([[40.0]]), np.array([[50.0], [49.9]]), np.array([[1.0], [3.0]])
    want = attention_loop(q, k, v, scale=0.5)[1]
    np.testing.assert_allclose(attention(q, k, v, scale=0.5), want, rtol=1e-12)
    mutate(monkeypatch, "_shifted_exp", "x -= np.where(np.isfinite(c), c, 0)", "pass")  # as attention imports it
    with raises_message(ValueError, says="overflow"):
        attention(q, k, v, scale=0.5)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_scores_that_overflow_are_an_error_that_names_them(dtype):
    """|q . k| beyond the dtype, of either sign: a ValueError naming the scores and the remedy,
    and no RuntimeWarning.  Negative scores overflow to -inf, which would otherwise read as
    "masked" and give a silent row of zeros."""
    import warnings

    big = float(np.sqrt(np.finfo(dtype).max)) * 2
    q = np.array([[big, 0.0]], dtype)
    for sign in (1.0, -1.0):
        k = np.array([[sign * big, 0.0], [sign * big, 1.0]], dtype)
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            facts = dict(names=["q", "k", "scale", "bias"], dtypes=[dtype], says="overflow", remedy=("shrink", "q", "k", "bias"))
            with raises_message(ValueError, "scores", **facts):
                attention(q, k, np.ones((2, 1), dtype), scale=1.0)
            with raises_message(ValueError, "scores", **facts):
                attention_weights(q, k, scale=1.0)


def test_negative_overflow_without_the_check_is_a_silent_row_of_zeros(monkeypatch):
    """The wrong variant the check above rejects: without it the -inf scores read as masked keys."""
    monkeypatch.setattr(_module(), "_check_scores", lambda *args: None)
    q, k = np.array([[1e20, 0.0]], np.float32), np.array([[-1e20, 0.0], [-1e20, 1.0]], np.float32)
    assert attention(q, k, np.ones((2, 1), np.float32), scale=1.0).tolist() == [[0.0]]


@given(seeds, st.integers(1, 8), st.floats(-30, 30))
def test_the_score_bound_holds(seed, d, log_size):
    """k max|q| max|k| bounds every |q_i . k_j| (float64 scores of float64 input), so below half
    the dtype's largest number no score has overflowed and the full check can be skipped."""
    rng = np.random.default_rng(seed)
    q, k = rng.normal(size=(3, d)) * 2.0**log_size, rng.normal(size=(4, d))
    assert np.abs(q @ k.T).max() <= _module()._score_bound(q, k) * (1 + 1e-12)


def test_the_full_check_runs_only_where_the_bound_cannot_decide(monkeypatch):
    """Scores of ordinary size skip the two reductions over the scores; a bias (which may hold -inf)
    or scores near the dtype's limit take them.  A wrong bound (say with max k instead of max|k|)
    would skip them for negative keys of any size: the overflow test above rejects that."""
    module, calls = _module(), []
    full_check = module._all_finite
    monkeypatch.setattr(module, "_all_finite", lambda a: calls.append(a.shape) or full_check(a))
    q, k, v = np.ones((3, 2)), np.ones((4, 2)), np.ones((4, 1))
    attention(q, k, v)
    assert calls == [(1, 3, 1)] or calls == [(3, 1)]  # the output's check only, not the scores'
    calls.clear()
    attention(q, k, v, bias=np.zeros((3, 4)))
    assert (3, 4) in calls
    calls.clear()
    attention(q * 8e153, k * 8e153, v, scale=1.0)  # q . k = 1.28e308: finite, beyond half the largest
    assert (3, 4) in calls


def test_masked_and_future_scores_may_overflow():
    """A score no query may attend is never used: its overflow is not an error (mask, causal, or a
    bias of -inf), and the answer is that of the remaining keys."""
    big = 1e20
    q = np.array([[0.0, 1.0], [big, 1.0]], np.float32)
    k = np.array([[0.0, 1.0], [big, 0.0]], np.float32)  # q_1 . k_1 = 1e40: beyond float32
    v = np.array([[2.0], [5.0]], np.float32)
    keep = np.array([[True, True], [True, False]])
    np.testing.assert_allclose(attention(q, k, v, mask=keep, scale=1.0), [[3.5 - 1.5 * math.tanh(0.5)], [2.0]], rtol=1e-6)
    np.testing.assert_allclose(attention(q, k, v, bias=np.where(keep, 0, -np.inf), scale=1.0),
                               attention(q, k, v, mask=keep, scale=1.0))
    with raises_message(ValueError, "scores", says="overflow"):
        attention(q, k, v, scale=1.0)  # allowed now: the row of query 1 overflows
    q2 = np.array([[0.0, 1.0], [1.0, 1.0]], np.float32)
    k2 = np.array([[0.0, 1.0], [big, 0.0]], np.float32)
    np.testing.assert_allclose(attention(q2 * [[big], [1.0]], k2, v, causal=True, scale=1.0)[0], [2.0])


@pytest.mark.parametrize("normalize", ["softmax", "none", "relu2"])
def test_an_output_beyond_the_dtype_is_an_error(normalize):
    import warnings

    f32 = np.float32
    q, k = np.ones((1, 2), f32), np.ones((2, 2), f32)
    v = np.full((2, 1), 3e38, f32)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with raises_message(ValueError, "output", dtypes=["float32"], says="overflow", remedy=("shrink", "v", "reweight")) as error:
            attention(q, k, v, reweight=np.full((1, 2), 4.0, f32), normalize=normalize)
    # and float64, the wider dtype, is advised; the cause "exp without a denominator" is named for
    # normalize="none" only
    assert_message(error, remedy=("wider", "float64"))
    assert ("normalize" in str(error.value)) == (normalize == "none")


def test_an_output_beyond_float64_gets_no_advice_to_widen():
    """float64 has no wider dtype to suggest: the message ends at 'reweight down'."""
    q, k, v = np.ones((1, 2)), np.ones((2, 2)), np.full((2, 1), 1e308)
    with raises_message(ValueError, "output", dtypes=["float64"], says="overflow", remedy=("shrink", "v", "reweight"),
                        no_remedy=("wider", "float64")):
        attention(q, k, v, reweight=np.full((1, 2), 4.0))


def test_exp_without_a_denominator_beyond_the_dtype_is_an_error():
    """The message names the cause and what overflowed: the weights (there is no output here)."""
    with raises_message(ValueError, "weight", names=["normalize"], values=["none"], dtypes=["float64"], says="overflow"):
        attention_weights(np.array([[30.0]]), np.array([[30.0]]), normalize="none")  # exp(900)


def test_weights_with_an_overflow_under_a_bias_of_minus_inf_raise_no_warning():
    """A score that overflows where the bias is -inf is masked: inf + -inf is nan, silently made
    -inf, with no RuntimeWarning from numpy (invalid value) and the remaining key's weight 1."""
    import warnings

    q, k = np.array([[1e200, 1.0]]), np.array([[1e200, 0.0], [0.0, 1.0]])  # q . k_0 = inf in float64
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        weights = attention_weights(q, k, bias=np.array([[-np.inf, 0.0]]), scale=1.0)
    assert weights.tolist() == [[0.0, 1.0]]


@pytest.mark.parametrize("value", [True, False, np.bool_(True), np.array(False)])
def test_a_scalar_mask_broadcasts(rng, value):
    q, k, v = rng.normal(size=(2, 3, 4)), rng.normal(size=(2, 5, 4)), rng.normal(size=(2, 5, 2))
    if bool(value):
        np.testing.assert_array_equal(attention(q, k, v, mask=value), attention(q, k, v))
        np.testing.assert_array_equal(attention_weights(q, k, mask=value, causal=True), attention_weights(q, k, causal=True))
    else:
        assert not np.any(attention(q, k, v, mask=value)) and not np.any(attention_weights(q, k, mask=value))


def test_one_block_of_scores_exists_at_a_time():
    """Peak memory of 2,048 queries over 2,048 keys (float32): far below one n x n score matrix
    (16 MiB): one block of 256 x 2,048 scores (2 MiB, an eighth of it) and the output."""
    from strength import traced_peak

    rng = np.random.default_rng(0)
    n = 2048
    q, k, v = (rng.normal(size=(n, 16)).astype(np.float32) for _ in range(3))
    _, peak = traced_peak(attention, q, k, v)
    assert peak < 0.2 * n * n * 4, peak / (n * n * 4)


def test_a_causal_block_computes_no_key_after_its_last_query(monkeypatch, rng):
    """Chapter 1's claim, measured: with causal=True, blocks of 256 rows over 600 queries and keys
    see 256, 512 and 600 keys (without causal, 600 each). Rows of one query at a time, or every key
    in every block, would give the same numbers and more work: only the key counts tell them apart."""
    module, seen = _module(), []
    rows_of = module._attention_rows
    monkeypatch.setattr(module, "_attention_rows", lambda q, k, *args, **kw: seen.append(k.shape[-2]) or rows_of(q, k, *args, **kw))
    monkeypatch.setattr(module, "BLOCK_ROWS", 256)
    q, k, v = rng.normal(size=(600, 4)), rng.normal(size=(600, 4)), rng.normal(size=(600, 2))
    attention(q, k, v, causal=True)
    assert seen == [256, 512, 600]
    seen.clear()
    attention(q, k, v)
    assert seen == [600, 600, 600]


@pytest.mark.parametrize("batched", [False, True])
def test_the_score_bound_counts_the_features_not_the_queries(batched):
    """One query of k = 4 features, each product |q_i k_i| = max/3: every single product fits, their
    sum (4/3 of the largest float32) overflows. A bound with the number of queries (1) in place of
    the number of features would call the scores safe and return a silent row of zeros."""
    big = np.float32(math.sqrt(np.finfo(np.float32).max / 3))
    q, k = np.full((1, 4), big, np.float32), np.full((2, 4), -big, np.float32)
    v = np.ones((2, 1), np.float32)
    if batched:
        q, k, v = q[None], k[None], v[None]
    with raises_message(ValueError, "scores", dtypes=["float32"], says="overflow"):
        attention(q, k, v, scale=1.0)


def test_the_overflow_message_suggests_float64_only_below_float64():
    """float32 scores that overflow: 'or pass float64 arrays'; float64 ones: no such advice."""
    for dtype, wider in ((np.float32, True), (np.float64, False)):
        big = float(np.sqrt(np.finfo(dtype).max)) * 2
        q, k = np.array([[big, 0.0]], dtype), np.array([[big, 0.0], [big, 1.0]], dtype)
        advice = {"remedy" if wider else "no_remedy": ("wider", "float64")}
        with raises_message(ValueError, "scores", remedy=("shrink", "q", "k", "bias")) as error:
            attention(q, k, np.ones((2, 1), dtype), scale=1.0)
        assert_message(error, **advice)


def test_attention_with_an_overflow_under_a_bias_of_minus_inf_raises_no_warning():
    """As for attention_weights: inf + -inf is nan, made -inf (masked) without a RuntimeWarning."""
    import warnings

    q, k = np.array([[1e200, 1.0]]), np.array([[1e200, 0.0], [0.0, 1.0]])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        out = attention(q, k, np.array([[5.0], [2.0]]), bias=np.array([[-np.inf, 0.0]]), scale=1.0)
    assert out.tolist() == [[2.0]]
