"""attncore.cost: the per-stage model against a direct count of a loop implementation."""

import math

import numpy as np
import pytest

from attncore import ffn, multi_head_attention
from attncore._cost import STAGES, block_flops, matmul_flops
from messages import raises_message


class CountedBlock:
    """A transformer block in plain Python loops that counts every scalar operation."""

    def __init__(self):
        self.counts = {stage: 0 for stage in STAGES}
        self.stage = None

    def op(self, value, k=1):
        self.counts[self.stage] += k
        return value

    def matmul(self, a, b):
        rows, inner, cols = len(a), len(b), len(b[0])
        out = [[0.0] * cols for _ in range(rows)]
        for i in range(rows):
            for j in range(cols):
                acc = self.op(a[i][0] * b[0][j])
                for t in range(1, inner):
                    acc = self.op(acc + self.op(a[i][t] * b[t][j]))
                out[i][j] = acc
        return out

    def softmax_row(self, row):
        top = row[0]
        for s in row[1:]:
            top = self.op(max(top, s))
        exps = [self.op(math.exp(self.op(s - top))) for s in row]
        total = exps[0]
        for e in exps[1:]:
            total = self.op(total + e)
        return [self.op(e / total) for e in exps]

    def attention_layer(self, x, ctx, wq, wk, wv, wo, h):
        d = len(wq)
        k = d // h
        self.stage = "projections"
        q, kk, v = self.matmul(x, wq), self.matmul(ctx, wk), self.matmul(ctx, wv)
        heads = []
        for t in range(h):
            cols = slice(t * k, (t + 1) * k)
            qh, kh, vh = ([r[cols] for r in z] for z in (q, kk, v))
            self.stage = "scores"
            s = self.matmul(qh, [list(c) for c in zip(*kh)])
            s = [[self.op(e * (1 / math.sqrt(k))) for e in r] for r in s]
            self.stage = "softmax"
            a = [self.softmax_row(r) for r in s]
            self.stage = "weighted_sum"
            heads.append(self.matmul(a, vh))
        merged = [sum((heads[t][i] for t in range(h)), []) for i in range(len(x))]
        self.stage = "output_projection"
        return self.matmul(merged, wo)

    def ffn(self, x, w1, w2):
        self.stage = "ffn"
        hidden = [[self.op(max(e, 0.0)) for e in r] for r in self.matmul(x, w1)]
        return self.matmul(hidden, w2)


@pytest.mark.parametrize("n,m,d,h,f", [(3, 3, 4, 1, 8), (4, 2, 6, 3, 5), (1, 5, 2, 2, 3), (5, 5, 8, 2, 32)])
def test_model_matches_direct_count(n, m, d, h, f):
    rng = np.random.default_rng(n * 100 + d)
    x, ctx = rng.normal(size=(n, d)), rng.normal(size=(m, d))
    wq, wk, wv, wo = (rng.normal(size=(d, d)) for _ in range(4))
    w1, w2 = rng.normal(size=(d, f)), rng.normal(size=(f, d))
    block = CountedBlock()
    z = block.attention_layer(x.tolist(), ctx.tolist(), *(w.tolist() for w in (wq, wk, wv, wo)), h)
    y = block.ffn(z, w1.tolist(), w2.tolist())
    # the counted loops compute what attncore computes, so they count the real algorithm
    z_ref = multi_head_attention(x, wq, wk, wv, wo, h, context=ctx)
    np.testing.assert_allclose(z, z_ref, rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(y, ffn(z_ref, w1, None, w2, None), rtol=1e-9, atol=1e-9)
    assert block.counts == block_flops(n, d, m=m, num_heads=h, d_ff=f)


def test_leading_orders():
    # doubling n doubles the linear stages and quadruples the quadratic ones (to leading order)
    big, bigger = block_flops(4096, 64), block_flops(8192, 64)
    for stage in ("projections", "output_projection", "ffn"):
        assert bigger[stage] == 2 * big[stage]
    for stage in ("scores", "softmax", "weighted_sum"):
        assert math.isclose(bigger[stage] / big[stage], 4, rel_tol=1e-3)


def test_crossover_of_the_attention_layer():
    # 8 n d^2 (projections) against 4 n^2 d (scores + weighted sum): equal at n = 2 d
    d = 256
    def parts(n):
        c = block_flops(n, d)
        return c["projections"] + c["output_projection"], c["scores"] + c["weighted_sum"]
    lin, quad = parts(2 * d)
    assert math.isclose(lin, quad, rel_tol=0.01)
    assert parts(d)[0] > parts(d)[1] and parts(4 * d)[0] < parts(4 * d)[1]


def test_matmul_flops_and_errors():
    assert matmul_flops(1, 1, 1) == 1
    with raises_message(ValueError, "num_heads", names=["d"], values=[6, 4], says="divisible"):
        block_flops(4, 6, num_heads=4)
    with raises_message(ValueError, "n", values=[1, 0], says="out of range"):
        block_flops(0, 4)
    with raises_message(TypeError, "d", values=[4.0], says="integer"):
        block_flops(4, 4.0)
