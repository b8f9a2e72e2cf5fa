"""The ``bench-report`` directive: the performance appendix, from bench/results.json.

The numbers on the page are the ones `make bench` last wrote and someone
committed; the page says when and on which machine they were measured.
"""

from __future__ import annotations

import json
from pathlib import Path

RESULTS = Path("bench") / "results.json"


def ms(stats):
    return f"{stats['median'] * 1e3:.2f}"


def setup(app):
    from docutils import nodes
    from docutils.parsers.rst import Directive

    def table(header, rows):
        tgroup = nodes.tgroup(cols=len(header))
        for _ in header:
            tgroup += nodes.colspec(colwidth=1)
        thead = nodes.thead()
        thead += nodes.row("", *[nodes.entry("", nodes.paragraph(text=h)) for h in header])
        tbody = nodes.tbody()
        for cells in rows:
            tbody += nodes.row("", *[nodes.entry("", nodes.paragraph(text=str(c))) for c in cells])
        tgroup += thead
        tgroup += tbody
        tab = nodes.table()
        tab += tgroup
        return tab

    class BenchReport(Directive):
        has_content = False

        def run(self):
            env = self.state.document.settings.env
            path = Path(env.srcdir) / RESULTS
            env.note_dependency(str(path))
            if not path.exists():
                return [nodes.paragraph(text="No benchmark results are committed yet: run `make bench`.")]
            r = json.loads(path.read_text())
            m = r["machine"]
            blas = m.get("blas") or {}
            out = [
                nodes.rubric(text="Where and when"),
                table(["what", "value"], [
                    ["measured", r["date"] + (" (quick run)" if r.get("quick") else "")],
                    ["processor", f"{m['cpu']}, {m['cores']} cores"],
                    ["platform", m["platform"]],
                    ["Python / numpy", f"{m['python']} / {m['numpy']}"],
                    ["BLAS", " ".join(str(v) for v in blas.values()) or "unknown"],
                    ["whole suite", f"{r['seconds']:.0f} s"],
                ]),
                nodes.rubric(text="Targets"),
                table(["target", "result", "measured"], [
                    [t["target"], "PASS" if t["pass"] else "FAIL", t["detail"]] for t in r["targets"]
                ]),
                nodes.rubric(text="Attention against the GEMM bound (medians)"),
                table(["n", "d", "dtype", "attention (ms)", "GEMM bound (ms)", "ratio"], [
                    [x["n"], x["d"], x["dtype"], ms(x["attention"]), ms(x["gemm_bound"]), f"{x['ratio']:.2f}"]
                    for x in r["attention"]
                ]),
                nodes.rubric(text="Multi-head attention against the GEMM bound of its six products"),
                table(["n", "d", "h", "multi-head (ms)", "GEMM bound (ms)", "ratio"], [
                    [x["n"], x["d"], x["h"], ms(x["multi_head"]), f"{x['gemm_bound']['median'] * 1e3:.2f}", f"{x['ratio']:.2f}"]
                    for x in r["multi_head"]
                ]),
                nodes.rubric(text="Softmax against reading and writing the matrix once"),
                table(["n", "softmax (ms)", "copy (ms)", "ratio"], [
                    [x["n"], ms(x["softmax"]), ms(x["copy_bound"]), f"{x['ratio']:.2f}"] for x in r["softmax"]
                ]),
                nodes.rubric(text="Linear against softmax attention"),
                table(["n", "softmax (ms)", "linear (ms)", "FLOPs softmax / linear"], [
                    [x["n"], ms(x["softmax"]), ms(x["linear"]), f"{x['flops_softmax'] / x['flops_linear']:.2f}"]
                    for x in r["linear"]["rows"]
                ]),
                nodes.paragraph(text=(
                    f"With d = {r['linear']['d']} and {r['linear']['features']} random features, the FLOP "
                    f"model predicts the crossover at n = {r['linear']['predicted_crossover']:.0f}; measured: "
                    + (f"n = {r['linear']['measured_crossover']:.0f}." if r["linear"]["measured_crossover"] else "none in range.")
                )),
                nodes.rubric(text="Peak memory (tracemalloc, MiB)"),
                table(["n", "attncore.attention", "full weights then A V", "linear attention", "one n x n matrix"], [
                    [x["n"], f"{x['attention'] / 2**20:.2f}", f"{x['weights_then_product'] / 2**20:.2f}",
                     f"{x['linear'] / 2**20:.2f}", f"{x['score_matrix'] / 2**20:.2f}"]
                    for x in r["memory"]
                ]),
            ]
            return out

    app.add_directive("bench-report", BenchReport)
    return {"version": "1.0", "parallel_read_safe": True, "parallel_write_safe": True}
