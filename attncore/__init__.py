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

====  =====================================================
``n``  query length (number of query tokens)
``m``  key / value length (number of key tokens)
``d``  model width
``h``  number of heads
``k``  query / key width per head (``d_k``)
``v``  value width per head (``d_v``)
``f``  hidden width of the feed-forward network (``d_ff``)
====  =====================================================

Attention is ``softmax(q k^T * scale + bias) v`` with the softmax taken over
the last axis (the keys) and ``scale = 1 / sqrt(d_k)`` by default.  Boolean
masks mean "may attend": ``True`` keeps an entry, ``False`` removes it.
Randomness is always an explicit ``numpy.random.Generator``.

Bad input raises ``ValueError`` (wrong shape or value) or ``TypeError`` (wrong
kind of array) with a message that names the argument and the shapes.
"""

from attncore.attention import (
    attention,
    attention_weights,
    merge_heads,
    multi_head_attention,
    split_heads,
)
from attncore.block import BlockParams, ffn, init_block_params, transformer_block
from attncore.linear import linear
from attncore.masks import causal_mask
from attncore.norms import batch_norm, instance_norm, layer_norm, rms_norm
from attncore.permutations import (
    inverse_permutation,
    permutation_matrix,
    permute_tokens,
)
from attncore.softmax import NORMALIZERS, softmax
from attncore.toeplitz import toeplitz

__all__ = [
    "BlockParams",
    "NORMALIZERS",
    "attention",
    "attention_weights",
    "batch_norm",
    "causal_mask",
    "ffn",
    "init_block_params",
    "instance_norm",
    "inverse_permutation",
    "layer_norm",
    "linear",
    "merge_heads",
    "multi_head_attention",
    "permutation_matrix",
    "permute_tokens",
    "rms_norm",
    "softmax",
    "split_heads",
    "toeplitz",
    "transformer_block",
]
__version__ = "0.1.0"
