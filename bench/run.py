"""The benchmark suite behind `make bench` and the performance appendix.

Usage: python bench/run.py [--quick]

Measures, side by side in one run and as ratios (so that the machine's speed
cancels):

* ``attncore.attention`` against the GEMM bound, the time of the two matrix
  products it must do (``Q K^T`` and ``A V``) with the same BLAS, for
  n in {256, 1024, 4096}, d in {64, 128}, float32 and float64;
* ``attncore.multi_head_attention`` against the GEMM bound of its six products;
* ``attncore.softmax`` over an n x n matrix against the memory-bandwidth bound
  of reading and writing that matrix once (a copy);
* linear attention (``attncore.linear_attention`` with positive random
  features) against softmax attention over n, with the measured crossover and
  the FLOP model's prediction;
* peak memory (tracemalloc) of softmax attention, of its full weight matrix,
  and of linear attention, against n.

Writes bench/results.json (machine, library versions, BLAS, every figure with
min / median / max over repeats) and the figures in bench/figures/, and prints
one PASS/FAIL line per target.  The book's performance appendix is generated
from the committed results.json.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import statistics
import sys
import time
import tracemalloc
from datetime import datetime, timezone
from functools import partial
from pathlib import Path

import numpy as np

import attncore
from attncore import attention, attention_weights, multi_head_attention, softmax
from attncore._kernels import gaussian_features, linear_attention, positive_random_features

HERE = Path(__file__).resolve().parent
FIGURES = HERE / "figures"

#: Targets of the performance appendix: (name, measured key, bound).
TARGET_ATTENTION_RATIO = 1.5  # attention within 1.5x of its GEMM bound at n=4096, d=64, float32
TARGET_PEAK_RATIO = 1.5  # peak memory within 1.5x of one n x n matrix plus inputs and output
TARGET_CROSSOVER_FACTOR = 2.0  # measured crossover within 2x of the FLOP model's


def timeit(fn, repeats):
    """``{min, median, max}`` seconds of ``fn()`` over ``repeats`` runs, after two warm-ups."""
    fn()
    fn()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return {"min": min(times), "median": statistics.median(times), "max": max(times), "repeats": repeats}


def repeats_for(n):
    return 5 if n >= 4096 else 9


def gemm_bound(q, k, v, repeats):
    """Time of Q K^T plus A V into preallocated outputs: the products attention cannot avoid."""
    scores = np.empty(q.shape[:-1] + (k.shape[-2],), dtype=q.dtype)
    out = np.empty(q.shape[:-1] + (v.shape[-1],), dtype=q.dtype)
    kt = np.swapaxes(k, -1, -2)
    first = timeit(lambda: np.matmul(q, kt, out=scores), repeats)
    second = timeit(lambda: np.matmul(scores, v, out=out), repeats)
    return {key: first[key] + second[key] for key in ("min", "median", "max")} | {"repeats": repeats}


def bench_attention(rng, quick):
    rows = []
    sizes = [256, 1024] if quick else [256, 1024, 4096]
    for dtype in (np.float32, np.float64):
        for d in (64, 128):
            for n in sizes:
                q, k, v = (rng.standard_normal((n, d)).astype(dtype) for _ in range(3))
                r = repeats_for(n)
                bound = gemm_bound(q, k, v, r)
                measured = timeit(partial(attention, q, k, v), r)
                rows.append({
                    "n": n, "d": d, "dtype": np.dtype(dtype).name,
                    "attention": measured, "gemm_bound": bound,
                    "ratio": measured["median"] / bound["median"],
                })
                print(f"attention  n={n:5d} d={d:3d} {np.dtype(dtype).name:7s} "
                      f"{measured['median'] * 1e3:8.2f} ms  GEMM bound {bound['median'] * 1e3:8.2f} ms  "
                      f"ratio {rows[-1]['ratio']:.2f}")
    return rows


def bench_multi_head(rng, quick):
    rows = []
    for n in ([256] if quick else [256, 1024]):
        d, h = 256, 4
        x = rng.standard_normal((n, d)).astype(np.float32)
        ws = [(rng.standard_normal((d, d)) / math.sqrt(d)).astype(np.float32) for _ in range(4)]
        r = repeats_for(n)
        measured = timeit(partial(multi_head_attention, x, *ws, h), r)
        heads = rng.standard_normal((h, n, d // h)).astype(np.float32)
        projection = timeit(partial(np.matmul, x, ws[0]), r)
        bound_heads = gemm_bound(heads, heads, heads, r)
        bound = {key: 4 * projection[key] + bound_heads[key] for key in ("min", "median", "max")}
        rows.append({"n": n, "d": d, "h": h, "dtype": "float32", "multi_head": measured,
                     "gemm_bound": bound, "ratio": measured["median"] / bound["median"]})
        print(f"multi-head n={n:5d} d={d} h={h}  {measured['median'] * 1e3:8.2f} ms  "
              f"GEMM bound {bound['median'] * 1e3:8.2f} ms  ratio {rows[-1]['ratio']:.2f}")
    return rows


def bench_softmax(rng, quick):
    rows = []
    for n in ([1024] if quick else [1024, 4096]):
        x = rng.standard_normal((n, n)).astype(np.float32)
        dst = np.empty_like(x)
        r = repeats_for(n)
        measured = timeit(partial(softmax, x), r)
        copy = timeit(partial(np.copyto, dst, x), r)
        rows.append({"n": n, "dtype": "float32", "softmax": measured, "copy_bound": copy,
                     "ratio": measured["median"] / copy["median"]})
        print(f"softmax    n={n:5d} float32 {measured['median'] * 1e3:8.2f} ms  "
              f"read+write bound {copy['median'] * 1e3:8.2f} ms  ratio {rows[-1]['ratio']:.2f}")
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
        r = repeats_for(n)
        soft = timeit(partial(attention, q, k, v), r)
        lin = timeit(partial(linear_attention, q, k, v, feature_map), r)
        rows.append({"n": n, "d": d, "features": m, "softmax": soft, "linear": lin,
                     "flops_softmax": flops_softmax_attention(n, d), "flops_linear": flops_linear_attention(n, d, m)})
        print(f"linear     n={n:5d} softmax {soft['median'] * 1e3:8.2f} ms  linear {lin['median'] * 1e3:8.2f} ms")
    measured = None
    for a, b in zip(rows, rows[1:]):
        ra = a["linear"]["median"] / a["softmax"]["median"]
        rb = b["linear"]["median"] / b["softmax"]["median"]
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
            "attention": peak_bytes(partial(attention, q, k, v)),
            "weights_then_product": peak_bytes(lambda q=q, k=k, v=v: attention_weights(q, k) @ v),
            "linear": peak_bytes(partial(linear_attention, q, k, v, feature_map)),
            "score_matrix": n * n * 4, "inputs_and_output": io,
        })
        row = rows[-1]
        print(f"memory     n={n:5d} attention {row['attention'] / 2**20:7.2f} MiB  full weights "
              f"{row['weights_then_product'] / 2**20:7.2f} MiB  linear {row['linear'] / 2**20:7.2f} MiB")
    return rows


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
        "blas": {k: blas.get(k) for k in ("name", "version", "openblas configuration") if k in blas},
    }


def targets(results):
    lines = []
    big = [r for r in results["attention"] if r["n"] == 4096 and r["d"] == 64 and r["dtype"] == "float32"]
    if big:
        ratio = big[0]["ratio"]
        lines.append(("attention within 1.5x of the GEMM bound (n=4096, d=64, float32)",
                      ratio <= TARGET_ATTENTION_RATIO, f"ratio {ratio:.2f}"))
    worst = max(r["attention"] / (r["score_matrix"] + r["inputs_and_output"]) for r in results["memory"])
    lines.append(("peak memory of attention within 1.5x of one n x n matrix plus inputs and output",
                  worst <= TARGET_PEAK_RATIO, f"worst ratio {worst:.2f}"))
    lin = results["linear"]
    if lin["measured_crossover"] is None:
        lines.append(("linear attention crossover within 2x of the FLOP model", False, "no crossover in the measured range"))
    else:
        factor = max(lin["measured_crossover"] / lin["predicted_crossover"], lin["predicted_crossover"] / lin["measured_crossover"])
        lines.append(("linear attention crossover within 2x of the FLOP model", factor <= TARGET_CROSSOVER_FACTOR,
                      f"measured n = {lin['measured_crossover']:.0f}, predicted n = {lin['predicted_crossover']:.0f}"))
    return [{"target": name, "pass": bool(ok), "detail": detail} for name, ok, detail in lines]


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

    def attention_ratios(ax):
        for dtype, marker in (("float32", "o"), ("float64", "s")):
            for d, style in ((64, "-"), (128, "--")):
                rows = [r for r in results["attention"] if r["dtype"] == dtype and r["d"] == d]
                ax.plot([r["n"] for r in rows], [r["ratio"] for r in rows], style, marker=marker, label=f"{dtype}, d={d}")
        ax.axhline(TARGET_ATTENTION_RATIO, color="grey", lw=0.8, ls=":")
        return sorted({r["n"] for r in results["attention"]})

    lin = results["linear"]

    def linear_times(ax):
        ns = [r["n"] for r in lin["rows"]]
        ax.plot(ns, [r["softmax"]["median"] * 1e3 for r in lin["rows"]], "o-", label="softmax attention")
        ax.plot(ns, [r["linear"]["median"] * 1e3 for r in lin["rows"]], "s-", label=f"linear attention, {lin['features']} features")
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

    save("attention_vs_gemm.png", "attention time / GEMM bound", attention_ratios)
    save("linear_vs_softmax.png", "time (ms)", linear_times)
    save("peak_memory.png", "peak memory (MiB)", peak_memory)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="smaller sizes (a smoke test, not for the appendix)")
    parser.add_argument("--output", default=str(HERE / "results.json"))
    args = parser.parse_args(argv)
    rng = np.random.default_rng(0)
    started = time.perf_counter()
    results = {
        "date": datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "quick": args.quick,
        "machine": machine(),
        "attention": bench_attention(rng, args.quick),
        "multi_head": bench_multi_head(rng, args.quick),
        "softmax": bench_softmax(rng, args.quick),
        "linear": bench_linear(rng, args.quick),
        "memory": bench_memory(rng, args.quick),
    }
    results["targets"] = targets(results)
    results["seconds"] = time.perf_counter() - started
    Path(args.output).write_text(json.dumps(results, indent=1) + "\n")
    figures(results)
    for t in results["targets"]:
        print(f"{'PASS' if t['pass'] else 'FAIL'}  {t['target']}: {t['detail']}")
    print(f"wrote {args.output} and {FIGURES}/ in {results['seconds']:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
