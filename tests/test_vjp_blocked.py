"""The blocked backward of attention: equal to the dense formula, to finite differences, and lean in memory.

Independent routes: the dense formula written out here with numpy (the whole ``(n, m)``
weights built from ``exp`` and a row sum, never attncore's code), and central finite
differences of :func:`attncore.attention`.  ``BLOCK_ROWS`` is set small so that the toy
sizes cross many block boundaries (causal blocks with ``n != m`` included).
"""

from __future__ import annotations

import tracemalloc

import numpy as np
import pytest

import attncore as ac
import attncore._vjp as vjp_module


def dense_attention_vjp(q, k, v, g, mask=None, bias=None, scale=None):
    """The textbook backward over the whole (n, m) matrices, in float64."""
    scale = 1 / np.sqrt(q.shape[-1]) if scale is None else scale
    s = scale * q @ np.swapaxes(k, -1, -2) + (0 if bias is None else bias)
    if mask is not None:
        s = np.where(mask, s, -np.inf)
    e = np.exp(s - s.max(axis=-1, keepdims=True))
    a = e / e.sum(axis=-1, keepdims=True)
    dv = np.swapaxes(a, -1, -2) @ g
    da = g @ np.swapaxes(v, -1, -2)
    ds = a * (da - (da * a).sum(axis=-1, keepdims=True))
    return scale * ds @ k, scale * np.swapaxes(ds, -1, -2) @ q, dv


@pytest.fixture(params=[1, 3, 256])
def block_rows(request, monkeypatch):
    monkeypatch.setattr(vjp_module, "BLOCK_ROWS", request.param)
    return request.param


@pytest.mark.parametrize("n, m", [(7, 7), (5, 9), (9, 4)])
@pytest.mark.parametrize("case", ["plain", "causal", "mask", "bias"])
def test_blocked_vjp_equals_the_dense_formula(block_rows, n, m, case):
    rng = np.random.default_rng(n * 100 + m)
    q, k, v, g = (rng.standard_normal(s) for s in ((2, n, 3), (2, m, 3), (2, m, 4), (2, n, 4)))
    mask = bias = None
    if case == "causal":
        mask = np.tril(np.ones((n, m), bool))
    elif case == "mask":
        mask = rng.random((2, n, m)) < 0.7
        mask[:, :, 0] = True  # every query keeps a key
    elif case == "bias":
        bias = rng.standard_normal((n, m))
    kwargs = dict(causal=True) if case == "causal" else dict(mask=mask, bias=bias)
    got = ac.attention_vjp(q, k, v, g, **kwargs)
    want = dense_attention_vjp(q, k, v, g, mask=mask, bias=bias)
    for name, a, b in zip(("dq", "dk", "dv"), got, want):
        assert np.allclose(a, b, rtol=1e-12, atol=1e-13), name


def test_blocked_vjp_sums_broadcast_batch_axes(block_rows):
    rng = np.random.default_rng(1)
    q, k, v, g = (rng.standard_normal(s) for s in ((3, 6, 2), (6, 2), (1, 6, 5), (3, 6, 5)))
    dq, dk, dv = ac.attention_vjp(q, k, v, g)
    want = dense_attention_vjp(q, np.broadcast_to(k, (3, 6, 2)), np.broadcast_to(v, (3, 6, 5)), g)
    assert dq.shape == q.shape and dk.shape == k.shape and dv.shape == v.shape
    assert np.allclose(dq, want[0]) and np.allclose(dk, want[1].sum(0)) and np.allclose(dv, want[2].sum(0, keepdims=True))


def test_blocked_vjp_matches_finite_differences(block_rows):
    rng = np.random.default_rng(2)
    q, k, v, g = (rng.standard_normal(s) for s in ((8, 3), (6, 3), (6, 2), (8, 2)))
    grads = ac.attention_vjp(q, k, v, g, causal=True)
    loss = lambda *a: float(np.sum(g * ac.attention(*a, causal=True)))  # noqa: E731
    for i, grad in enumerate(grads):
        u = rng.standard_normal(grad.shape)
        step = lambda t, i=i, u=u: [a + t * u if j == i else a for j, a in enumerate((q, k, v))]  # noqa: E731
        fd = [(loss(*step(h)) - loss(*step(-h))) / (2 * h) for h in (1e-3, 5e-4)]
        fd = (4 * fd[1] - fd[0]) / 3
        assert abs(fd - np.sum(grad * u)) < 1e-8 * max(1.0, abs(fd))


def test_the_kept_output_identity_gives_the_same_gradients(block_rows):
    """rowsum(dA * A) = rowsum(G * O): the backward that keeps O agrees with the one that does not."""
    rng = np.random.default_rng(3)
    q, k, v, g = (rng.standard_normal(s) for s in ((7, 3), (5, 3), (5, 4), (7, 4)))
    qs = q / np.sqrt(3)
    without = vjp_module._attention_backward(qs, k, v, g, None, None, 1 / np.sqrt(3), False)
    kept = vjp_module._attention_backward(qs, k, v, g, None, None, 1 / np.sqrt(3), False, out=ac.attention(q, k, v))
    wrong = vjp_module._attention_backward(qs, k, v, g, None, None, 1 / np.sqrt(3), False, out=np.zeros((7, 4)))
    assert all(np.allclose(a, b, rtol=1e-12, atol=1e-14) for a, b in zip(without, kept))
    assert not np.allclose(without[0], wrong[0], atol=1e-3)  # dropping the term (delta = 0) is caught


def test_blocked_vjp_never_holds_an_n_by_m_array():
    """Two blocks' worth of weights (the weights and dS of one block of 256 rows) and the n x d arrays:
    0.25 + 0.06 = 0.31 of one n x m matrix here (512/n + 8d/m), where the dense formula holds three whole ones."""
    n = 2048  # eight blocks of 256 rows
    rng = np.random.default_rng(4)
    q, k, v, g = (rng.standard_normal((n, 16)).astype(np.float32) for _ in range(4))
    tracemalloc.start()
    ac.attention_vjp(q, k, v, g)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert peak < 0.4 * n * n * 4, f"peak {peak / 2**20:.1f} MiB, one n x m float32 matrix is {n * n * 4 / 2**20:.0f} MiB"


@pytest.mark.parametrize("n, m", [(64, 64), (40, 64), (64, 40)])
def test_causal_blocks_skip_the_keys_after_their_last_query(monkeypatch, n, m):
    """Masked weights are 0, so their dS is 0: a causal block reads only the keys up to its last query
    (top-left alignment), about half of the n x m scores at n = m, and gets the dense formula's gradients."""
    monkeypatch.setattr(vjp_module, "BLOCK_ROWS", 8)
    widths, weights = [], vjp_module._block_weights

    def spy(q, k, mask, bias, rows, keys, first):
        widths.append((rows.stop - rows.start) * (keys.stop - keys.start))
        return weights(q, k, mask, bias, rows, keys, first)

    monkeypatch.setattr(vjp_module, "_block_weights", spy)
    rng = np.random.default_rng(5)
    q, k, v, g = (rng.standard_normal(s) for s in ((n, 3), (m, 3), (m, 2), (n, 2)))
    got = ac.attention_vjp(q, k, v, g, causal=True)
    want = dense_attention_vjp(q, k, v, g, mask=np.tril(np.ones((n, m), bool)))
    assert all(np.allclose(a, b, rtol=1e-12, atol=1e-13) for a, b in zip(got, want))
    blocks = range(0, n, 8)  # the scores a causal block needs: its 8 rows times the keys up to its last query
    assert sum(widths) == sum(8 * min(start + 8, m) for start in blocks)
    assert sum(widths) < (0.6 if n <= m else 0.8) * n * m  # with n > m the rows past m read every key
    widths.clear()
    ac.attention_vjp(q, k, v, g)
    assert sum(widths) == n * m  # without the mask every block reads every key
