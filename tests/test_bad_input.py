"""Bad input and edge cases for every name in ``attncore.__all__``, table-driven.

Three tables, each keyed by the exported name:

* ``VALID``: a builder of one ordinary valid call (keyword arguments) in a given
  float dtype; the generator below derives invalid calls from it by the roles
  in ``ROLES`` (arrays that must be finite, counts, real scalars, flags, choices,
  masks), and each must raise ``ValueError``/``TypeError`` naming the argument,
  as a whole word, in a message shorter than ``messages.MAX_MESSAGE`` characters;
* ``INVALID``: hand-written invalid calls (the issue's reproducers and the
  mismatches between two arguments), with the exception type and the name(s)
  the message must contain;
* ``EDGE``: edge cases whose results are compared with an independent reference
  written here (plain loops or closed forms in float64 / ``np.longdouble``),
  never with the code under test.

A new export without an entry in ``VALID``, ``INVALID`` and ``EDGE`` fails
``test_every_export_has_cases``.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

import attncore as ac
from messages import assert_message

DTYPES = (np.float16, np.float32, np.float64)
L = np.longdouble


def rn(*shape, dtype=np.float64, scale=1.0, seed=0):
    return (scale * np.random.default_rng(seed + len(shape) * 7 + sum(shape)).standard_normal(shape)).astype(dtype)


def gen():
    return np.random.default_rng(0)


def _quad(params):
    """loss (p - 3)^2 summed, and its gradient: the trainers' test problem."""
    return float(np.sum((params[0] - 3.0) ** 2)), [2 * (params[0] - 3.0)]


# --------------------------------------------------------------------------------------
# Independent references: plain loops and closed forms, in np.longdouble.
# --------------------------------------------------------------------------------------
def ref_softmax_row(row, keep=None, temperature=1.0):
    row = np.asarray(row, L)
    keep = np.ones(row.shape, bool) if keep is None else np.array(keep, bool)
    keep &= row > -np.inf
    out = np.zeros(row.shape, L)
    if keep.any():
        z = (row[keep] - row[keep].max()) / L(temperature)
        e = np.array([np.exp(t) for t in z], L)
        out[keep] = e / e.sum()
    return out


def ref_scores(q, k, scale=None, bias=None):
    q, k = np.asarray(q, L), np.asarray(k, L)
    n, m, width = q.shape[0], k.shape[0], q.shape[1]
    scale = L(1) / np.sqrt(L(width)) if scale is None else L(scale)
    s = np.zeros((n, m), L)
    for i in range(n):
        for j in range(m):
            s[i, j] = scale * sum(q[i, t] * k[j, t] for t in range(width))
    if bias is not None:
        s = s + np.broadcast_to(np.asarray(bias, L), (n, m))
    return s


def ref_weights(q, k, mask=None, bias=None, scale=None, normalize="softmax"):
    s = ref_scores(q, k, scale, bias)
    n, m = s.shape
    keep = np.ones((n, m), bool) if mask is None else np.broadcast_to(mask, (n, m))
    w = np.zeros((n, m), L)
    for i in range(n):
        alive = keep[i] & (s[i] > -np.inf)
        if normalize == "relu2":
            w[i] = [max(s[i, j], 0) ** 2 / m if alive[j] else 0 for j in range(m)]
            continue
        if not alive.any():
            continue
        e = np.array([np.exp(s[i, j] - (0 if normalize == "none" else s[i][alive].max())) if alive[j] else 0 for j in range(m)], L)
        if normalize == "softmax":
            w[i] = e / e.sum()
        elif normalize == "l2":
            w[i] = e / np.sqrt((e * e).sum())
        else:
            w[i] = e
    return w


def ref_attention(q, k, v, reweight=None, **kw):
    w = ref_weights(q, k, **kw)
    if reweight is not None:
        w = w * np.broadcast_to(np.asarray(reweight, L), w.shape)
    v = np.asarray(v, L)
    return np.array([[sum(w[i, j] * v[j, c] for j in range(v.shape[0])) for c in range(v.shape[1])] for i in range(w.shape[0])], L)


def ref_matmul(a, b):
    a, b = np.asarray(a, L), np.asarray(b, L)
    return np.array([[sum(a[i, t] * b[t, j] for t in range(a.shape[1])) for j in range(b.shape[1])] for i in range(a.shape[0])], L)


def ref_standardize_rows(x, eps, rms=False):
    x = np.asarray(x, L)
    out = np.zeros(x.shape, L)
    for i in range(x.shape[0]):
        mu = L(0) if rms else sum(x[i]) / x.shape[1]
        var = sum((t - mu) ** 2 for t in x[i]) / x.shape[1]
        out[i] = (x[i] - mu) / np.sqrt(var + L(eps))
    return out


def close(got, want, dtype=np.float64, factor=64):
    """Compare with a tolerance derived from the dtype of the computation."""
    want = np.asarray(want, L)
    got = np.asarray(got)
    assert got.shape == want.shape, (got.shape, want.shape)
    if got.dtype == bool or want.size == 0:
        assert np.array_equal(got, want.astype(got.dtype))
        return
    tol = factor * np.finfo(dtype).eps * max(1.0, float(np.max(np.abs(want), initial=0)))
    assert np.all(np.isfinite(got.astype(np.float64)) == np.isfinite(want)), got
    finite = np.isfinite(want)
    assert np.array_equal(got.astype(L)[~finite], want[~finite]), (got, want)
    err = np.abs(got.astype(L)[finite] - want[finite])
    assert np.all(err <= tol), f"max error {float(np.max(err))} > tol {tol}"


# --------------------------------------------------------------------------------------
# VALID: one ordinary call per export and dtype (the base of the generated invalid calls).
# --------------------------------------------------------------------------------------
def _valid(name, dt):
    q, k, v, x = rn(3, 4, dtype=dt), rn(5, 4, dtype=dt), rn(5, 2, dtype=dt), rn(4, 6, dtype=dt)
    om = rn(8, 4)
    table = {
        "softmax": lambda: dict(x=rn(3, 5, dtype=dt), temperature=0.7, mask=np.ones((3, 5), bool)),
        "attention": lambda: dict(q=q, k=k, v=v, bias=rn(3, 5), scale=0.3, reweight=rn(3, 5), mask=np.ones((3, 5), bool),
                                  causal=True),
        "attention_weights": lambda: dict(q=q, k=k, bias=rn(3, 5), scale=0.3, mask=np.ones((3, 5), bool), causal=True),
        "layer_norm": lambda: dict(x=x, gamma=rn(6), beta=rn(6), eps=1e-3),
        "rms_norm": lambda: dict(x=x, gamma=rn(6), eps=1e-3),
        "instance_norm": lambda: dict(x=x, gamma=rn(6), beta=rn(6), eps=1e-3),
        "batch_norm": lambda: dict(x=rn(2, 4, 6, dtype=dt), gamma=rn(6), beta=rn(6), eps=1e-3),
        "linear": lambda: dict(x=x, w=rn(6, 3, dtype=dt), b=rn(3)),
        "ffn": lambda: dict(x=x, w1=rn(6, 8, dtype=dt), b1=rn(8, dtype=dt), w2=rn(8, 6, dtype=dt), b2=rn(6, dtype=dt)),
        "multi_head_attention": lambda: dict(x=x, w_q=rn(6, 6, dtype=dt), w_k=rn(6, 6, dtype=dt), w_v=rn(6, 6, dtype=dt),
                                             w_o=rn(6, 6, dtype=dt), num_heads=2, b_q=rn(6, dtype=dt), context=rn(5, 6, dtype=dt),
                                             mask=np.ones((4, 5), bool), causal=True),
        "transformer_block": lambda: dict(x=x, params=ac.init_block_params(6, 8, gen(), dtype=dt), num_heads=2,
                                          placement="pre", mask=np.ones((4, 4), bool)),
        "init_block_params": lambda: dict(d=6, d_ff=8, rng=gen(), dtype=dt, bias=True),
        "split_heads": lambda: dict(x=x, num_heads=3),
        "merge_heads": lambda: dict(x=rn(2, 4, 3, dtype=dt)),
        "sinusoidal_encoding": lambda: dict(n=5, d=6, base=100.0),
        "rope": lambda: dict(x=x, positions=np.arange(4.0), base=50.0, convention="half"),
        "rope_frequencies": lambda: dict(d=6, base=50.0),
        "rope_permutation": lambda: dict(d=6),
        "t5_relative_bucket": lambda: dict(relative_position=np.arange(-10, 10), bidirectional=True, num_buckets=32, max_distance=128),
        "alibi_slopes": lambda: dict(num_heads=8),
        "relative_bias": lambda: dict(n=3, m=5, table_or_fn=rn(7, dtype=dt)),
        "causal_mask": lambda: dict(n=3, m=4),
        "matmul_flops": lambda: dict(a=2, b=3, c=4),
        "block_flops": lambda: dict(n=4, d=8, m=5, num_heads=2, d_ff=16),
        "toeplitz": lambda: dict(diagonals=rn(5, dtype=dt)),
        "permutation_matrix": lambda: dict(perm=[2, 0, 1]),
        "inverse_permutation": lambda: dict(perm=[2, 0, 1]),
        "permute_tokens": lambda: dict(x=x, perm=[3, 1, 0, 2]),
        "gaussian_features": lambda: dict(m=5, d=3, rng=gen(), orthogonal=True),
        "positive_random_features": lambda: dict(x=x, omega=rn(5, 6), stabilizer="row"),
        "trig_random_features": lambda: dict(x=x, omega=rn(5, 6)),
        "taylor_features": lambda: dict(x=x, order=2, max_entries=10_000),
        "exp_limit_features": lambda: dict(x=rn(3, 2, dtype=dt), n=2, max_entries=10_000),
        "linear_attention": lambda: dict(q=q, k=k, v=v, feature_map=lambda z: ac.positive_random_features(z, om), causal=False, chunk=2),
        "linear_attention_weights": lambda: dict(q=q, k=k, feature_map=lambda z: ac.positive_random_features(z, om), causal=False),
        "linear_readout": lambda: dict(features=rn(6, 2, dtype=dt), targets=np.arange(6.0), rcond=1e-10),
        "probe_floor": lambda: dict(n=10),
        "probe_hidden_states": lambda: dict(n=3, rng=gen(), layers=1, d=8, num_heads=2, d_ff=8, scheme="alibi",
                                            normalize="softmax", causal=False, special_tokens=False, shaw_clip=2),
        "shaw_relative_embeddings": lambda: dict(n=3, m=4, table=rn(5, 2, dtype=dt)),
        "shaw_attention": lambda: dict(q=q, k=k, v=v, rel_k=rn(3, 5, 4, dtype=dt), rel_v=rn(3, 5, 2, dtype=dt), scale=0.5,
                                       mask=np.ones((3, 5), bool), normalize="softmax"),
        "dense_features": lambda: dict(x=x, w1=rn(6, 5, dtype=dt), w2=rn(5, 3, dtype=dt), b1=rn(5), b2=rn(3)),
        "dense_scores": lambda: dict(x=x, w1=rn(6, 5, dtype=dt), w2=rn(5, 4, dtype=dt), b1=rn(5), b2=rn(4)),
        "random_scores": lambda: dict(r=rn(4, 4, dtype=dt), n=4),
        "factorized_random_scores": lambda: dict(r1=rn(4, 2, dtype=dt), r2=rn(4, 2, dtype=dt), n=4),
        "factorized_dense_scores": lambda: dict(f_a=rn(6, 2, dtype=dt), f_b=rn(6, 3, dtype=dt), tiling="repeat", form="transposed"),
        "mixture_weights": lambda: dict(logits=np.array([0.3, -1.0, 2.0], dt)),
        "mixture_scores": lambda: dict(scores=[rn(3, 3, dtype=dt), rn(3, 3, dtype=dt)], logits=np.array([0.2, -0.4])),
        "synthesizer_attention": lambda: dict(x=x, scores=rn(4, 4, dtype=dt), w_v=rn(6, 2, dtype=dt), mask=np.ones((4, 4), bool)),
        "synthesizer_costs": lambda: dict(n=16, d=8, k=4, v=4, f=8, a=4, rank=2),
        "BlockParams": lambda: dict(**{f: rn(2, 2) for f in ac.BlockParams._fields[:6]}),
        "NORMALIZERS": None,
        # the backward pass (attncore/_vjp.py) and the trainers (attncore/_train.py)
        "softmax_vjp": lambda: dict(x=rn(3, 5, dtype=dt), g=rn(3, 5, dtype=dt, seed=1), axis=-1),
        "normalize_vjp": lambda: dict(s=rn(3, 5, dtype=dt), g=rn(3, 5, dtype=dt, seed=1), normalize="l2", mask=np.ones((3, 5), bool)),
        "attention_vjp": lambda: dict(q=q, k=k, v=v, g=rn(3, 2, dtype=dt), bias=rn(3, 5), scale=0.3, mask=np.ones((3, 5), bool),
                                      causal=True),
        "attention_bias_vjp": lambda: dict(q=q, k=k, v=v, g=rn(3, 2, dtype=dt), bias=rn(3, 5), scale=0.3, normalize="relu2",
                                           mask=np.ones((3, 5), bool), causal=True),
        "relative_bias_vjp": lambda: dict(g=rn(3, 5, dtype=dt)),
        "rope_vjp": lambda: dict(g=x, positions=np.arange(4.0), base=50.0, convention="half"),
        "layer_norm_vjp": lambda: dict(x=x, g=rn(4, 6, dtype=dt, seed=1), gamma=rn(6), beta=rn(6), eps=1e-3),
        "linear_vjp": lambda: dict(x=x, w=rn(6, 3, dtype=dt), g=rn(4, 3, dtype=dt)),
        "ffn_vjp": lambda: dict(x=x, w1=rn(6, 8, dtype=dt), b1=rn(8, dtype=dt), w2=rn(8, 6, dtype=dt), g=rn(4, 6, dtype=dt, seed=1)),
        "shaw_attention_vjp": lambda: dict(q=q, k=k, v=v, rel_k=rn(3, 5, 4, dtype=dt), rel_v=rn(3, 5, 2, dtype=dt), g=rn(3, 2, dtype=dt),
                                           scale=0.5, mask=np.ones((3, 5), bool), normalize="softmax"),
        "shaw_relative_embeddings_vjp": lambda: dict(g=rn(3, 4, 2, dtype=dt), clip=2),
        "multi_head_attention_vjp": lambda: dict(x=x, w_q=rn(6, 6, dtype=dt), w_k=rn(6, 6, dtype=dt), w_v=rn(6, 6, dtype=dt),
                                                 w_o=rn(6, 6, dtype=dt), num_heads=2, g=rn(4, 6, dtype=dt, seed=1), b_q=rn(6, dtype=dt),
                                                 context=rn(5, 6, dtype=dt), mask=np.ones((4, 5), bool), causal=True),
        "transformer_block_vjp": lambda: dict(x=x, params=ac.init_block_params(6, 8, gen(), dtype=dt), num_heads=2, g=rn(4, 6, dtype=dt, seed=1),
                                              placement="branch", mask=np.ones((4, 4), bool)),
        "gradient_descent": lambda: dict(loss_and_grad=_quad, params=[np.zeros(2)], steps=3, lr=0.1),
        "adam": lambda: dict(loss_and_grad=_quad, params=[np.zeros(2)], steps=3, lr=0.1, beta1=0.9, beta2=0.99, eps=1e-8),
        # the intervals of trained results (attncore/_stats.py)
        "wilson_interval": lambda: dict(successes=np.array([0, 7, 20]), trials=20, confidence=0.9),
        "mean_interval": lambda: dict(x=rn(4, 6, dtype=dt), axis=0, confidence=0.9),
        "t_quantile": lambda: dict(df=4.5, confidence=0.9),
    }
    return table[name]


def valid_call(name, dt=np.float64):
    builder = _valid(name, dt)
    return None if builder is None else builder()


#: Argument roles, from which invalid calls are generated.  "arrays": must be finite
#: (NaN, +inf and -inf rejected); "neg_inf": -inf allowed (a documented "masked");
#: "counts": true integers; "scalars": real numbers checked in the dtype of the
#: computation; "flags": True/False; "choices": one of a few strings; "mask": boolean.
ROLES = {
    "softmax": dict(neg_inf=["x"], scalars=["temperature"], mask=True),
    "attention": dict(arrays=["q", "k", "v", "reweight"], neg_inf=["bias"], scalars=["scale"], choices=["normalize"], mask=True,
                      flags=["causal"]),
    "attention_weights": dict(arrays=["q", "k"], neg_inf=["bias"], scalars=["scale"], choices=["normalize"], mask=True,
                              flags=["causal"]),
    "layer_norm": dict(arrays=["x", "gamma", "beta"], scalars=["eps"]),
    "rms_norm": dict(arrays=["x", "gamma"], scalars=["eps"]),
    "instance_norm": dict(arrays=["x", "gamma", "beta"], scalars=["eps"]),
    "batch_norm": dict(arrays=["x", "gamma", "beta"], scalars=["eps"]),
    "linear": dict(arrays=["x", "w", "b"]),
    "ffn": dict(arrays=["x", "w1", "b1", "w2", "b2"]),
    "multi_head_attention": dict(arrays=["x", "w_q", "w_k", "w_v", "w_o", "b_q", "context"], counts=["num_heads"], mask=True,
                                 flags=["causal"]),
    "transformer_block": dict(arrays=["x"], counts=["num_heads"], choices=["placement"], mask=True),
    "init_block_params": dict(counts=["d", "d_ff"], flags=["bias"]),
    "split_heads": dict(arrays=["x"], counts=["num_heads"]),
    "merge_heads": dict(arrays=["x"]),
    "sinusoidal_encoding": dict(counts=["n", "d"], scalars=["base"]),
    "rope": dict(arrays=["x", "positions"], scalars=["base"], choices=["convention"]),
    "rope_frequencies": dict(counts=["d"], scalars=["base"]),
    "rope_permutation": dict(counts=["d"]),
    "t5_relative_bucket": dict(counts=["num_buckets", "max_distance"], flags=["bidirectional"]),
    "alibi_slopes": dict(counts=["num_heads"]),
    "relative_bias": dict(counts=["n", "m"]),
    "causal_mask": dict(counts=["n", "m"]),
    "matmul_flops": dict(counts=["a", "b", "c"]),
    "block_flops": dict(counts=["n", "d", "m", "num_heads", "d_ff"]),
    "toeplitz": dict(arrays=["diagonals"]),
    "permutation_matrix": dict(),
    "inverse_permutation": dict(),
    "permute_tokens": dict(arrays=["x"]),
    "gaussian_features": dict(counts=["m", "d"], flags=["orthogonal"]),
    "positive_random_features": dict(arrays=["x", "omega"], choices=["stabilizer"]),
    "trig_random_features": dict(arrays=["x", "omega"]),
    "taylor_features": dict(arrays=["x"], counts=["order", "max_entries"]),
    "exp_limit_features": dict(arrays=["x"], counts=["n", "max_entries"]),
    "linear_attention": dict(arrays=["q", "k", "v"], counts=["chunk"], flags=["causal"]),
    "linear_attention_weights": dict(arrays=["q", "k"], flags=["causal"]),
    "linear_readout": dict(arrays=["features", "targets"]),
    "probe_floor": dict(counts=["n"]),
    "probe_hidden_states": dict(counts=["n", "layers", "d", "num_heads", "d_ff", "shaw_clip"], flags=["causal", "special_tokens"],
                                choices=["scheme", "normalize"]),
    "shaw_relative_embeddings": dict(arrays=["table"], counts=["n", "m"]),
    "shaw_attention": dict(arrays=["q", "k", "v", "rel_k", "rel_v"], scalars=["scale"], choices=["normalize"], mask=True),
    "dense_features": dict(arrays=["x", "w1", "w2", "b1", "b2"]),
    "dense_scores": dict(arrays=["x", "w1", "w2", "b1", "b2"]),
    "random_scores": dict(neg_inf=["r"], counts=["n"]),
    "factorized_random_scores": dict(arrays=["r1", "r2"], counts=["n"]),
    "factorized_dense_scores": dict(arrays=["f_a", "f_b"], choices=["tiling", "form"]),
    "mixture_weights": dict(arrays=["logits"]),
    "mixture_scores": dict(arrays=["logits"]),
    "synthesizer_attention": dict(arrays=["x", "w_v"], neg_inf=["scores"], mask=True),
    "synthesizer_costs": dict(counts=["n", "d", "k", "v", "f", "a", "rank"]),
    "BlockParams": dict(),
    "NORMALIZERS": dict(),
    "softmax_vjp": dict(neg_inf=["x"], arrays=["g"]),
    "normalize_vjp": dict(neg_inf=["s"], arrays=["g"], choices=["normalize"], mask=True),
    "attention_vjp": dict(arrays=["q", "k", "v", "g"], neg_inf=["bias"], scalars=["scale"], mask=True, flags=["causal"]),
    "attention_bias_vjp": dict(arrays=["q", "k", "v", "g"], neg_inf=["bias"], scalars=["scale"], choices=["normalize"], mask=True,
                               flags=["causal"]),
    "relative_bias_vjp": dict(arrays=["g"]),
    "rope_vjp": dict(arrays=["g", "positions"], scalars=["base"], choices=["convention"]),
    "layer_norm_vjp": dict(arrays=["x", "g", "gamma", "beta"], scalars=["eps"]),
    "linear_vjp": dict(arrays=["x", "w", "g"]),
    "ffn_vjp": dict(arrays=["x", "w1", "b1", "w2", "g"]),
    "shaw_attention_vjp": dict(arrays=["q", "k", "v", "rel_k", "rel_v", "g"], scalars=["scale"], choices=["normalize"], mask=True),
    "shaw_relative_embeddings_vjp": dict(arrays=["g"], counts=["clip"]),
    "multi_head_attention_vjp": dict(arrays=["x", "w_q", "w_k", "w_v", "w_o", "b_q", "context", "g"], counts=["num_heads"], mask=True,
                                     flags=["causal"]),
    "transformer_block_vjp": dict(arrays=["x", "g"], counts=["num_heads"], choices=["placement"], mask=True),
    # lr, beta1, beta2 and eps of the trainers are checked in float64 whatever the parameters: hand-written cases below
    "gradient_descent": dict(counts=["steps"]),
    "adam": dict(counts=["steps"]),
    "wilson_interval": dict(counts=["successes", "trials"], scalars=["confidence"]),
    "mean_interval": dict(arrays=["x"], scalars=["confidence"]),
    # df is a real number >= 1 checked in float64 (a huge df is valid): hand-written cases below
    "t_quantile": dict(),
}
#: Counts that may be 0 (the others must be >= 1).
ZERO_OK = {("sinusoidal_encoding", "n"), ("rope_permutation", "d"), ("taylor_features", "order"), ("taylor_features", "max_entries"),
           ("exp_limit_features", "max_entries"), ("probe_hidden_states", "layers"), ("probe_hidden_states", "shaw_clip")}
ZERO_OK |= {("shaw_relative_embeddings_vjp", "clip"), ("gradient_descent", "steps"), ("adam", "steps")}
ZERO_OK |= {("wilson_interval", "successes")}


def _generated():
    """Invalid calls derived from VALID by the roles: (id, name, dtype, kwargs, error types, argument)."""
    out = []
    for name, roles in ROLES.items():
        dts = DTYPES if roles.get("arrays") or roles.get("neg_inf") or roles.get("scalars") else (np.float64,)
        for dt in dts:
            base = valid_call(name, dt)
            tag = f"{name}[{np.dtype(dt).name}]"

            def add(what, arg, value, errors=(ValueError, TypeError), base=base, tag=tag, name=name):
                kw = dict(base)
                kw[arg] = value
                out.append((f"{tag}-{arg}={what}", name, kw, errors, arg))

            for arg in roles.get("arrays", []) + roles.get("neg_inf", []):
                a = np.array(base[arg], dtype=float) if not isinstance(base[arg], np.ndarray) else base[arg]
                specials = (("nan", np.nan), ("+inf", np.inf)) + (() if arg in roles.get("neg_inf", []) else (("-inf", -np.inf),))
                for what, special in specials:
                    bad = a.copy()
                    bad.flat[bad.size // 2] = special
                    add(what, arg, bad, ValueError)
                add("bool", arg, a.astype(bool), TypeError)
                add("complex", arg, a.astype(complex), TypeError)
                add("str-array", arg, a.astype(str), TypeError)
                add("string", arg, "1.0", TypeError)
                add("ragged", arg, [[1.0, 2.0], [3.0]], TypeError)
                if a.dtype == np.float64 and dt != np.float64 and arg in ("bias", "reweight", "gamma", "beta", "b"):
                    # Finite in float64, inf in the dtype the value is used in: float16 input is
                    # computed in float32 (attncore._softmax.compute_dtype), except by linear's b.
                    used = np.dtype(np.float32 if dt == np.float16 and arg != "b" else dt)
                    huge = a.copy()
                    huge.flat[0] = 1e5 if used == np.float16 else 1e39
                    add(f"overflowing-{used.name}", arg, huge, ValueError)
            for arg in roles.get("counts", []):
                if dt != np.float64:
                    continue
                for what, bad in (("2.7", 2.7), ("2.0", 2.0), ("str", "16"), ("True", True), ("np.bool", np.True_),
                                  ("np.float64", np.float64(3.0)), ("complex", 2j)):
                    add(what, arg, bad, TypeError)
                add("negative", arg, -1 if (name, arg) in ZERO_OK else 0, ValueError)
            for arg in roles.get("scalars", []):
                for what, bad in (("str", "2.0"), ("True", True), ("list", [1.0]), ("None", None) if arg != "scale" else ("obj", object())):
                    add(what, arg, bad, TypeError)
                for what, bad in (("nan", np.nan), ("+inf", np.inf), ("-inf", -np.inf)):
                    add(what, arg, bad, ValueError)
                # The dtype the scalar is used in: norms add eps in float64; scale and temperature
                # act in the compute dtype (float16 input is computed in float32).
                used = np.dtype(np.float64 if arg == "eps" else np.result_type(dt, np.float32) if arg in ("scale", "temperature") else dt)
                if used != np.float64 and arg != "base":
                    add("beyond-max", arg, float(np.finfo(used).max) * 4, ValueError)
                if used != np.float64 and arg in ("temperature", "eps"):
                    add("underflows", arg, float(np.finfo(used).smallest_subnormal) / 4, ValueError)
                if used != np.float64 and arg == "temperature":
                    add("reciprocal-overflows", arg, 0.5 / float(np.finfo(used).max), ValueError)
            for arg in roles.get("flags", []):
                for what, bad in (("str", "no"), ("int", 1), ("None", None)):
                    add(what, arg, bad, TypeError)
            for arg in roles.get("choices", []):
                for what, bad in (("bogus", "bogus"), ("huge-string", "x" * 100_000), ("int", 3), ("list", ["softmax"])):
                    add(what, arg, bad, ValueError)
            if roles.get("mask"):
                shape = np.shape(base["mask"])
                add("int-mask", "mask", np.ones(shape, int), TypeError)
                add("float-mask", "mask", np.ones(shape), TypeError)
                add("wrong-shape", "mask", np.ones((7, 9), bool), ValueError)
                add("higher-rank", "mask", np.ones(shape + (2,), bool), ValueError)
    return out


GENERATED = _generated()


def _bp():
    return ac.init_block_params(4, 4, gen())


def _perm_1e6():
    perm = np.arange(10**6)
    perm[5] = 7  # 7 twice, 5 missing
    return perm


#: Hand-written invalid calls: (name, call, error type, names the message must contain).
INVALID = {
    "softmax": [(lambda: ac.softmax(np.ones((2, 2)), axis=2), ValueError, ["axis"]),
                (lambda: ac.softmax(np.ones((2, 2)), axis=1.0), TypeError, ["axis"]),
                (lambda: ac.softmax(np.ones(2, np.float32), temperature=1e-46), ValueError, ["temperature", "float32"]),
                (lambda: ac.softmax(np.zeros((2, 0))), ValueError, ["x"])],
    "attention": [(lambda: ac.attention(np.zeros((2, 0)), np.zeros((2, 0)), np.zeros((2, 1))), ValueError, ["q", "scale"]),
                  (lambda: ac.attention(np.ones((3, 3)), np.ones((5, 4)), np.ones((5, 2))), ValueError, ["q", "k"]),
                  (lambda: ac.attention(np.ones((3, 4)), np.ones((5, 4)), np.ones((6, 2))), ValueError, ["k", "v"]),
                  (lambda: ac.attention(*[np.ones((1, 2), np.float32)] * 2, np.ones((1, 1), np.float32), scale=1e39), ValueError, ["scale", "float32"]),
                  (lambda: ac.attention(np.full((1, 2), 1e30, np.float32), np.ones((1, 2), np.float32), np.ones((1, 1)), scale=1e10), ValueError, ["q", "scale"]),
                  (lambda: ac.attention(*[np.ones((1, 2), np.float16)] * 2, np.ones((1, 1), np.float16), bias=np.array([[1e39]])), ValueError, ["bias", "float32"]),
                  (lambda: ac.attention(np.full((1, 2), 1e20, np.float32), np.full((1, 2), 1e20, np.float32), np.ones((1, 1), np.float32), scale=1.0), ValueError, ["scores", "float32", "float64"]),
                  (lambda: ac.attention(np.ones((1, 2)), np.ones((2, 2)), np.full((2, 1), 1e308), reweight=[[2.0, 2.0]]), ValueError, ["output", "float64"])],
    "attention_weights": [(lambda: ac.attention_weights(np.ones((3, 3)), np.ones((5, 4))), ValueError, ["q", "k"]),
                          (lambda: ac.attention_weights(np.ones((3, 4)), np.ones((5, 4)), bias=np.ones((4, 5))), ValueError, ["bias"])],
    "layer_norm": [(lambda: ac.layer_norm(np.ones((3, 4)), np.ones(5)), ValueError, ["gamma", "x"]),
                   (lambda: ac.layer_norm(np.ones((1, 2), np.float16), eps=-1e-10), ValueError, ["eps", ">= 0"])],
    "rms_norm": [(lambda: ac.rms_norm(np.ones(4), eps="1e-3"), TypeError, ["eps"])],
    "instance_norm": [(lambda: ac.instance_norm(np.ones(4)), ValueError, ["x"])],
    "batch_norm": [(lambda: ac.batch_norm(np.ones(4)), ValueError, ["x"])],
    "linear": [(lambda: ac.linear(np.ones((3, 4)), np.ones((5, 2))), ValueError, ["w", "x"]),
               (lambda: ac.linear(np.ones((3, 4)), np.ones((4, 2)), np.ones(3)), ValueError, ["b", "w"])],
    "ffn": [(lambda: ac.ffn(np.ones((2, 3)), np.ones((3, 4)), None, np.ones((5, 3)), None), ValueError, ["w2"])],
    "multi_head_attention": [
        (lambda: ac.multi_head_attention(np.zeros((2, 0)), *[np.zeros((0, 0))] * 4, 1), ValueError, ["x", "d"]),
        (lambda: ac.multi_head_attention(np.ones((2, 4)), np.full((4, 4), np.nan), *[np.eye(4)] * 3, 2), ValueError, ["w_q"]),
        (lambda: ac.multi_head_attention(np.ones((2, 4)), *[np.eye(4)] * 4, 3), ValueError, ["num_heads"]),
        (lambda: ac.multi_head_attention(np.ones((2, 4)), *[np.eye(4)] * 4, 2, b_o=np.full(4, np.inf)), ValueError, ["b_o"])],
    "transformer_block": [
        (lambda: ac.transformer_block(np.ones((2, 4)), _bp()._replace(gamma1=np.full(4, np.nan)), 2), ValueError, ["params.gamma1"]),
        (lambda: ac.transformer_block(np.ones((2, 4)), _bp()._replace(w1=np.ones((3, 4))), 2), ValueError, ["params.w1"]),
        (lambda: ac.transformer_block(np.ones((2, 4)), _bp()._replace(w_v=None), 2), ValueError, ["params.w_v"]),
        (lambda: ac.transformer_block(np.ones((2, 4)), tuple(_bp()), 2), TypeError, ["params"])],
    "init_block_params": [(lambda: ac.init_block_params(0, 4, gen()), ValueError, ["d"]),
                          (lambda: ac.init_block_params(4, 4, gen(), dtype=np.int32), TypeError, ["dtype"]),
                          (lambda: ac.init_block_params(4, 4, gen(), dtype="banana"), TypeError, ["dtype"]),
                          (lambda: ac.init_block_params(4, 4, 0), TypeError, ["rng"])],
    "split_heads": [(lambda: ac.split_heads(np.array([["a", "b"]]), 1), TypeError, ["x"]),
                    (lambda: ac.split_heads(np.ones(4), 1), ValueError, ["x"])],
    "merge_heads": [(lambda: ac.merge_heads(np.full((1, 1, 1), np.nan)), ValueError, ["x"]),
                    (lambda: ac.merge_heads(np.ones((2, 2))), ValueError, ["x"])],
    "sinusoidal_encoding": [(lambda: ac.sinusoidal_encoding(4, 4, base="100.0"), TypeError, ["base"]),
                            (lambda: ac.sinusoidal_encoding(4, 4, base=0.0), ValueError, ["base"])],
    "rope": [(lambda: ac.rope(np.ones((2, 3))), ValueError, ["x"]),
             (lambda: ac.rope(np.ones((2, 4)), positions=np.ones(3)), ValueError, ["positions"])],
    "rope_frequencies": [(lambda: ac.rope_frequencies(5), ValueError, ["d"])],
    "rope_permutation": [(lambda: ac.rope_permutation(3), ValueError, ["d"])],
    "t5_relative_bucket": [(lambda: ac.t5_relative_bucket(np.arange(3), num_buckets=3), ValueError, ["num_buckets = 3"]),
                           (lambda: ac.t5_relative_bucket(np.arange(3), bidirectional=False, num_buckets=1), ValueError, ["num_buckets = 1"]),
                           (lambda: ac.t5_relative_bucket(np.arange(3.0)), TypeError, ["relative_position"]),
                           (lambda: ac.t5_relative_bucket(np.array([2**63 + 5], np.uint64)), ValueError, ["relative_position"]),
                           (lambda: ac.t5_relative_bucket(np.arange(3), max_distance=8), ValueError, ["max_distance"])],
    "alibi_slopes": [(lambda: ac.alibi_slopes(0), ValueError, ["num_heads"])],
    "relative_bias": [(lambda: ac.relative_bias(2, 2, lambda r: np.full(r.shape, np.nan)), ValueError, ["table_or_fn"]),
                      (lambda: ac.relative_bias(2, 2, np.array([1.0, np.inf, 0.0])), ValueError, ["table_or_fn"]),
                      (lambda: ac.relative_bias(2, 2, np.ones(4)), ValueError, ["table_or_fn"])],
    "causal_mask": [(lambda: ac.causal_mask(3.0), TypeError, ["n"])],
    "matmul_flops": [(lambda: ac.matmul_flops(2, 0, 2), ValueError, ["b"])],
    "block_flops": [(lambda: ac.block_flops(4, 6, num_heads=4), ValueError, ["num_heads", "d"])],
    "toeplitz": [(lambda: ac.toeplitz(np.ones(4)), ValueError, ["diagonals"]),
                 (lambda: ac.toeplitz(np.float64(1.0)), ValueError, ["diagonals"])],
    "permutation_matrix": [(lambda: ac.permutation_matrix(_perm_1e6()), ValueError, ["perm"]),
                           (lambda: ac.permutation_matrix([0, 3, 1]), ValueError, ["perm"]),
                           (lambda: ac.permutation_matrix([0.0, 1.0]), TypeError, ["perm"]),
                           (lambda: ac.permutation_matrix([True, False]), TypeError, ["perm"])],
    "inverse_permutation": [(lambda: ac.inverse_permutation([[0, 1]]), ValueError, ["perm"]),
                            (lambda: ac.inverse_permutation(np.arange(10**6)[::-1] % 999_999), ValueError, ["perm"])],
    "permute_tokens": [(lambda: ac.permute_tokens(np.ones((4, 2)), [2, 0, 1]), ValueError, ["x"]),
                       (lambda: ac.permute_tokens(np.ones((3, 2)), [2, 2, 1]), ValueError, ["perm"])],
    "gaussian_features": [(lambda: ac.gaussian_features(3, 2, 0), TypeError, ["rng"])],
    "positive_random_features": [(lambda: ac.positive_random_features(np.ones((2, 3)), np.ones((4, 2))), ValueError, ["omega", "x"]),
                                 (lambda: ac.positive_random_features(np.ones((2, 3)), np.ones((0, 3))), ValueError, ["omega"])],
    "trig_random_features": [(lambda: ac.trig_random_features(np.ones((2, 3)), np.ones(3)), ValueError, ["omega"])],
    "taylor_features": [(lambda: ac.taylor_features(np.ones((2, 3)), 3, max_entries=10), ValueError, ["max_entries"])],
    "exp_limit_features": [(lambda: ac.exp_limit_features(np.ones((2, 3)), 0), ValueError, ["n"])],
    "linear_attention": [
        (lambda: ac.linear_attention(np.ones((2, 2)), np.ones((2, 2)), np.ones((2, 1)), "exp"), TypeError, ["feature_map"]),
        (lambda: ac.linear_attention(np.ones((2, 2)), np.ones((2, 2)), np.ones((2, 1)), lambda z: z * np.nan), ValueError, ["feature_map"]),
        (lambda: ac.linear_attention(np.ones((2, 2)), np.ones((3, 2)), np.ones((3, 1)), np.exp, causal=True), ValueError, ["causal"]),
        (lambda: ac.linear_attention(np.ones((2, 2)), np.ones((2, 2)), np.ones((2, 1)), np.exp, key_feature_map=3), TypeError, ["key_feature_map"]),
        (lambda: ac.linear_attention(np.ones((2, 2)), np.ones((2, 2)), np.ones((2, 1)), lambda z: z[..., :0]), ValueError, ["feature_map", "width"]),
        (lambda: ac.linear_attention(np.ones((2, 2)), np.ones((2, 2)), np.ones((2, 1)), lambda z: z[..., :0], key_feature_map=lambda z: z[..., :0]),
         ValueError, ["key_feature_map", "width"])],
    "linear_attention_weights": [
        (lambda: ac.linear_attention_weights(np.ones((2, 2)), np.ones((2, 2)), None), TypeError, ["feature_map"]),
        (lambda: ac.linear_attention_weights(np.ones((2, 2)), np.ones((2, 2)), lambda z: z[..., :0]), ValueError, ["feature_map", "width"])],
    "linear_readout": [(lambda: ac.linear_readout(np.ones((3, 4)), np.ones(5)), ValueError, ["targets", "features"]),
                       (lambda: ac.linear_readout(np.ones((3, 4)), np.ones(3), rcond="0.1"), TypeError, ["rcond"]),
                       (lambda: ac.linear_readout(np.ones((3, 4)), np.ones(3), rcond=2.0), ValueError, ["rcond"]),
                       (lambda: ac.linear_readout(np.ones((0, 4)), np.ones(0)), ValueError, ["features", "rows"])],
    "probe_floor": [(lambda: ac.probe_floor(0), ValueError, ["n"])],
    "probe_hidden_states": [(lambda: ac.probe_hidden_states(3, gen(), urpe=1), ValueError, ["urpe"]),
                            (lambda: ac.probe_hidden_states(3, gen(), urpe="yes"), ValueError, ["urpe"]),
                            (lambda: ac.probe_hidden_states(3, gen(), d=6, num_heads=4), ValueError, ["num_heads"]),
                            (lambda: ac.probe_hidden_states(3, gen(), scheme="rope", d=6, num_heads=2), ValueError, ["rope"])],
    "shaw_relative_embeddings": [(lambda: ac.shaw_relative_embeddings(3, 3, np.ones((4, 2))), ValueError, ["table"])],
    "shaw_attention": [(lambda: ac.shaw_attention(np.full((2, 2), np.nan), np.ones((2, 2)), np.ones((2, 1)),
                                                  np.zeros((2, 2, 2)), np.zeros((2, 2, 1))), ValueError, ["q"]),
                       (lambda: ac.shaw_attention(np.ones((2, 2)), np.ones((2, 2)), np.ones((2, 1)),
                                                  np.zeros((2, 3, 2)), np.zeros((2, 2, 1))), ValueError, ["rel_k"])],
    "dense_features": [(lambda: ac.dense_features(np.ones((2, 3)), np.ones((4, 2)), np.ones((2, 2))), ValueError, ["w1", "x"])],
    "dense_scores": [(lambda: ac.dense_scores(np.ones((3, 2)), np.ones((2, 2)), np.ones((2, 4))), ValueError, ["w2"])],
    "random_scores": [(lambda: ac.random_scores(np.ones((3, 3)), 4), ValueError, ["r"]),
                      (lambda: ac.random_scores(np.ones((3, 4)), 3), ValueError, ["r"])],
    "factorized_random_scores": [(lambda: ac.factorized_random_scores(np.ones((3, 2)), np.ones((3, 1)), 3), ValueError, ["r2", "r1"])],
    "factorized_dense_scores": [(lambda: ac.factorized_dense_scores(np.ones((6, 2)), np.ones((6, 2))), ValueError, ["f_a", "f_b"])],
    "mixture_weights": [(lambda: ac.mixture_weights(np.array([np.nan, 1.0])), ValueError, ["logits"]),
                        (lambda: ac.mixture_weights(np.zeros(0)), ValueError, ["logits"])],
    "mixture_scores": [(lambda: ac.mixture_scores([np.full((2, 2), np.nan)], [0.0]), ValueError, ["scores[0]"]),
                       (lambda: ac.mixture_scores([np.ones((2, 2))], [0.0, 1.0]), ValueError, ["logits"]),
                       (lambda: ac.mixture_scores(3, [0.0]), TypeError, ["scores"])],
    "synthesizer_attention": [(lambda: ac.synthesizer_attention(np.ones((2, 2)), np.full((2, 2), np.nan), np.eye(2)), ValueError, ["scores"]),
                              (lambda: ac.synthesizer_attention(np.ones((2, 2)), np.ones((3, 3)), np.eye(2)), ValueError, ["scores"])],
    "synthesizer_costs": [(lambda: ac.synthesizer_costs(0, 8), ValueError, ["n"]),
                          (lambda: ac.synthesizer_costs(2.7, 8), TypeError, ["n"]),
                          (lambda: ac.synthesizer_costs(16, 8, a=3), ValueError, ["a"])],
    "BlockParams": [(lambda: ac.BlockParams(np.eye(2)), TypeError, ["w_k"]),
                    (lambda: ac.BlockParams(*[np.eye(2)] * 6, bogus=1), TypeError, ["bogus"])],
    "NORMALIZERS": [(lambda: ac.attention_weights(np.ones((1, 2)), np.ones((1, 2)), normalize="softmax2"), ValueError, ["normalize"])],
    "softmax_vjp": [(lambda: ac.softmax_vjp(np.ones((2, 3)), np.ones((3, 2))), ValueError, ["g", "x", "(2, 3)"]),
                    (lambda: ac.softmax_vjp(np.ones((2, 3)), np.ones((2, 3)), axis=2), ValueError, ["axis"])],
    "normalize_vjp": [(lambda: ac.normalize_vjp(np.ones(3), np.ones(3)), ValueError, ["s"]),
                      (lambda: ac.normalize_vjp(np.full((1, 2), 1e3), np.ones((1, 2)), normalize="none"), ValueError, ["none"])],
    "attention_vjp": [(lambda: ac.attention_vjp(np.ones((3, 4)), np.ones((5, 4)), np.ones((5, 2)), np.ones((3, 4))), ValueError, ["g", "(3, 2)"]),
                      (lambda: ac.attention_vjp(np.ones((3, 4)), np.ones((5, 4)), np.ones((6, 2)), np.ones((3, 2))), ValueError, ["k", "v"]),
                      (lambda: ac.attention_vjp(np.zeros((2, 0)), np.zeros((2, 0)), np.zeros((2, 1)), np.zeros((2, 1))), ValueError, ["scale"])],
    "attention_bias_vjp": [(lambda: ac.attention_bias_vjp(np.ones((3, 4)), np.ones((5, 4)), np.ones((5, 2)), np.ones((3, 2)),
                                                          bias=np.ones((4, 5))), ValueError, ["bias"])],
    "relative_bias_vjp": [(lambda: ac.relative_bias_vjp(np.ones(3)), ValueError, ["g"]),
                          (lambda: ac.relative_bias_vjp(np.ones((0, 3))), ValueError, ["g", "n >= 1"])],
    "rope_vjp": [(lambda: ac.rope_vjp(np.ones((2, 3))), ValueError, ["g", "even"]),
                 (lambda: ac.rope_vjp(np.ones((2, 4)), positions=np.ones(3)), ValueError, ["positions"])],
    "layer_norm_vjp": [(lambda: ac.layer_norm_vjp(np.ones((2, 3)), np.ones((2, 3)), eps=0.0), ValueError, ["variance 0", "eps"]),
                       (lambda: ac.layer_norm_vjp(np.ones((2, 3)), np.ones((2, 3)), gamma=np.ones(4)), ValueError, ["gamma"]),
                       (lambda: ac.layer_norm_vjp(np.ones((2, 3)), np.ones((3, 3))), ValueError, ["g", "(2, 3)"])],
    "linear_vjp": [(lambda: ac.linear_vjp(np.ones((3, 4)), np.ones((5, 2)), np.ones((3, 2))), ValueError, ["w", "x"]),
                   (lambda: ac.linear_vjp(np.ones((3, 4)), np.ones((4, 2)), np.ones((3, 4))), ValueError, ["g", "x @ w"])],
    "ffn_vjp": [(lambda: ac.ffn_vjp(np.ones((2, 3)), np.ones((3, 4)), None, np.ones((5, 3)), np.ones((2, 3))), ValueError, ["w2"]),
                (lambda: ac.ffn_vjp(np.ones((2, 3)), np.ones((3, 4)), np.ones(5), np.ones((4, 3)), np.ones((2, 3))), ValueError, ["b1"]),
                (lambda: ac.ffn_vjp(np.ones((2, 3)), np.ones((3, 4)), None, np.ones((4, 3)), np.ones((2, 4))), ValueError, ["g"])],
    "shaw_attention_vjp": [(lambda: ac.shaw_attention_vjp(np.ones((2, 2)), np.ones((2, 2)), np.ones((2, 1)), np.zeros((2, 3, 2)),
                                                          np.zeros((2, 2, 1)), np.ones((2, 1))), ValueError, ["rel_k"]),
                           (lambda: ac.shaw_attention_vjp(np.ones((2, 2)), np.ones((2, 2)), np.ones((2, 1)), np.zeros((2, 2, 2)),
                                                          np.zeros((2, 2, 1)), np.ones((2, 2))), ValueError, ["g"])],
    "shaw_relative_embeddings_vjp": [(lambda: ac.shaw_relative_embeddings_vjp(np.ones((3, 3)), 1), ValueError, ["g"])],
    "multi_head_attention_vjp": [
        (lambda: ac.multi_head_attention_vjp(np.ones((2, 4)), *[np.eye(4)] * 4, 2, np.ones((2, 3))), ValueError, ["g", "(2, 4)"]),
        (lambda: ac.multi_head_attention_vjp(np.ones((2, 4)), *[np.eye(4)] * 4, 3, np.ones((2, 4))), ValueError, ["num_heads"])],
    "transformer_block_vjp": [
        (lambda: ac.transformer_block_vjp(np.ones((2, 4)), tuple(_bp()), 2, np.ones((2, 4))), TypeError, ["params"]),
        (lambda: ac.transformer_block_vjp(np.ones((2, 4)), _bp()._replace(w2=np.ones((3, 4))), 2, np.ones((2, 4))), ValueError, ["params.w2"]),
        (lambda: ac.transformer_block_vjp(np.ones((2, 4)), _bp(), 2, np.ones((4, 2))), ValueError, ["g", "(2, 4)"])],
    "gradient_descent": [(lambda: ac.gradient_descent("sgd", [np.zeros(2)], steps=1, lr=0.1), TypeError, ["loss_and_grad"]),
                         (lambda: ac.gradient_descent(_quad, np.zeros(2), steps=1, lr=0.1), TypeError, ["params"]),
                         (lambda: ac.gradient_descent(_quad, [np.array([np.nan])], steps=1, lr=0.1), ValueError, ["params[0]"]),
                         (lambda: ac.gradient_descent(_quad, [np.zeros(2)], steps=1, lr=0.0), ValueError, ["lr"]),
                         (lambda: ac.gradient_descent(_quad, [np.zeros(2)], steps=1, lr="0.1"), TypeError, ["lr"]),
                         (lambda: ac.gradient_descent(lambda p: (math.nan, [np.zeros(2)]), [np.zeros(2)], steps=1, lr=0.1), ValueError,
                          ["loss", "diverged"]),
                         (lambda: ac.gradient_descent(lambda p: (0.0, [np.zeros(3)]), [np.zeros(2)], steps=1, lr=0.1), ValueError,
                          ["loss_and_grad", "(3,)", "(2,)"])],
    "adam": [(lambda: ac.adam(_quad, [np.zeros(2)], steps=1, beta1=1.0), ValueError, ["beta1"]),
             (lambda: ac.adam(_quad, [np.zeros(2)], steps=1, beta2="0.9"), TypeError, ["beta2"]),
             (lambda: ac.adam(_quad, [np.zeros(2)], steps=1, eps=0.0), ValueError, ["eps"]),
             (lambda: ac.adam(_quad, [np.zeros(2)], steps=1, lr=-1.0), ValueError, ["lr"])],
    "wilson_interval": [(lambda: ac.wilson_interval(21, 20), ValueError, ["successes", "trials", "21", "20"]),
                        (lambda: ac.wilson_interval(np.array([3, 5]), np.array([4, 4])), ValueError, ["successes", "trials", "(1,)"]),
                        (lambda: ac.wilson_interval([1, 2], [3, 4, 5]), ValueError, ["successes", "trials", "(2,)", "(3,)"]),
                        (lambda: ac.wilson_interval(0.75, 20), TypeError, ["successes", "0.75"]),
                        (lambda: ac.wilson_interval(np.array([15.0, 20.0]), 20), TypeError, ["successes", "float64"]),
                        (lambda: ac.wilson_interval(3, np.array([4, 0])), ValueError, ["trials", "(1,)"]),
                        (lambda: ac.wilson_interval(3, 4, confidence=95), ValueError, ["confidence", "95"]),
                        (lambda: ac.wilson_interval(3, 4, confidence=0.0), ValueError, ["confidence"])],
    "mean_interval": [(lambda: ac.mean_interval(np.ones((3, 1))), ValueError, ["x", "axis", "(3, 1)"]),
                      (lambda: ac.mean_interval(np.ones((3, 4)), axis=2), ValueError, ["axis", "x"]),
                      (lambda: ac.mean_interval(np.ones((3, 4)), axis=1.0), TypeError, ["axis"]),
                      (lambda: ac.mean_interval(np.array([1e308, -1e308, 1e308])), ValueError, ["x", "float64"]),
                      (lambda: ac.mean_interval(np.ones(4), confidence=1.0), ValueError, ["confidence"])],
    "t_quantile": [(lambda: ac.t_quantile(0.5), ValueError, ["df", "0.5"]),
                   (lambda: ac.t_quantile(True), TypeError, ["df"]),
                   (lambda: ac.t_quantile("4"), TypeError, ["df"]),
                   (lambda: ac.t_quantile(np.nan), ValueError, ["df"]),
                   (lambda: ac.t_quantile(np.inf), ValueError, ["df"]),
                   (lambda: ac.t_quantile(4, confidence=-0.1), ValueError, ["confidence"]),
                   (lambda: ac.t_quantile(4, confidence=None), TypeError, ["confidence"])],
}


# --------------------------------------------------------------------------------------
# EDGE: (name, call, reference, dtype of the computation); the reference never calls attncore.
# --------------------------------------------------------------------------------------
F16, F32, F64 = np.float16, np.float32, np.float64
Z95 = 1.959963984540054  # the standard normal's 97.5% quantile, as tabulated
_C = np.array([[300.0, -300.0, 100.0]])


def _t5_ref(r, num_buckets=32, max_distance=128):
    """Closed form of the buckets away from the logarithmic boundaries (bidirectional)."""
    half = num_buckets // 2
    exact = half // 2
    nu = -r
    offset = half if nu < 0 else 0
    nu = abs(nu)
    if nu < exact:
        return offset + nu
    if nu >= max_distance:
        return offset + half - 1
    return offset + min(half - 1, exact + int(math.log(nu / exact) / math.log(max_distance / exact) * (half - exact)))


EDGE = {
    "softmax": [
        (lambda: ac.softmax(np.array([1.0, 2.0, -np.inf])), lambda: ref_softmax_row([1.0, 2.0, -np.inf]), F64),
        (lambda: ac.softmax(np.array([[1.0, 2.0], [3.0, 1.0]], F32), axis=0),
         lambda: np.stack([ref_softmax_row([1.0, 3.0]), ref_softmax_row([2.0, 1.0])], axis=1), F32),
        (lambda: ac.softmax(np.array([1.0, 2.0]), mask=np.array([False, False])), lambda: np.zeros(2), F64),
        (lambda: ac.softmax(np.array([1.0, 2.0], F32), temperature=1e-30), lambda: [0.0, 1.0], F32),
        (lambda: ac.softmax(np.array([1e4, 0.0], F16)), lambda: [1.0, 0.0], F16),
        (lambda: ac.softmax(np.array([-np.inf, -np.inf])), lambda: [0.0, 0.0], F64),
        (lambda: ac.softmax(np.array([5.0])), lambda: [1.0], F64),
    ],
    "attention": [
        (lambda: ac.attention(np.ones((1, 2)), np.ones((2, 2)), [[1.0], [3.0]], bias=[[0.0, -np.inf]]), lambda: [[1.0]], F64),
        (lambda: ac.attention(np.ones((1, 2)), np.ones((2, 2)), [[1.0], [3.0]], mask=True), lambda: [[2.0]], F64),
        (lambda: ac.attention(np.ones((1, 2)), np.ones((2, 2)), [[1.0], [3.0]], mask=False), lambda: [[0.0]], F64),
        (lambda: ac.attention(np.ones((1, 2)), np.ones((2, 2)), [[1.0], [3.0]], mask=np.bool_(True), causal=True), lambda: [[1.0]], F64),
        (lambda: ac.attention(np.ones((1, 2), F32), np.ones((2, 2), F32), np.array([[1.0], [3.0]], F32), mask=np.array([[False, False]])),
         lambda: [[0.0]], F32),
        (lambda: ac.attention(rn(3, 4), rn(5, 4), rn(5, 2), bias=rn(3, 5), reweight=rn(3, 5), scale=0.3),
         lambda: ref_attention(rn(3, 4), rn(5, 4), rn(5, 2), bias=rn(3, 5), reweight=rn(3, 5), scale=0.3), F64),
        (lambda: ac.attention(np.ones((2, 3)), np.ones((2, 3)), [[1.0], [3.0]], scale=0.0), lambda: [[2.0], [2.0]], F64),
        pytest.param(lambda: ac.attention(np.array([[9.2]], F32), np.array([[9.2]], F32), np.array([[100.0]], F32)),
                     lambda: [[100.0]], F32),
        pytest.param(lambda: ac.attention([[20.0]], [[20.0]], [[1.0]], normalize="l2"), lambda: [[1.0]], F64),
        (lambda: ac.attention(np.array([[3.0]], F16), np.array([[3.0]], F16), np.array([[1000.0]], F16)), lambda: [[1000.0]], F16),
        pytest.param(lambda: ac.attention(np.zeros((2, 3)), np.zeros((0, 3)), np.zeros((0, 2))), lambda: np.zeros((2, 2)), F64),
    ],
    "attention_weights": [
        (lambda: ac.attention_weights(rn(3, 4), rn(5, 4), bias=rn(3, 5), mask=rn(3, 5) > 0),
         lambda: ref_weights(rn(3, 4), rn(5, 4), bias=rn(3, 5), mask=rn(3, 5) > 0), F64),
        (lambda: ac.attention_weights(np.full((1, 1), 30.0), np.full((2, 1), 30.0), scale=1.0, normalize="l2"),
         lambda: [[1 / math.sqrt(2), 1 / math.sqrt(2)]], F64),
        pytest.param(lambda: ac.attention_weights(np.zeros((2, 3)), np.zeros((0, 3))), lambda: np.zeros((2, 0)), F64),
    ],
    "layer_norm": [
        (lambda: ac.layer_norm(np.full((2, 3), 7.0)), lambda: np.zeros((2, 3)), F64),
        (lambda: ac.layer_norm(rn(3, 5), eps=0.0), lambda: ref_standardize_rows(rn(3, 5), 0.0), F64),
        pytest.param(lambda: ac.layer_norm(_C.astype(F16)), lambda: ref_standardize_rows(_C, 1e-5), F16),
        pytest.param(lambda: ac.layer_norm((_C * 1e20).astype(F32)), lambda: ref_standardize_rows(_C * 1e20, 1e-5), F32),
        pytest.param(lambda: ac.layer_norm(_C * 1e198), lambda: ref_standardize_rows(_C * 1e198, 1e-5), F64),
    ],
    "rms_norm": [
        (lambda: ac.rms_norm(np.array([[3.0, 4.0]]), eps=0.0), lambda: [[3 / math.sqrt(12.5), 4 / math.sqrt(12.5)]], F64),
        pytest.param(lambda: ac.rms_norm(_C.astype(F16)), lambda: ref_standardize_rows(_C, 1e-6, rms=True), F16),
        pytest.param(lambda: ac.rms_norm(np.array([[1e-30, 2e-30]], F32), eps=0.0),
                     lambda: ref_standardize_rows([[1e-30, 2e-30]], 0.0, rms=True), F32),
    ],
    "instance_norm": [
        (lambda: ac.instance_norm(rn(4, 3)), lambda: ref_standardize_rows(rn(4, 3).T, 1e-5).T, F64),
        pytest.param(lambda: ac.instance_norm(_C.T.astype(F16)), lambda: ref_standardize_rows(_C, 1e-5).T, F16),
    ],
    "batch_norm": [
        (lambda: ac.batch_norm(rn(5, 1)), lambda: ref_standardize_rows(rn(5, 1).T, 1e-5).T, F64),
        pytest.param(lambda: ac.batch_norm(_C.T.astype(F16)), lambda: ref_standardize_rows(_C, 1e-5).T, F16),
    ],
    "linear": [
        (lambda: ac.linear(np.ones((1, 2), F16), np.ones((2, 1))), lambda: [[2.0]], F64),
        (lambda: ac.linear(rn(3, 4), rn(4, 2), rn(2)), lambda: ref_matmul(rn(3, 4), rn(4, 2)) + np.asarray(rn(2), L), F64),
        (lambda: ac.linear(np.zeros((0, 3)), np.ones((3, 2))), lambda: np.zeros((0, 2)), F64),
    ],
    "ffn": [
        (lambda: ac.ffn(rn(3, 4), rn(4, 5), rn(5), rn(5, 4), None),
         lambda: ref_matmul(np.maximum(ref_matmul(rn(3, 4), rn(4, 5)) + np.asarray(rn(5), L), 0), rn(5, 4)), F64),
    ],
    "multi_head_attention": [
        # d heads of width 1: head t attends with the scalar scores q_t k_t.
        (lambda: ac.multi_head_attention(rn(3, 2), np.eye(2), np.eye(2), np.eye(2), np.eye(2), 2),
         lambda: np.concatenate([ref_attention(rn(3, 2)[:, t:t + 1], rn(3, 2)[:, t:t + 1], rn(3, 2)[:, t:t + 1]) for t in range(2)], axis=1), F64),
    ],
    "transformer_block": [
        # zero attention and FFN weights, no biases, pre-LN: both residual branches add 0.
        (lambda: ac.transformer_block(rn(3, 4), ac.BlockParams(*[np.zeros((4, 4))] * 6), 2, placement="pre"), lambda: rn(3, 4), F64),
    ],
    "init_block_params": [
        (lambda: ac.init_block_params(2, 3, np.random.default_rng(5), dtype=F32).w_q,
         lambda: (np.random.default_rng(5).standard_normal((2, 2)) / math.sqrt(2)).astype(F32), F32),
        (lambda: [ac.init_block_params(2, 3, gen(), bias=False)[i] is None for i in range(6, 16)],
         lambda: [True, True, True, True, True, True, False, True, False, True], F64),
    ],
    "split_heads": [
        (lambda: ac.split_heads(np.arange(12.0).reshape(2, 6), 3),
         lambda: [[[np.arange(12.0).reshape(2, 6)[i, 2 * h + c] for c in range(2)] for i in range(2)] for h in range(3)], F64),
    ],
    "merge_heads": [
        (lambda: ac.merge_heads(np.arange(12.0).reshape(3, 2, 2)),
         lambda: [[np.arange(12.0).reshape(3, 2, 2)[j // 2, i, j % 2] for j in range(6)] for i in range(2)], F64),
    ],
    "sinusoidal_encoding": [
        (lambda: ac.sinusoidal_encoding(0, 4), lambda: np.zeros((0, 4)), F64),
        (lambda: ac.sinusoidal_encoding(3, 3, base=100.0),
         lambda: [[math.sin(p * 100.0 ** (-2 * (j // 2) / 3)) if j % 2 == 0 else math.cos(p * 100.0 ** (-2 * (j // 2) / 3))
                   for j in range(3)] for p in range(3)], F64),
    ],
    "rope": [
        (lambda: ac.rope(rn(3, 4), positions=np.zeros(3)), lambda: rn(3, 4), F64),
        (lambda: ac.rope(np.array([[1.0, 0.0]]), positions=[2.0], base=7.0), lambda: [[math.cos(2.0), math.sin(2.0)]], F64),
        (lambda: ac.rope(np.zeros((0, 2))), lambda: np.zeros((0, 2)), F64),
    ],
    "rope_frequencies": [(lambda: ac.rope_frequencies(2), lambda: [1.0], F64),
                         (lambda: ac.rope_frequencies(4, base=4.0), lambda: [1.0, 0.5], F64)],
    "rope_permutation": [(lambda: ac.rope_permutation(0), lambda: np.zeros(0), F64),
                         (lambda: ac.rope_permutation(4), lambda: [0, 2, 1, 3], F64)],
    "t5_relative_bucket": [
        (lambda: ac.t5_relative_bucket(np.array([0, -1, -7, -128, -10**6, 1, 10**6])),
         lambda: [_t5_ref(r) for r in (0, -1, -7, -128, -10**6, 1, 10**6)], F64),
        (lambda: ac.t5_relative_bucket(np.array([], dtype=np.int64)), lambda: np.zeros(0), F64),
    ],
    "alibi_slopes": [(lambda: ac.alibi_slopes(1), lambda: [2.0**-8], F64),
                     (lambda: ac.alibi_slopes(3), lambda: [2.0**-4, 2.0**-8, 2.0**-2], F64)],
    "relative_bias": [
        (lambda: ac.relative_bias(2, 2, np.array([-np.inf, 0.0, 1.0])), lambda: [[0.0, 1.0], [-np.inf, 0.0]], F64),
        (lambda: ac.relative_bias(1, 1, lambda r: r * 2.0), lambda: [[0.0]], F64),
    ],
    "causal_mask": [(lambda: ac.causal_mask(1), lambda: [[True]], F64),
                    (lambda: ac.causal_mask(2, 3), lambda: [[True, False, False], [True, True, False]], F64)],
    "matmul_flops": [(lambda: ac.matmul_flops(1, 1, 1), lambda: 1, F64),
                     (lambda: ac.matmul_flops(10**12, 10**12, 10**12) == 10**24 * (2 * 10**12 - 1), lambda: True, F64)],
    "block_flops": [
        # n = m = d = h = 1, f = 4: every product is a single multiplication.
        (lambda: list(ac.block_flops(1, 1).values()), lambda: [3, 2, 3, 1, 1, 4 + 4 + 7], F64),
    ],
    "toeplitz": [(lambda: ac.toeplitz(np.array([5.0])), lambda: [[5.0]], F64),
                 (lambda: ac.toeplitz(np.arange(5.0)), lambda: [[2.0 + j - i for j in range(3)] for i in range(3)], F64)],
    "permutation_matrix": [(lambda: ac.permutation_matrix([]), lambda: np.zeros((0, 0)), F64),
                           (lambda: ac.permutation_matrix([1, 0]), lambda: [[0.0, 1.0], [1.0, 0.0]], F64)],
    "inverse_permutation": [(lambda: ac.inverse_permutation([2, 0, 1]), lambda: [1, 2, 0], F64),
                            (lambda: ac.inverse_permutation(np.array([0], np.uint8)), lambda: [0], F64)],
    "permute_tokens": [(lambda: ac.permute_tokens(np.arange(6.0).reshape(3, 2), [2, 0, 1]), lambda: [[4.0, 5.0], [0.0, 1.0], [2.0, 3.0]], F64)],
    "gaussian_features": [
        (lambda: ac.gaussian_features(2, 3, np.random.default_rng(4)), lambda: np.random.default_rng(4).standard_normal((2, 3)), F64),
        (lambda: (lambda w: w[:3] @ w[:3].T - np.diag(np.diag(w[:3] @ w[:3].T)))(ac.gaussian_features(4, 3, gen(), orthogonal=True)),
         lambda: np.zeros((3, 3)), F64),
    ],
    "positive_random_features": [
        (lambda: ac.positive_random_features(np.full((1, 2), 30.0), np.ones((1, 2))), lambda: [[np.exp(L(60 - 900))]], F64),
        (lambda: ac.positive_random_features(rn(3, 2), np.ones((4, 2)), stabilizer="row"), lambda: np.full((3, 4), 0.5), F64),
    ],
    "trig_random_features": [
        (lambda: ac.trig_random_features(np.array([[1.0, 2.0]]), np.zeros((4, 2))),
         lambda: [[math.exp(2.5) / 2] * 4 + [0.0] * 4], F64),
    ],
    "taylor_features": [(lambda: ac.taylor_features(rn(2, 3), 0), lambda: np.ones((2, 1)), F64),
                        (lambda: ac.taylor_features(np.array([[2.0, 3.0]]), 2),
                         lambda: [[1, 2, 3, 4 / math.sqrt(2), 6 / math.sqrt(2), 6 / math.sqrt(2), 9 / math.sqrt(2)]], F64)],
    "exp_limit_features": [(lambda: ac.exp_limit_features(np.array([[4.0]]), 1), lambda: [[1.0, 4.0]], F64),
                           (lambda: ac.exp_limit_features(np.array([[2.0]]), 2),
                            lambda: [[1.0, math.sqrt(2), math.sqrt(2), 2.0]], F64)],
    "linear_attention": [
        (lambda: ac.linear_attention(rn(3, 2), rn(4, 2), rn(4, 3), lambda z: np.ones(z.shape[:-1] + (2,))),
         lambda: np.tile(np.asarray(rn(4, 3), L).mean(axis=0), (3, 1)), F64),
        (lambda: ac.linear_attention(rn(3, 2), rn(3, 2), rn(3, 1), lambda z: np.ones(z.shape[:-1] + (1,)), causal=True, chunk=2),
         lambda: [[float(np.mean(rn(3, 1)[: i + 1]))] for i in range(3)], F64),
        pytest.param(lambda: ac.linear_attention(np.ones((2, 3)), np.zeros((0, 3)), np.zeros((0, 2)), np.exp),
                     lambda: np.zeros((2, 2)), F64),
    ],
    "linear_attention_weights": [
        (lambda: ac.linear_attention_weights(rn(3, 2), rn(3, 2), lambda z: np.ones(z.shape[:-1] + (1,)), causal=True),
         lambda: [[1 / (i + 1) if j <= i else 0.0 for j in range(3)] for i in range(3)], F64),
    ],
    "linear_readout": [
        (lambda: ac.linear_readout(np.ones((4, 2)), np.arange(1.0, 5.0))[1], lambda: 1.25, F64),
        (lambda: ac.linear_readout(np.arange(4.0)[:, None], 3 * np.arange(4.0) + 1)[0], lambda: 3 * np.arange(4.0) + 1, F64),
    ],
    "probe_floor": [(lambda: ac.probe_floor(1), lambda: 0.0, F64), (lambda: ac.probe_floor(2), lambda: 0.25, F64)],
    "probe_hidden_states": [
        (lambda: ac.probe_hidden_states(3, np.random.default_rng(2), layers=0, d=4, num_heads=2),
         lambda: np.tile(np.random.default_rng(2).standard_normal(4), (3, 1)), F64),
    ],
    "shaw_relative_embeddings": [(lambda: ac.shaw_relative_embeddings(2, 3, np.array([[7.0]])), lambda: np.full((2, 3, 1), 7.0), F64)],
    "shaw_attention": [
        (lambda: ac.shaw_attention(rn(2, 2), rn(3, 2), rn(3, 1), np.zeros((2, 3, 2)), np.zeros((2, 3, 1))),
         lambda: ref_attention(rn(2, 2), rn(3, 2), rn(3, 1)), F64),
    ],
    "dense_features": [(lambda: ac.dense_features(np.array([[1.0, -1.0]]), np.eye(2), np.ones((2, 1))), lambda: [[1.0]], F64)],
    "dense_scores": [(lambda: ac.dense_scores(np.array([[2.0]]), np.array([[-1.0]]), np.array([[5.0]]), b2=np.array([0.5])),
                      lambda: [[0.5]], F64)],
    "random_scores": [(lambda: ac.random_scores(np.array([[0.0, -np.inf], [1.0, 2.0]]), 2), lambda: [[0.0, -np.inf], [1.0, 2.0]], F64)],
    "factorized_random_scores": [(lambda: ac.factorized_random_scores(np.array([[1.0], [2.0]]), np.array([[3.0], [4.0]]), 2),
                                  lambda: [[3.0, 4.0], [6.0, 8.0]], F64)],
    "factorized_dense_scores": [(lambda: ac.factorized_dense_scores(np.array([[3.0]]), np.array([[4.0]])), lambda: [[12.0]], F64)],
    "mixture_weights": [(lambda: ac.mixture_weights(np.array([5.0])), lambda: [1.0], F64),
                        (lambda: ac.mixture_weights(np.array([1000.0, 0.0], F32)), lambda: [1.0, 0.0], F32)],
    "mixture_scores": [(lambda: ac.mixture_scores([np.array([[1.0, -np.inf], [0.0, 2.0]])] * 2, [0.0, 3.0]),
                        lambda: [[1.0, -np.inf], [0.0, 2.0]], F64),
                       (lambda: ac.mixture_scores([np.eye(2), np.ones((2, 2))], [0.0, 0.0]), lambda: [[1.0, 0.5], [0.5, 1.0]], F64)],
    "synthesizer_attention": [
        (lambda: ac.synthesizer_attention(np.eye(2), np.array([[0.0, -np.inf], [-np.inf, 0.0]]), np.eye(2)), lambda: np.eye(2), F64),
        (lambda: ac.synthesizer_attention(rn(3, 2), rn(3, 3), rn(2, 2)),
         lambda: np.array([ref_softmax_row(r) for r in rn(3, 3)]) @ ref_matmul(rn(3, 2), rn(2, 2)), F64),
    ],
    "synthesizer_costs": [
        (lambda: ac.synthesizer_costs(1, 1)["vanilla"]["score_flops"], lambda: 4 + 2, F64),
        (lambda: ac.synthesizer_costs(1, 1)["random"]["flops"], lambda: 2 + 2, F64),
    ],
    "BlockParams": [(lambda: ac.BlockParams(*range(6)).w2, lambda: 5, F64),
                    (lambda: ac.BlockParams(*range(6)).beta2 is None, lambda: True, F64)],
    "NORMALIZERS": [
        (lambda: [ac.attention_weights(rn(2, 3), rn(4, 3), normalize=kind) for kind in ac.NORMALIZERS],
         lambda: [ref_weights(rn(2, 3), rn(4, 3), normalize=kind) for kind in ("softmax", "l2", "relu2", "none")], F64),
    ],
    # the backward pass: closed forms worked by hand (see each function's Notes for the formula)
    "softmax_vjp": [
        (lambda: ac.softmax_vjp(np.array([0.0, 0.0]), np.array([1.0, 0.0])), lambda: [0.25, -0.25], F64),
        (lambda: ac.softmax_vjp(np.array([0.0, -np.inf, 0.0]), np.array([1.0, 5.0, 0.0])), lambda: [0.25, 0.0, -0.25], F64),
        (lambda: ac.softmax_vjp(np.zeros((2, 1), F16), np.array([[1.0], [0.0]], F16), axis=0), lambda: [[0.25], [-0.25]], F16),
    ],
    "normalize_vjp": [
        (lambda: ac.normalize_vjp(np.array([[0.0, math.log(2.0)]]), np.ones((1, 2)), normalize="none"), lambda: [[1.0, 2.0]], F64),
        (lambda: ac.normalize_vjp(np.array([[-1.0, 2.0]]), np.ones((1, 2)), normalize="relu2"), lambda: [[0.0, 2.0]], F64),
        (lambda: ac.normalize_vjp(np.zeros((1, 2)), np.array([[1.0, 0.0]]), normalize="l2"),
         lambda: [[1 / (2 * math.sqrt(2)), -1 / (2 * math.sqrt(2))]], F64),
    ],
    "attention_vjp": [
        # one key: A = 1, so dS = 0 (dq = dk = 0) and dv is the sum of g over the queries
        (lambda: list(ac.attention_vjp(rn(2, 3), rn(1, 3), rn(1, 2), rn(2, 2))),
         lambda: [np.zeros((2, 3)), np.zeros((1, 3)), np.asarray(rn(2, 2), L).sum(axis=0, keepdims=True)], F64),
        # q = 0: uniform weights 1/m, dk = 0, dq_i = scale/m sum_j (g_i.v_j - mean_j' g_i.v_j') k_j
        (lambda: list(ac.attention_vjp(np.zeros((2, 2)), rn(3, 2), rn(3, 1), rn(2, 1), scale=0.5)),
         lambda: [np.array([[L(0.5) / 3 * sum((rn(2, 1)[i, 0] * rn(3, 1)[j, 0] - sum(rn(2, 1)[i, 0] * rn(3, 1)[t, 0] for t in range(3)) / 3)
                                              * rn(3, 2)[j, c] for j in range(3)) for c in range(2)] for i in range(2)], L),
                  np.zeros((3, 2)), np.array([[sum(rn(2, 1)[:, 0]) / 3]] * 3, L)], F64),
    ],
    "attention_bias_vjp": [
        # "none" with q = k = 0 and bias 0: w = 1, so dv_j = sum_i g_i and dbias = g v^T
        (lambda: list(ac.attention_bias_vjp(np.zeros((2, 2)), np.zeros((3, 2)), rn(3, 1), rn(2, 1), bias=np.zeros((2, 3)), normalize="none")),
         lambda: [np.zeros((2, 2)), np.zeros((3, 2)), np.full((3, 1), float(np.sum(rn(2, 1)))), ref_matmul(rn(2, 1), rn(3, 1).T)], F64),
    ],
    "relative_bias_vjp": [(lambda: ac.relative_bias_vjp(np.arange(6.0).reshape(2, 3)), lambda: [3.0, 4.0, 6.0, 2.0], F64)],
    "rope_vjp": [(lambda: ac.rope_vjp(np.array([[1.0, 0.0]]), positions=[2.0], base=7.0), lambda: [[math.cos(2.0), -math.sin(2.0)]], F64)],
    "layer_norm_vjp": [
        (lambda: ac.layer_norm_vjp(np.array([[1.0, 2.0, 3.0]]), np.array([[1.0, 0.0, 0.0]]), eps=0.0),
         lambda: [[math.sqrt(1.5) / 6, -math.sqrt(1.5) / 3, math.sqrt(1.5) / 6]], F64),
        (lambda: ac.layer_norm_vjp(np.ones((1, 3)), np.array([[1.0, 2.0, 3.0]]), eps=0.25), lambda: [[-2.0, 0.0, 2.0]], F64),
        (lambda: list(ac.layer_norm_vjp(np.array([[1.0, 2.0, 3.0]]), np.array([[1.0, 0.0, 0.0]]), gamma=np.zeros(3), eps=0.0)),
         lambda: [np.zeros((1, 3)), np.array([-math.sqrt(1.5), 0.0, 0.0]), np.array([1.0, 0.0, 0.0])], F64),
    ],
    "linear_vjp": [(lambda: list(ac.linear_vjp(np.array([[1.0, 2.0]]), np.ones((2, 1)), np.array([[3.0]]))),
                    lambda: [np.array([[3.0, 3.0]]), np.array([[3.0], [6.0]]), np.array([3.0])], F64)],
    "ffn_vjp": [(lambda: list(ac.ffn_vjp(np.array([[1.0]]), np.array([[1.0, -1.0]]), None, np.array([[2.0], [5.0]]), np.array([[1.0]]))),
                 lambda: [np.array([[2.0]]), np.array([[2.0, 0.0]]), np.array([2.0, 0.0]), np.array([[1.0], [0.0]]), np.array([1.0])], F64)],
    "shaw_attention_vjp": [
        # one key: w = 1, dS = 0, dv = sum_i g_i and drel_v[i, 0] = g_i
        (lambda: list(ac.shaw_attention_vjp(rn(2, 2), rn(1, 2), rn(1, 1), np.zeros((2, 1, 2)), np.zeros((2, 1, 1)), rn(2, 1))),
         lambda: [np.zeros((2, 2)), np.zeros((1, 2)), np.full((1, 1), float(np.sum(rn(2, 1)))), np.zeros((2, 1, 2)),
                  np.asarray(rn(2, 1), L)[:, None, :]], F64),
    ],
    "shaw_relative_embeddings_vjp": [(lambda: ac.shaw_relative_embeddings_vjp(np.ones((2, 4, 1)), 1), lambda: [[1.0], [2.0], [5.0]], F64)],
    "multi_head_attention_vjp": [
        # zero weights, no biases: the output is 0 whatever x, so only b_o (the sum of g over the tokens) is nonzero
        (lambda: list(ac.multi_head_attention_vjp(rn(3, 4), *[np.zeros((4, 4))] * 4, 2, rn(3, 4, seed=1))[:9]),
         lambda: [np.zeros((3, 4))] + [np.zeros((4, 4))] * 4 + [np.zeros(4)] * 3 + [np.asarray(rn(3, 4, seed=1), L).sum(axis=0)], F64),
    ],
    "transformer_block_vjp": [
        # zero weights, no biases, pre-LN: both branches output 0 whatever their input, so dx = g and every weight gets 0
        (lambda: [ac.transformer_block_vjp(rn(3, 4), ac.BlockParams(*[np.zeros((4, 4))] * 6), 2, rn(3, 4, seed=1), placement="pre")[0],
                  *ac.transformer_block_vjp(rn(3, 4), ac.BlockParams(*[np.zeros((4, 4))] * 6), 2, rn(3, 4, seed=1), placement="pre")[1][:6]],
         lambda: [np.asarray(rn(3, 4, seed=1), L)] + [np.zeros((4, 4))] * 6, F64),
    ],
    "gradient_descent": [(lambda: ac.gradient_descent(_quad, [np.zeros(1)], steps=1, lr=0.5)[0][0], lambda: [3.0], F64),
                         (lambda: ac.gradient_descent(_quad, [np.zeros(1)], steps=0, lr=0.5)[1], lambda: np.zeros(0), F64)],
    "adam": [(lambda: ac.adam(_quad, [np.zeros(1)], steps=1, lr=0.1)[0][0], lambda: [0.1 * 6 / (6 + 1e-8)], F64)],
    # Z95: the published 97.5% quantile of the standard normal; the closed forms at k = 0 and k = n
    "wilson_interval": [(lambda: list(ac.wilson_interval(np.array([0, 20]), 20)),
                         lambda: [np.array([0.0, 20 / (20 + Z95**2)]), np.array([Z95**2 / (20 + Z95**2), 1.0])], F64)],
    # two values: sd = |difference| / sqrt(2), and the t quantile of 1 degree of freedom is tan(pi c / 2) (Cauchy)
    "mean_interval": [(lambda: list(ac.mean_interval(np.array([[0.0, 0.0, 0.0], [1.0, 2.0, 4.0]]), axis=0)),
                       lambda: [np.array([0.5, 1.0, 2.0]), np.array([1.0, 2.0, 4.0]) / math.tan(math.pi * 0.025) / 2], F64)],
    "t_quantile": [(lambda: ac.t_quantile(2, 0.9), lambda: 0.9 * math.sqrt(2 / (1 - 0.81)), F64),
                   (lambda: ac.t_quantile(1, 0.5), lambda: 1.0, F64)],
}


# --------------------------------------------------------------------------------------
# The tests.
# --------------------------------------------------------------------------------------
def test_every_export_has_cases():
    exported = set(ac.__all__)
    assert all(hasattr(ac, name) for name in exported)
    for table_name, table in (("ROLES", ROLES), ("INVALID", INVALID), ("EDGE", EDGE)):
        assert set(table) == exported, f"{table_name}: missing {sorted(exported - set(table))}, stale {sorted(set(table) - exported)}"
        assert all(table[name] or table_name == "ROLES" for name in exported), table_name
    for name in exported:
        assert _valid(name, np.float64) is not None or name == "NORMALIZERS", name


def _check_error(info, errors, names):
    # the facts every message states (tests/messages.py): each name as a whole word, short
    assert isinstance(info.value, errors), f"{type(info.value).__name__}: {info.value}"
    assert_message(info, names=names)


@pytest.mark.parametrize("case", GENERATED, ids=[c[0] for c in GENERATED])
def test_generated_invalid_call_raises_naming_the_argument(case):
    _, name, kwargs, errors, arg = case
    with pytest.raises((ValueError, TypeError)) as info:
        getattr(ac, name)(**kwargs)
    _check_error(info, errors, [arg])


def test_valid_calls_behind_the_generated_cases_succeed():
    # the generated cases are only meaningful if the call they mutate is valid
    for name in ROLES:
        for dt in DTYPES:
            kwargs = valid_call(name, dt)
            if kwargs is not None:
                getattr(ac, name)(**kwargs)


_INVALID = [(f"{name}-{i}", *case) for name, cases in INVALID.items() for i, case in enumerate(cases)]


@pytest.mark.parametrize("case", _INVALID, ids=[c[0] for c in _INVALID])
def test_invalid_call_raises_naming_the_argument(case):
    _, call, error, names = case
    with pytest.raises((ValueError, TypeError)) as info:
        call()
    _check_error(info, error, names)


def _edge_params():
    out = []
    for name, cases in EDGE.items():
        for i, case in enumerate(cases):
            if isinstance(case, type(pytest.param(None))):
                out.append(pytest.param(*case.values, marks=case.marks, id=f"{name}-{i}"))
            else:
                out.append(pytest.param(*case, id=f"{name}-{i}"))
    return out


@pytest.mark.parametrize("call, reference, dtype", _edge_params())
def test_edge_case_matches_independent_reference(call, reference, dtype):
    got = call()
    want = reference()
    if isinstance(want, list) and want and isinstance(want[0], np.ndarray) and isinstance(got, list):
        for g, w in zip(got, want, strict=True):
            close(g, w, dtype)
        return
    if isinstance(want, (bool, int)) and not isinstance(want, np.ndarray) and np.ndim(got) == 0:
        assert got == want
        return
    close(np.asarray(got, dtype=float) if not isinstance(got, np.ndarray) else got, np.asarray(want, dtype=float), dtype)
