"""The benchmark suite behind `make bench` and the performance appendix.

Usage: python bench/run.py [--quick] [--targets] [--threads N]

Measures, side by side in one run and as ratios (so that the machine's speed
cancels):

* the workload matrix: ``attncore`` beside PyTorch's CPU kernels on the same
  inputs, a labelled reference with no target (numpy's two products alone take about as
  long as torch's fused kernel) (single and batched multi-head attention, causal by flag and by
  boolean mask, cross-attention with m != n, float32 and float64,
  ``multi_head_attention`` with its projections against
  ``torch.nn.MultiheadAttention``, ``linear_attention`` causal and not against
  the same formula written in torch; ``scaled_dot_product_attention`` gets 4-D
  tensors, so that its fused kernel runs); the two sides take turns of a few calls each, with the same
  number of threads (``--threads``, 2 by default, for OpenBLAS and for torch),
  and the first call of each turn (the cost of switching libraries) is kept
  apart; every pair is checked to compute the same answer; without a mask,
  numpy's two products (``Q K^T`` and ``A V``) are timed in the same turns,
  over full score matrices and in attncore's own blocks (the floor of its
  design);
* ``attncore.attention`` against the GEMM bound, the time of numpy's two matrix
  products over the same data, beside the exponentials in its block size, and
  the floating-point floor ``4 n^2 d`` FLOPs at the SGEMM rate (measured at the
  start and the end of the run, the higher kept), for information;
* ``attncore.softmax`` over an n x n matrix against the memory-bandwidth bound
  of reading and writing that matrix once (a copy);
* linear attention against softmax attention over n, with the measured
  crossover and the FLOP model's prediction;
* peak memory (tracemalloc) of softmax attention, of its full weight matrix,
  and of linear attention, against n.

Every time is the minimum over the calls of interleaved turns (the least
disturbed run on a shared machine); medians and maxima are kept in the JSON.  Writes
bench/results.json, the tables the performance appendix includes
(bench/tables/*.csv) and the figures (bench/figures/), and prints one PASS/FAIL
line per target: what the design of attncore controls (``TARGET_*`` below).
Without PyTorch (``pip install -r requirements-bench.txt``, which `make bench`
does) the reference columns are skipped.  ``--targets`` times the three targets
alone, without torch, and writes nothing (a smoke test).
"""

from __future__ import annotations

import os
import sys


def _threads(argv):
    """``--threads N`` from the command line: read before numpy starts its BLAS threads."""
    for i, arg in enumerate(argv):
        if arg == "--threads" and i + 1 < len(argv):
            return int(argv[i + 1])
        if arg.startswith("--threads="):
            return int(arg.split("=", 1)[1])
    return 2


THREADS = _threads(sys.argv[1:])
for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[_var] = str(THREADS)

import argparse  # noqa: E402
import csv  # noqa: E402
import json  # noqa: E402
import math  # noqa: E402
import platform  # noqa: E402
import statistics  # noqa: E402
import subprocess  # noqa: E402
import time  # noqa: E402
import tracemalloc  # noqa: E402
from datetime import datetime, timezone  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402

import attncore  # noqa: E402
from attncore import (  # noqa: E402
    attention,
    attention_vjp,
    attention_weights,
    causal_mask,
    init_block_params,
    multi_head_attention,
    softmax,
    transformer_block,
    transformer_block_vjp,
)
from attncore._attention import BLOCK_ROWS  # noqa: E402  (the blocks attention computes, for its own floors)
from attncore._kernels import gaussian_features, linear_attention, positive_random_features  # noqa: E402

try:
    import torch
    import torch.nn.functional as F

    torch.set_num_threads(THREADS)
except ImportError:  # make bench installs it (requirements-bench.txt); make test does not need it
    torch = None

HERE = Path(__file__).resolve().parent
FIGURES = HERE / "figures"
TABLES = HERE / "tables"

#: Targets, each printed with PASS or FAIL (one head: n = 4096, d = 64, float32).
TARGET_PRODUCTS_RATIO = 2.0  # one head within 2.0x of numpy's two products over the same data
TARGET_CAUSAL_RATIO = 0.6  # causal=True at most 0.6x full attention
TARGET_PEAK_RATIO = 1.0  # peak memory of attention below one n x n float32 score matrix
TARGET_VJP_PEAK_RATIO = 1.0  # peak memory of attention_vjp below one n x n float32 matrix (n = 4096)
TARGET_BLOCK_VJP_RATIO = 3.3  # transformer_block_vjp / transformer_block (post-LN, n=128, d=64, 4 heads, float64, 1 thread)


def stats(times):
    return {"min": min(times), "median": statistics.median(times), "max": max(times), "calls": len(times)}


def race(fns, rounds, burst=1, clock=time.perf_counter):
    """``{name: {min, median, max, calls}}`` seconds: the functions take turns, ``rounds``
    rounds of ``burst`` calls each, after two warm-ups each, so a disturbance of the machine
    hits all of them alike.  With ``burst > 1`` the first call of each turn, the one that
    follows another function's turn, is left out of the statistics (and kept as ``first``):
    it pays for the switch between the two libraries' thread pools and caches, which a user
    who calls one library in a loop does not see; the others are calls in the steady state.
    ``clock=time.process_time`` measures the CPU time of this process instead of the wall
    clock: on one thread, the time of the computation without the waits for a core that a
    shared machine adds."""
    for fn in fns.values():
        fn()
        fn()
    steady, first = {name: [] for name in fns}, {name: [] for name in fns}
    for _ in range(rounds):
        for name, fn in fns.items():
            for call in range(burst):
                start = clock()
                fn()
                (first if burst > 1 and call == 0 else steady)[name].append(clock() - start)
    return {name: stats(t) | ({"first": stats(first[name])} if first[name] else {}) for name, t in steady.items()}


def timeit(fn, repeats):
    return race({"fn": fn}, repeats)["fn"]


def repeats_for(n):
    return 5 if n >= 4096 else 9


#: Rounds of each workload of the matrix, and calls per turn in a round: the first call of a
#: turn pays for switching libraries, so 7 x (3 - 1) = 14 steady calls each.
MATRIX_ROUNDS, MATRIX_BURST = 7, 3


def ms(seconds):
    return f"{seconds * 1e3:.2f}"


# ---------------------------------------------------------------- the matrix against PyTorch


def no_grad(fn):
    def run():
        with torch.inference_mode():
            return fn()
    return run


def torch_positive_features(x, omega):
    """attncore's positive random features, exp(x . w - |x|^2 / 2) / sqrt(m), in torch."""
    return torch.exp(x @ omega.T - 0.5 * (x * x).sum(-1, keepdim=True)) / math.sqrt(omega.shape[0])


def torch_linear_attention(q, k, v, omega, causal, chunk=64):
    """The same linear attention in torch: phi(Q) (phi(K)^T V) over phi(Q) phi(K)^T 1;
    causal by chunks (a running sum of phi(K)^T V plus a masked product inside each chunk)."""
    fq, fk = torch_positive_features(q, omega), torch_positive_features(k, omega)
    if not causal:
        kv = fk.transpose(-1, -2) @ v  # (D, v)
        return (fq @ kv) / (fq @ fk.sum(-2, keepdim=True).transpose(-1, -2))
    n = q.shape[-2]
    out = torch.empty(q.shape[:-1] + (v.shape[-1],), dtype=q.dtype)
    state = torch.zeros(fq.shape[-1], v.shape[-1], dtype=q.dtype)
    norm = torch.zeros(fq.shape[-1], dtype=q.dtype)
    tri = torch.ones(chunk, chunk, dtype=torch.bool).tril()
    for s in range(0, n, chunk):
        e = min(s + chunk, n)
        a = (fq[s:e] @ fk[s:e].T).masked_fill(~tri[: e - s, : e - s], 0)
        num = fq[s:e] @ state + a @ v[s:e]
        den = fq[s:e] @ norm + a.sum(-1)
        out[s:e] = num / den[:, None]
        state = state + fk[s:e].T @ v[s:e]
        norm = norm + fk[s:e].sum(0)
    return out


def workloads(rng, quick):
    """(name, description, attncore function, torch function, flops) for every workload of the matrix."""
    def qkv(shape_q, shape_kv=None, dtype=np.float32, dv=None):
        shape_kv = shape_kv or shape_q
        q = rng.standard_normal(shape_q).astype(dtype)
        k = rng.standard_normal(shape_kv).astype(dtype)
        v = rng.standard_normal(shape_kv[:-1] + (dv or shape_kv[-1],)).astype(dtype)
        return q, k, v

    big = 2048 if quick else 4096
    out = []

    def sdpa(name, what, q, k, v, causal=False, bool_mask=False):
        n, m, d = q.shape[-2], k.shape[-2], q.shape[-1]
        # (batch, heads, n, d) for torch: its fused CPU kernel takes 4-D input only, and
        # anything else falls back to the unfused formula, which is several times slower.
        tq, tk, tv = (torch.from_numpy(a).reshape((1,) * (4 - a.ndim) + a.shape) for a in (q, k, v))
        shape = q.shape[:-1] + (v.shape[-1],)  # (..., n, v) as attncore returns it
        heads = math.prod(q.shape[:-2])
        flops = 4 * heads * n * m * d / (2 if causal or bool_mask else 1)
        # Without a mask: the two products computed the straightforward way, for reference.
        products = None if causal or bool_mask else (matmuls(q, k, v), blocked_matmuls(q, k, v))
        if bool_mask:
            mask = causal_mask(n, m)
            tmask = torch.from_numpy(mask)
            out.append((name, what, lambda: attention(q, k, v, mask=mask),
                        no_grad(lambda: F.scaled_dot_product_attention(tq, tk, tv, attn_mask=tmask).reshape(shape)),
                        flops, products))
        else:
            out.append((name, what, lambda: attention(q, k, v, causal=causal),
                        no_grad(lambda: F.scaled_dot_product_attention(tq, tk, tv, is_causal=causal).reshape(shape)),
                        flops, products))

    q, k, v = qkv((big, 64))
    sdpa("one head", f"n = {big}, d = 64, float32", q, k, v)
    sdpa("one head, causal", f"n = {big}, d = 64, float32, causal=True / is_causal=True", q, k, v, causal=True)
    sdpa("one head, causal mask", f"n = {big}, d = 64, float32, boolean causal mask", q, k, v, bool_mask=True)
    q, k, v = qkv((4, 8, 1024, 64))
    sdpa("batched heads", "batch 4, 8 heads, n = 1024, head width 64, float32", q, k, v)
    sdpa("batched heads, causal", "batch 4, 8 heads, n = 1024, head width 64, float32, causal", q, k, v, causal=True)
    q, k, v = qkv((8, 8, 256, 64))
    sdpa("small heads", "batch 8, 8 heads, n = 256, head width 64, float32", q, k, v)
    q, k, v = qkv((2, 8, 512, 64), (2, 8, 2048, 64))
    sdpa("cross-attention", "batch 2, 8 heads, n = 512 queries, m = 2048 keys, float32", q, k, v)
    q, k, v = qkv((2048, 64), dtype=np.float64)
    sdpa("one head, float64", "n = 2048, d = 64, float64", q, k, v)
    q, k, v = qkv((2, 8, 512, 64), dtype=np.float64)
    sdpa("batched heads, float64", "batch 2, 8 heads, n = 512, head width 64, float64", q, k, v)

    # multi_head_attention with its four projections against nn.MultiheadAttention, same weights.
    b, n, d, h = (4 if quick else 8), 512, 512, 8
    x = rng.standard_normal((b, n, d)).astype(np.float32)
    ws = [(rng.standard_normal((d, d)) / math.sqrt(d)).astype(np.float32) for _ in range(4)]
    bs = [(0.1 * rng.standard_normal(d)).astype(np.float32) for _ in range(4)]
    mha = torch.nn.MultiheadAttention(d, h, batch_first=True)
    with torch.no_grad():
        mha.in_proj_weight.copy_(torch.from_numpy(np.concatenate([w.T for w in ws[:3]])))  # torch uses x @ W^T
        mha.in_proj_bias.copy_(torch.from_numpy(np.concatenate(bs[:3])))
        mha.out_proj.weight.copy_(torch.from_numpy(ws[3].T))
        mha.out_proj.bias.copy_(torch.from_numpy(bs[3]))
    mha.eval()
    tx = torch.from_numpy(x)
    flops = 4 * 2 * b * n * d * d + 4 * b * n * n * d
    out.append(("multi_head_attention", f"batch {b}, n = {n}, d = {d}, {h} heads, with projections and biases",
                lambda: multi_head_attention(x, *ws, h, b_q=bs[0], b_k=bs[1], b_v=bs[2], b_o=bs[3]),
                no_grad(lambda: mha(tx, tx, tx, need_weights=False)[0]), flops, None))

    # linear attention: the same formula in torch, with the same random features.
    n, d, features = big, 64, 256
    omega = gaussian_features(features, d, rng).astype(np.float32)
    q, k, v = ((rng.standard_normal((n, d)) / d**0.25).astype(np.float32) for _ in range(3))
    tq, tk, tv, tom = (torch.from_numpy(a) for a in (q, k, v, omega))
    fmap = lambda z: positive_random_features(z, omega)  # noqa: E731
    for causal in (False, True):
        out.append((f"linear_attention{', causal' if causal else ''}",
                    f"n = {n}, d = 64, {features} positive random features, float32",
                    lambda causal=causal: linear_attention(q, k, v, fmap, causal=causal),
                    no_grad(lambda causal=causal: torch_linear_attention(tq, tk, tv, tom, causal)),
                    4 * n * d * features + 4 * n * features * d, None))
    return out


def bench_matrix(rng, quick):
    """Every workload of the matrix: attncore and torch checked to agree, then timed in turns
    (with numpy's two products where there is no mask); ratios of minima and of medians."""
    if torch is None:
        print("matrix     skipped: torch is not installed (pip install -r requirements-bench.txt)")
        return []
    rows = []
    for name, what, ours, theirs, flops, products in workloads(rng, quick):
        a, b = np.asarray(ours()), theirs().numpy()
        if a.shape != b.shape:  # compared below elementwise: a broadcast would hide a wrong shape
            raise AssertionError(f"{name}: attncore returns {a.shape}, torch {b.shape}")
        scale = max(1.0, float(np.max(np.abs(b))))
        agree = float(np.max(np.abs(a - b))) / scale  # like for like: the same answer
        tol = 1e-3 if a.dtype == np.float32 else 1e-9
        if not agree <= tol:
            raise AssertionError(f"{name}: attncore and torch differ by {agree:.3g} (relative), beyond {tol}")
        contestants = {"attncore": ours, "torch": theirs}
        if products:
            contestants |= {"matmuls": products[0], "blocked": products[1]}
        t = race(contestants, MATRIX_ROUNDS, MATRIX_BURST)
        rows.append({"workload": name, "what": what, "attncore": t["attncore"], "torch": t["torch"],
                     "matmuls": t.get("matmuls"), "blocked": t.get("blocked"),
                     "ratio": t["attncore"]["min"] / t["torch"]["min"],
                     "ratio_median": t["attncore"]["median"] / t["torch"]["median"],
                     "flops": flops, "max_rel_diff": agree})
        alone = (f"  two products: full scores {ms(t['matmuls']['min'])} ms, in attncore's blocks "
                 f"{ms(t['blocked']['min'])} ms" if products else "")
        print(f"matrix     {name:28s} attncore {ms(t['attncore']['min']):>8} ms  torch {ms(t['torch']['min']):>8} ms  "
              f"ratio {rows[-1]['ratio']:.2f} (medians {rows[-1]['ratio_median']:.2f}){alone}")
    return rows


def matmuls(q, k, v):
    """``Q K^T`` and ``A V`` computed the straightforward way: numpy's matmul over every
    (batch, head) slice at once, the full ``(..., n, m)`` scores written to memory and read
    back, into preallocated outputs (``A`` stands in for the weights: only the time is
    wanted).  A reference, not a strict floor: products over blocks that stay in cache, as
    attncore's, can be faster."""
    scores = np.empty(q.shape[:-1] + (k.shape[-2],), dtype=q.dtype)  # (..., n, m)
    out = np.empty(q.shape[:-1] + (v.shape[-1],), dtype=q.dtype)  # (..., n, v)
    k_t = np.swapaxes(k, -1, -2)  # (..., k, m)

    def run():
        np.matmul(q, k_t, out=scores)
        np.matmul(scores, v, out=out)
    return run


def blocked_matmuls(q, k, v):
    """The two products as ``attncore.attention`` calls them, and nothing else: blocks of
    ``BLOCK_ROWS`` query rows (imported from attncore, so the two cannot drift apart) over
    every batch and head at once.  Without the exponentials and the divisions, this is the
    floor of attncore's own design: attention cannot take less time than the products it makes."""
    n = q.shape[-2]
    k_t = np.swapaxes(k, -1, -2)  # (..., k, m)
    out = np.empty(np.broadcast_shapes(q.shape[:-2], v.shape[:-2]) + (n, v.shape[-1]), dtype=q.dtype)

    def run():
        for start in range(0, n, BLOCK_ROWS):
            rows = slice(start, min(start + BLOCK_ROWS, n))
            out[..., rows, :] = (q[..., rows, :] @ k_t) @ v
    return run


def bench_causal(rng, quick):
    """Causal against full attention, one head, interleaved: blocks of masked keys are skipped."""
    n = 2048 if quick else 4096
    q, k, v = (rng.standard_normal((n, 64)).astype(np.float32) for _ in range(3))
    mask = causal_mask(n)
    t = race({"full": lambda: attention(q, k, v), "causal": lambda: attention(q, k, v, causal=True),
              "causal_mask": lambda: attention(q, k, v, mask=mask)}, repeats_for(n))
    row = {"n": n, "d": 64, "dtype": "float32", **t, "ratio": t["causal"]["min"] / t["full"]["min"],
           "ratio_mask": t["causal_mask"]["min"] / t["full"]["min"]}
    print(f"causal     n={n} full {ms(t['full']['min'])} ms  causal=True {ms(t['causal']['min'])} ms "
          f"(ratio {row['ratio']:.2f})  boolean mask {ms(t['causal_mask']['min'])} ms (ratio {row['ratio_mask']:.2f})")
    return row


# ---------------------------------------------------------------- bounds measured with the same BLAS


def sgemm_rate(quick):
    """FLOP/s of a large square float32 matrix product, the best of 9 runs: the machine's
    SGEMM rate, measured now (``main`` measures it at the start and at the end of the run
    and keeps the higher, the stricter floor)."""
    size = 1024 if quick else 2048
    rng = np.random.default_rng(1)
    a, b = (rng.standard_normal((size, size)).astype(np.float32) for _ in range(2))
    c = np.empty_like(a)
    t = timeit(lambda: np.matmul(a, b, out=c), 9)
    rate = 2 * size**3 / t["min"]
    print(f"sgemm      {size}^3 float32 {ms(t['min'])} ms: {rate / 1e9:.1f} GFLOP/s")
    return {"size": size, "time": t, "flops_per_second": rate}


def bench_attention(rng, quick):
    """Attention, raced with the parts of its work that can be timed alone: its two matrix
    products (``matmuls``: the GEMM bound) and the exponentials of the ``n x n`` scores, one
    block of attncore's size at a time (``block_exp``: what they cost on one core, numpy's
    ufuncs being single-threaded).  The
    square SGEMM of the FLOP floor is not part of the race: its 48 MB of operands would evict
    attention's working set between calls (attention was about 20% slower at n = 4096 when
    tried); :func:`flop_floor` adds the floor afterwards."""
    rows = []
    sizes = [256, 1024] if quick else [256, 1024, 4096]
    for dtype in (np.float32, np.float64):
        for n in sizes:
            d = 64
            q, k, v = (rng.standard_normal((n, d)).astype(dtype) for _ in range(3))
            t = race({"attention": lambda q=q, k=k, v=v: attention(q, k, v), "matmuls": matmuls(q, k, v),
                      "exp": block_exp(q, k)}, repeats_for(n))
            measured, bound = t["attention"], t["matmuls"]
            rows.append({"n": n, "d": d, "dtype": np.dtype(dtype).name, "attention": measured, "gemm_bound": bound,
                         "exp": t["exp"], "ratio": measured["min"] / bound["min"]})
            print(f"attention  n={n:5d} d={d:3d} {np.dtype(dtype).name:7s} {ms(measured['min']):>8} ms  "
                  f"GEMM bound {ms(bound['min']):>8} ms  ratio {rows[-1]['ratio']:.2f}  exp alone {ms(t['exp']['min'])} ms")
    return rows


def block_exp(q, k):
    """``exp`` of all ``n x m`` scores, a block of attncore's size at a time (its
    ``BLOCK_ROWS``), from one block of real scaled scores into another: the exponentials
    as attention computes them, without the products around them."""
    n, rows = q.shape[-2], min(BLOCK_ROWS, q.shape[-2])
    scores = (q[:rows] @ k.T) / math.sqrt(q.shape[-1])  # (rows, m): one block of scaled scores, q's dtype
    exps = np.empty_like(scores)

    def run():
        for _ in range(-(-n // rows)):
            np.exp(scores, out=exps)
    return run


def flop_floor(rows, rate):
    """Add to the float32 rows the FLOP floor, ``4 n^2 d`` FLOPs at the SGEMM ``rate``, and the
    ratios to it of attention, of its two products, and of its exponentials."""
    for row in rows:
        if row["dtype"] == "float32":
            row["flop_floor"] = 4 * row["n"] ** 2 * row["d"] / rate
            row["floor_ratio"] = row["attention"]["min"] / row["flop_floor"]
            row["gemm_floor_ratio"] = row["gemm_bound"]["min"] / row["flop_floor"]
            row["exp_floor_ratio"] = row["exp"]["min"] / row["flop_floor"]
            print(f"floor      n={row['n']:5d} float32 {ms(row['flop_floor'])} ms: attention {row['floor_ratio']:.2f}, "
                  f"two products {row['gemm_floor_ratio']:.2f}, exp {row['exp_floor_ratio']:.2f} times the floor")


def bench_softmax(rng, quick):
    rows = []
    for n in ([1024] if quick else [1024, 4096]):
        x = rng.standard_normal((n, n)).astype(np.float32)
        dst = np.empty_like(x)
        t = race({"softmax": lambda x=x: softmax(x), "copy": lambda x=x, dst=dst: np.copyto(dst, x)}, repeats_for(n))
        rows.append({"n": n, "dtype": "float32", "softmax": t["softmax"], "copy_bound": t["copy"],
                     "ratio": t["softmax"]["min"] / t["copy"]["min"]})
        print(f"softmax    n={n:5d} float32 {ms(t['softmax']['min']):>8} ms  read+write bound "
              f"{ms(t['copy']['min']):>8} ms  ratio {rows[-1]['ratio']:.2f}")
    return rows


def flops_softmax_attention(n, d):
    """Q K^T and A V (2 n^2 d each) plus exp, sum and divide over the n x n scores."""
    return 4 * n * n * d + 3 * n * n


def flops_linear_attention(n, d, m):
    """Features of Q and K (2 n d m each, plus exp), K'^T V and Q'(K'^T V) (2 n m d each), normaliser."""
    return 4 * n * d * m + 2 * n * m + 4 * n * m * d + 2 * n * m


def predicted_crossover(d, m):
    """The n at which the two FLOP counts are equal."""
    # 4 n^2 d + 3 n^2 = n (8 d m + 4 m)  =>  n = m (8 d + 4) / (4 d + 3)
    return m * (8 * d + 4) / (4 * d + 3)


def bench_linear(rng, quick):
    d, m = 64, 256
    omega = gaussian_features(m, d, rng).astype(np.float32)  # float32 like q, k, v: no silent upcast
    feature_map = lambda x: positive_random_features(x, omega)  # noqa: E731
    sizes = [128, 256, 512, 1024, 2048] if quick else [128, 256, 512, 1024, 2048, 4096]
    rows = []
    for n in sizes:
        q, k, v = ((rng.standard_normal((n, d)) / d**0.25).astype(np.float32) for _ in range(3))
        t = race({"softmax": lambda q=q, k=k, v=v: attention(q, k, v), "linear": lambda q=q, k=k, v=v: linear_attention(q, k, v, feature_map)},
                 repeats_for(n))
        soft, lin = t["softmax"], t["linear"]
        rows.append({"n": n, "d": d, "features": m, "softmax": soft, "linear": lin,
                     "flops_softmax": flops_softmax_attention(n, d), "flops_linear": flops_linear_attention(n, d, m)})
        print(f"linear     n={n:5d} softmax {ms(soft['min']):>8} ms  linear {ms(lin['min']):>8} ms")
    measured = None
    for a, b in zip(rows, rows[1:]):
        ra = a["linear"]["min"] / a["softmax"]["min"]
        rb = b["linear"]["min"] / b["softmax"]["min"]
        if ra > 1 >= rb:  # linear becomes the faster one between a and b: interpolate in log n
            t = math.log(ra) / (math.log(ra) - math.log(rb))
            measured = math.exp(math.log(a["n"]) + t * (math.log(b["n"]) - math.log(a["n"])))
            break
    return {"d": d, "features": m, "rows": rows, "measured_crossover": measured,
            "predicted_crossover": predicted_crossover(d, m)}


def peak_bytes(fn):
    tracemalloc.start()
    tracemalloc.reset_peak()
    fn()
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    return peak


def bench_memory(rng, quick):
    d, m = 64, 256
    omega = gaussian_features(m, d, rng).astype(np.float32)
    feature_map = lambda x: positive_random_features(x, omega)  # noqa: E731
    rows = []
    for n in ([512, 1024, 2048] if quick else [512, 1024, 2048, 4096]):
        q, k, v = (rng.standard_normal((n, d)).astype(np.float32) for _ in range(3))
        io = 4 * q.nbytes  # q, k, v and the output
        rows.append({
            "n": n, "d": d, "dtype": "float32",
            "attention": peak_bytes(lambda q=q, k=k, v=v: attention(q, k, v)),
            "weights_then_product": peak_bytes(lambda q=q, k=k, v=v: attention_weights(q, k) @ v),
            "linear": peak_bytes(lambda q=q, k=k, v=v: linear_attention(q, k, v, feature_map)),
            "score_matrix": n * n * 4, "inputs_and_output": io,
        })
        row = rows[-1]
        print(f"memory     n={n:5d} attention {row['attention'] / 2**20:7.2f} MiB  full weights "
              f"{row['weights_then_product'] / 2**20:7.2f} MiB  linear {row['linear'] / 2**20:7.2f} MiB")
    return rows


def dense_attention_vjp(q, k, v, g):
    """The textbook backward over whole n x m matrices (the reference for attention_vjp's memory)."""
    a = attention_weights(q, k)  # (n, m)
    da = g @ v.T  # (n, m)
    ds = a * (da - (da * a).sum(axis=-1, keepdims=True))  # (n, m)
    s = 1 / math.sqrt(q.shape[-1])
    return s * ds @ k, s * ds.T @ q, a.T @ g


def bench_vjp_memory(rng, quick):
    """Peak memory (tracemalloc) of attention_vjp, blocked, beside the dense formula's, float32, d = 64."""
    rows = []
    for n in ([1024, 2048] if quick else [1024, 2048, 4096]):
        q, k, v, g = (rng.standard_normal((n, 64)).astype(np.float32) for _ in range(4))
        rows.append({"n": n, "d": 64, "dtype": "float32", "attention_vjp": peak_bytes(lambda a=(q, k, v, g): attention_vjp(*a)),
                     "dense": peak_bytes(lambda a=(q, k, v, g): dense_attention_vjp(*a)), "score_matrix": n * n * 4})
        print(f"vjp memory n={n:5d} attention_vjp {rows[-1]['attention_vjp'] / 2**20:7.2f} MiB  "
              f"dense formula {rows[-1]['dense'] / 2**20:7.2f} MiB")
    return rows


def block_products(x, p, h):
    """The matrix products of one post-LN block's forward alone (the floor of its cost)."""
    n, d = x.shape
    def run():
        q, k, v = ((x @ w).reshape(n, h, d // h).swapaxes(0, 1) for w in (p.w_q, p.w_k, p.w_v))  # (h, n, k)
        o = ((q @ k.swapaxes(-1, -2)) @ v).swapaxes(0, 1).reshape(n, d) @ p.w_o  # (n, d)
        return (o @ p.w1) @ p.w2
    return run


def bench_block_vjp(quick):
    """transformer_block_vjp against transformer_block in one interleaved race (post-LN, n = 128,
    d = 64, f = 256, 4 heads, float64), with the forward's matrix products alone as its floor; CPU
    time of this one-thread process, so that other work on a shared machine does not enter."""
    rng = np.random.default_rng(0)
    n, d, h = 128, 64, 4
    p = init_block_params(d, 4 * d, rng)
    x, g = rng.standard_normal((n, d)), rng.standard_normal((n, d))
    t = race({"forward": lambda: transformer_block(x, p, h), "backward": lambda: transformer_block_vjp(x, p, h, g),
              "products": block_products(x, p, h)}, 15 if quick else 60, clock=time.process_time)
    return {"n": n, "d": d, "d_ff": 4 * d, "heads": h, "dtype": "float64", "threads": THREADS, **t,
            "ratio": t["backward"]["min"] / t["forward"]["min"],
            "ratio_median": t["backward"]["median"] / t["forward"]["median"],
            "forward_over_products": t["forward"]["min"] / t["products"]["min"]}


def block_vjp_one_thread(quick):
    """:func:`bench_block_vjp` on one thread: in this process if it has one, else in a child started with one."""
    if THREADS == 1:
        return bench_block_vjp(quick)
    cmd = [sys.executable, __file__, "--threads", "1", "--block-vjp"] + (["--quick"] if quick else [])
    r = json.loads(subprocess.run(cmd, capture_output=True, text=True, check=True).stdout.splitlines()[-1])
    print(f"block vjp  backward / forward {r['ratio']:.2f} (medians {r['ratio_median']:.2f}), "
          f"forward / its products {r['forward_over_products']:.2f}")
    return r


def machine():
    cpu = platform.processor()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    try:
        blas = np.show_config(mode="dicts").get("Build Dependencies", {}).get("blas", {})
    except TypeError:  # older numpy
        blas = {}
    return {
        "cpu": cpu, "cores": os.cpu_count(), "platform": platform.platform(),
        "python": platform.python_version(), "numpy": np.__version__, "attncore": attncore.__version__,
        "torch": torch.__version__ if torch is not None else None, "threads": THREADS,
        "load_average": os.getloadavg()[0] if hasattr(os, "getloadavg") else None,
        "blas": {k: blas.get(k) for k in ("name", "version", "openblas configuration") if k in blas},
    }


def targets(results):
    """One ``{target, pass, detail}`` per target (the constants ``TARGET_*`` above); PyTorch
    is a reference, never a target."""
    lines = []
    big = [r for r in results["attention"] if r["d"] == 64 and r["dtype"] == "float32"]
    if big:
        r = max(big, key=lambda r: r["n"])
        lines.append((f"one head within {TARGET_PRODUCTS_RATIO:.1f}x of numpy's two products over the same data "
                      f"(n={r['n']}, d=64, float32)", r["ratio"] <= TARGET_PRODUCTS_RATIO,
                      f"ratio {r['ratio']:.2f} ({ms(r['attention']['min'])} ms, the two products "
                      f"{ms(r['gemm_bound']['min'])} ms; medians {r['attention']['median'] / r['gemm_bound']['median']:.2f})"))
    c = results["causal"]
    lines.append((f"causal=True at most {TARGET_CAUSAL_RATIO}x full attention (n={c['n']}, d=64, float32)",
                  c["ratio"] <= TARGET_CAUSAL_RATIO,
                  f"causal=True {c['ratio']:.2f}, boolean causal mask {c['ratio_mask']:.2f}"))
    r = max(results["memory"], key=lambda r: r["n"])
    ratio = r["attention"] / r["score_matrix"]
    lines.append((f"peak memory of attention below one n x n float32 score matrix (n={r['n']})",
                  ratio < TARGET_PEAK_RATIO, f"{r['attention'] / 2**20:.2f} MiB, {ratio:.2f} of the "
                  f"{r['score_matrix'] / 2**20:.0f} MiB matrix"))
    r = max(results["vjp_memory"], key=lambda r: r["n"])
    ratio = r["attention_vjp"] / r["score_matrix"]
    lines.append((f"peak memory of attention_vjp below one n x m float32 matrix (n=m={r['n']}, d=64)",
                  ratio < TARGET_VJP_PEAK_RATIO, f"{r['attention_vjp'] / 2**20:.2f} MiB, {ratio:.2f} of the "
                  f"{r['score_matrix'] / 2**20:.0f} MiB matrix (the dense formula {r['dense'] / 2**20:.0f} MiB)"))
    b = results["block_vjp"]
    lines.append((f"transformer_block_vjp at most {TARGET_BLOCK_VJP_RATIO}x transformer_block, recompute included "
                  f"(post-LN, n={b['n']}, d={b['d']}, {b['heads']} heads, float64, {b['threads']} thread)",
                  b["ratio"] <= TARGET_BLOCK_VJP_RATIO,
                  f"ratio {b['ratio']:.2f} ({ms(b['backward']['min'])} ms / {ms(b['forward']['min'])} ms; medians "
                  f"{b['ratio_median']:.2f}); the forward is {b['forward_over_products']:.2f}x its matrix products"))
    return [{"target": name, "pass": bool(ok), "detail": detail} for name, ok, detail in lines]


def run_targets(rng, quick):
    """The three targets alone, without torch, writing nothing: a smoke test of the code."""
    results = {"causal": bench_causal(rng, quick)}
    n = 2048 if quick else 4096
    q, k, v = (rng.standard_normal((n, 64)).astype(np.float32) for _ in range(3))
    t = race({"attention": lambda: attention(q, k, v), "matmuls": matmuls(q, k, v)}, repeats_for(n))
    results["attention"] = [{"n": n, "d": 64, "dtype": "float32", "attention": t["attention"],
                             "gemm_bound": t["matmuls"], "ratio": t["attention"]["min"] / t["matmuls"]["min"]}]
    results["memory"] = [{"n": n, "attention": peak_bytes(lambda: attention(q, k, v)), "score_matrix": n * n * 4}]
    results["vjp_memory"] = bench_vjp_memory(rng, quick)[-1:]
    results["block_vjp"] = block_vjp_one_thread(quick)
    return targets(results)


def tables(results):
    """The appendix's tables as CSV files, which its ``csv-table`` directives include."""
    TABLES.mkdir(exist_ok=True)

    def write(name, header, rows):
        with open(TABLES / name, "w", newline="") as f:
            w = csv.writer(f, lineterminator="\n")
            w.writerow(header)
            w.writerows(rows)

    m = results["machine"]
    blas = m.get("blas") or {}
    write("machine.csv", ["what", "value"], [
        ["measured", results["date"] + (" (quick run)" if results.get("quick") else "")],
        ["processor", f"{m['cpu']}, {m['cores']} cores"],
        ["platform", m["platform"]],
        ["Python / numpy / torch", f"{m['python']} / {m['numpy']} / {m.get('torch') or 'not installed'}"],
        ["threads (OpenBLAS and torch)", m.get("threads", "")],
        ["load average (1 minute) at the start", f"{m['load_average']:.2f}" if m.get("load_average") is not None else ""],
        ["BLAS", " ".join(str(v) for v in blas.values()) or "unknown"],
        ["SGEMM rate", f"{results['sgemm']['flops_per_second'] / 1e9:.1f} GFLOP/s ({results['sgemm']['size']}^3, the higher of "
                       f"{results['sgemm']['start'] / 1e9:.1f} at the start and {results['sgemm']['end'] / 1e9:.1f} at the end)"],
        ["whole suite", f"{results['seconds']:.0f} s"],
    ])
    write("targets.csv", ["target", "result", "measured"],
          [[t["target"], "PASS" if t["pass"] else "FAIL", t["detail"]] for t in results["targets"]])
    write("matrix.csv", ["workload", "shape", "attncore (ms)", "PyTorch (ms)", "ratio", "ratio of medians",
                         "attncore GFLOP/s", "numpy's two products, full scores (ms)",
                         "the same in attncore's blocks (ms)"],
          [[r["workload"], r["what"], ms(r["attncore"]["min"]), ms(r["torch"]["min"]), f"{r['ratio']:.2f}",
            f"{r['ratio_median']:.2f}", f"{r['flops'] / r['attncore']['min'] / 1e9:.1f}",
            ms(r["matmuls"]["min"]) if r.get("matmuls") else "", ms(r["blocked"]["min"]) if r.get("blocked") else ""]
           for r in results["matrix"]])
    c = results["causal"]
    write("causal.csv", ["n", "full (ms)", "causal=True (ms)", "boolean causal mask (ms)", "causal / full", "mask / full"],
          [[c["n"], ms(c["full"]["min"]), ms(c["causal"]["min"]), ms(c["causal_mask"]["min"]),
            f"{c['ratio']:.2f}", f"{c['ratio_mask']:.2f}"]])
    write("attention.csv", ["n", "d", "dtype", "attention (ms)", "GEMM bound (ms)", "ratio", "one exp pass (ms)",
                            "FLOP floor (ms)", "ratio to floor", "GEMM bound / floor", "exp pass / floor"],
          [[r["n"], r["d"], r["dtype"], ms(r["attention"]["min"]), ms(r["gemm_bound"]["min"]), f"{r['ratio']:.2f}",
            ms(r["exp"]["min"])] + ([ms(r["flop_floor"]), f"{r['floor_ratio']:.2f}", f"{r['gemm_floor_ratio']:.2f}",
                                     f"{r['exp_floor_ratio']:.2f}"] if "flop_floor" in r else ["", "", "", ""])
           for r in results["attention"]])
    write("softmax.csv", ["n", "softmax (ms)", "copy (ms)", "ratio"],
          [[r["n"], ms(r["softmax"]["min"]), ms(r["copy_bound"]["min"]), f"{r['ratio']:.2f}"] for r in results["softmax"]])
    lin = results["linear"]
    write("linear.csv", ["n", "softmax (ms)", "linear (ms)", "FLOPs softmax / linear"],
          [[r["n"], ms(r["softmax"]["min"]), ms(r["linear"]["min"]), f"{r['flops_softmax'] / r['flops_linear']:.2f}"]
           for r in lin["rows"]]
          + [["crossover", "", f"measured: {lin['measured_crossover']:.0f}" if lin["measured_crossover"] else "measured: none",
              f"FLOP model: {lin['predicted_crossover']:.0f}"]])
    write("memory.csv", ["n", "attncore.attention (MiB)", "full weights then A V (MiB)", "linear attention (MiB)", "one n x n matrix (MiB)"],
          [[r["n"], f"{r['attention'] / 2**20:.2f}", f"{r['weights_then_product'] / 2**20:.2f}",
            f"{r['linear'] / 2**20:.2f}", f"{r['score_matrix'] / 2**20:.2f}"] for r in results["memory"]])
    write("backward_memory.csv", ["n", "attncore.attention_vjp (MiB)", "dense formula (MiB)", "one n x n matrix (MiB)"],
          [[r["n"], f"{r['attention_vjp'] / 2**20:.2f}", f"{r['dense'] / 2**20:.2f}", f"{r['score_matrix'] / 2**20:.2f}"]
           for r in results["vjp_memory"]])
    b = results["block_vjp"]
    write("backward_cost.csv", ["shape", "forward (ms)", "backward (ms)", "backward / forward", "ratio of medians",
                                "forward's matrix products (ms)", "forward / its products"],
          [[f"post-LN, n={b['n']}, d={b['d']}, f={b['d_ff']}, {b['heads']} heads, {b['dtype']}, {b['threads']} thread",
            ms(b["forward"]["min"]), ms(b["backward"]["min"]), f"{b['ratio']:.2f}", f"{b['ratio_median']:.2f}",
            ms(b["products"]["min"]), f"{b['forward_over_products']:.2f}"]])


def figures(results):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import matplotlib.ticker

    FIGURES.mkdir(exist_ok=True)

    def save(name, ylabel, draw):
        """One figure against the sequence length n: ``draw(ax)`` plots, this labels and writes it."""
        fig, ax = plt.subplots(figsize=(6, 3.6))
        ns = draw(ax)
        ax.set_xscale("log", base=2)
        ax.set_xticks(ns, [str(n) for n in ns])
        ax.xaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
        ax.set_xlabel("sequence length n")
        ax.set_ylabel(ylabel)
        ax.legend(fontsize=8)
        fig.tight_layout()
        fig.savefig(FIGURES / name, dpi=110)
        plt.close(fig)

    if results["matrix"]:
        rows = results["matrix"]
        fig, ax = plt.subplots(figsize=(6.5, 0.32 * len(rows) + 1.2))
        ratios = [r["ratio"] for r in rows]
        ax.barh(range(len(rows)), ratios, color="tab:blue")
        ax.set_yticks(range(len(rows)), [r["workload"] for r in rows], fontsize=8)
        ax.invert_yaxis()
        ax.axvline(1.0, color="black", lw=0.8, ls=":")
        ax.set_xlabel("attncore time / PyTorch time (same run; a reference, not a target)")
        fig.tight_layout()
        fig.savefig(FIGURES / "matrix_vs_torch.png", dpi=110)
        plt.close(fig)

    def attention_ratios(ax):
        for dtype, marker in (("float32", "o"), ("float64", "s")):
            rows = [r for r in results["attention"] if r["dtype"] == dtype]
            ax.plot([r["n"] for r in rows], [r["ratio"] for r in rows], "-", marker=marker, label=f"{dtype}, d=64, GEMM bound")
        rows = [r for r in results["attention"] if "floor_ratio" in r]
        ax.plot([r["n"] for r in rows], [r["floor_ratio"] for r in rows], "--", marker="o", label="float32, FLOP floor")
        ax.axhline(TARGET_PRODUCTS_RATIO, color="grey", lw=0.8, ls=":")
        return sorted({r["n"] for r in results["attention"]})

    lin = results["linear"]

    def linear_times(ax):
        ns = [r["n"] for r in lin["rows"]]
        ax.plot(ns, [r["softmax"]["min"] * 1e3 for r in lin["rows"]], "o-", label="softmax attention")
        ax.plot(ns, [r["linear"]["min"] * 1e3 for r in lin["rows"]], "s-", label=f"linear attention, {lin['features']} features")
        ax.axvline(lin["predicted_crossover"], color="grey", ls=":", label="FLOP-model crossover")
        if lin["measured_crossover"]:
            ax.axvline(lin["measured_crossover"], color="black", ls="--", lw=0.8, label="measured crossover")
        ax.set_yscale("log")
        return ns

    def peak_memory(ax):
        mem = results["memory"]
        labels = (("weights_then_product", "full weight matrix, then A V"), ("attention", "attncore.attention"), ("linear", "linear attention"))
        for key, label in labels:
            ax.plot([r["n"] for r in mem], [r[key] / 2**20 for r in mem], "o-", label=label)
        ax.set_yscale("log")
        return [r["n"] for r in mem]

    save("attention_vs_gemm.png", "attention time / bound", attention_ratios)
    save("linear_vs_softmax.png", "time (ms)", linear_times)
    save("peak_memory.png", "peak memory (MiB)", peak_memory)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="smaller sizes (a smoke test, not for the appendix)")
    parser.add_argument("--threads", type=int, default=2, help="threads for OpenBLAS and torch alike (default 2)")
    parser.add_argument("--targets", action="store_true", help="time the three targets alone (no torch), write nothing")
    parser.add_argument("--block-vjp", action="store_true", help=argparse.SUPPRESS)  # the one-thread child
    parser.add_argument("--output", default=str(HERE / "results.json"))
    args = parser.parse_args(argv)
    if args.threads != THREADS:  # the thread count is set from sys.argv before numpy starts its threads
        parser.error("--threads must be given on the command line")
    rng = np.random.default_rng(0)
    if args.block_vjp:
        print(json.dumps(bench_block_vjp(args.quick)))
        return 0
    if args.targets:
        found = run_targets(rng, args.quick)
        for t in found:
            print(f"{'PASS' if t['pass'] else 'FAIL'}  {t['target']}: {t['detail']}")
        return 0 if all(t["pass"] for t in found) else 1
    started = time.perf_counter()
    results = {
        "date": datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "quick": args.quick,
        "machine": machine(),
    }
    first = sgemm_rate(args.quick)
    results["matrix"] = bench_matrix(rng, args.quick)
    results["causal"] = bench_causal(rng, args.quick)
    results["attention"] = bench_attention(rng, args.quick)
    last = sgemm_rate(args.quick)
    # The higher of the two rates: a slow spell during one measurement must not lower the bar.
    results["sgemm"] = max(first, last, key=lambda r: r["flops_per_second"]) | {
        "start": first["flops_per_second"], "end": last["flops_per_second"]}
    flop_floor(results["attention"], results["sgemm"]["flops_per_second"])
    results["softmax"] = bench_softmax(rng, args.quick)
    results["linear"] = bench_linear(rng, args.quick)
    results["memory"] = bench_memory(rng, args.quick)
    results["vjp_memory"] = bench_vjp_memory(rng, args.quick)
    results["block_vjp"] = block_vjp_one_thread(args.quick)
    results["targets"] = targets(results)
    results["seconds"] = time.perf_counter() - started
    Path(args.output).write_text(json.dumps(results, indent=1) + "\n")
    tables(results)
    figures(results)
    for t in results["targets"]:
        print(f"{'PASS' if t['pass'] else 'FAIL'}  {t['target']}: {t['detail']}")
    print(f"wrote {args.output}, {TABLES}/ and {FIGURES}/ in {results['seconds']:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
