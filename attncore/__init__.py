"""attncore: the numpy core of the course *Attention, Proved*.

Every function here is pure: arrays in, arrays out, no hidden state.  The
course's chapters import these functions and show their source, so the code the
reader sees is the code the checks run.

Conventions
-----------
Tokens are rows.  A sequence of ``n`` tokens of width ``d`` is an array of shape
``(..., n, d)``; weights act on the right (``x @ w``); any number of leading
batch axes ``...`` is allowed and the mathematics lives in the last axes.

Axis key (the letters of the notation page, used in every docstring and
einsum string of the package):

=====  =====================================================
``n``  query length (number of query tokens)
``m``  key / value length (number of key tokens)
``d``  model width
``h``  number of heads
``k``  query / key width per head (``d_k``)
``v``  value width per head (``d_v``)
``f``  hidden width of the feed-forward network (``d_ff``)
=====  =====================================================

Attention is ``softmax(q k^T * scale + bias) v`` with the softmax taken over
the last axis (the keys) and ``scale = 1 / sqrt(d_k)`` by default.  Boolean
masks mean "may attend": ``True`` keeps an entry, ``False`` removes it.
Randomness is always an explicit :class:`numpy.random.Generator`.

Bad input raises ``ValueError`` (wrong shape or value) or ``TypeError`` (wrong
kind of argument) with a short message that names the argument and the shapes.
NaN and infinities are rejected unless documented (``-inf`` in a bias, score or
logit means "masked"); counts must be integers, and scalars must be real numbers
representable in the dtype they are used in (see ``attncore/_checks.py``).

A submodule, ``practice``, grades a reader's own solutions to the exercises of
the practice notebooks (``from attncore.practice import check``).
"""

from attncore._attention import (
    attention,
    attention_weights,
    merge_heads,
    multi_head_attention,
    split_heads,
)
from attncore._block import BlockParams, ffn, init_block_params, transformer_block
from attncore._cost import block_flops, matmul_flops
from attncore._kernels import (
    exp_limit_features,
    gaussian_features,
    linear_attention,
    linear_attention_weights,
    positive_random_features,
    taylor_features,
    trig_random_features,
)
from attncore._linear import linear
from attncore._masks import causal_mask
from attncore._norms import batch_norm, instance_norm, layer_norm, rms_norm
from attncore._permutations import (
    inverse_permutation,
    permutation_matrix,
    permute_tokens,
)
from attncore._positional import (
    alibi_slopes,
    relative_bias,
    rope,
    rope_frequencies,
    rope_permutation,
    sinusoidal_encoding,
    t5_relative_bucket,
)
from attncore._probe import linear_readout, probe_floor, probe_hidden_states
from attncore._shaw import shaw_attention, shaw_relative_embeddings
from attncore._softmax import NORMALIZERS, softmax
from attncore._stats import mean_interval, t_quantile, wilson_interval
from attncore._synthesizer import (
    dense_features,
    dense_scores,
    factorized_dense_scores,
    factorized_random_scores,
    mixture_scores,
    mixture_weights,
    random_scores,
    synthesizer_attention,
    synthesizer_costs,
)
from attncore import practice  # noqa: F401  (the grader of the practice notebooks, a submodule)
from attncore._toeplitz import toeplitz
from attncore._train import adam, gradient_descent
from attncore._vjp import (
    attention_bias_vjp,
    attention_vjp,
    ffn_vjp,
    layer_norm_vjp,
    linear_vjp,
    multi_head_attention_vjp,
    normalize_vjp,
    relative_bias_vjp,
    rope_vjp,
    shaw_attention_vjp,
    shaw_relative_embeddings_vjp,
    softmax_vjp,
    transformer_block_vjp,
)

__all__ = [
    "BlockParams",
    "NORMALIZERS",
    "adam",
    "alibi_slopes",
    "attention",
    "attention_bias_vjp",
    "attention_vjp",
    "attention_weights",
    "batch_norm",
    "block_flops",
    "causal_mask",
    "dense_features",
    "dense_scores",
    "exp_limit_features",
    "factorized_dense_scores",
    "factorized_random_scores",
    "ffn",
    "ffn_vjp",
    "gaussian_features",
    "gradient_descent",
    "init_block_params",
    "instance_norm",
    "inverse_permutation",
    "layer_norm",
    "layer_norm_vjp",
    "linear",
    "linear_attention",
    "linear_attention_weights",
    "linear_readout",
    "linear_vjp",
    "matmul_flops",
    "mean_interval",
    "merge_heads",
    "mixture_scores",
    "mixture_weights",
    "multi_head_attention",
    "multi_head_attention_vjp",
    "normalize_vjp",
    "permutation_matrix",
    "permute_tokens",
    "positive_random_features",
    "probe_floor",
    "probe_hidden_states",
    "random_scores",
    "relative_bias",
    "relative_bias_vjp",
    "rms_norm",
    "rope",
    "rope_frequencies",
    "rope_permutation",
    "rope_vjp",
    "shaw_attention",
    "shaw_attention_vjp",
    "shaw_relative_embeddings",
    "shaw_relative_embeddings_vjp",
    "sinusoidal_encoding",
    "softmax",
    "softmax_vjp",
    "split_heads",
    "synthesizer_attention",
    "synthesizer_costs",
    "t5_relative_bucket",
    "t_quantile",
    "taylor_features",
    "toeplitz",
    "transformer_block",
    "transformer_block_vjp",
    "trig_random_features",
    "wilson_interval",
]
__version__ = "0.1.0"
