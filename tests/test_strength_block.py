"""attncore._block: checks added to kill surviving mutants (see the appendix "How strong is the evidence")."""

import numpy as np
import pytest

from attncore import BlockParams, ffn, init_block_params, transformer_block
from messages import raises_message

D, F, H = 8, 16, 2


def params(bias=True, **fields):
    return init_block_params(D, F, np.random.default_rng(1), bias=bias)._replace(**fields)


def tokens(n=5):
    return np.random.default_rng(2).normal(size=(n, D))


def test_ffn_errors_name_x():
    w1, w2 = np.ones((D, F)), np.ones((F, D))
    with raises_message(ValueError, "x", shapes=["(..., n, d)"]):
        ffn(np.float64(1.0), w1, None, w2, None)  # a scalar has no feature axis
    with raises_message(ValueError, "x", shapes=["(..., n, d)"]):
        ffn(np.ones(D), w1, None, w2, None)
    with raises_message(TypeError, "x"):
        ffn(np.ones((2, D)) > 0, w1, None, w2, None)


def test_ffn_errors_name_the_weight_and_what_its_shape_must_match():
    x, w1, w2 = np.ones((5, D)), np.ones((D, F)), np.ones((F, D))
    for bad in (np.ones((D + 1, F)), np.ones(F)):
        with raises_message(ValueError, "w1", names=["x"], shapes=[f"({D}, f)", f"(5, {D})"]):
            ffn(x, bad, None, w2, None)
    with raises_message(TypeError, "w1"):
        ffn(x, w1 > 0, None, w2, None)
    for bad in (np.ones((F + 1, D)), np.ones((F, D + 1))):
        with raises_message(ValueError, "w2", names=["w1"], shapes=[f"({F}, {D})", f"({D}, {F})"]):
            ffn(x, w1, None, bad, None)


def test_init_block_params_errors_name_the_argument():
    rng = np.random.default_rng(0)
    with raises_message(ValueError, "d"):
        init_block_params(0, F, rng)
    with raises_message(TypeError, "d_ff"):
        init_block_params(D, 2.0, rng)
    with raises_message(TypeError, "bias"):
        init_block_params(D, F, rng, bias=1)


def test_init_block_params_draws_every_field_from_rng_with_the_documented_law():
    # Independent route, written from the docstring: the fields are drawn in BlockParams' order,
    # weights N(0, 1/fan_in), biases and LN shifts N(0, 0.1^2), LN scales 1 + N(0, 0.1^2);
    # with bias=False the biases and shifts are None (and not drawn).
    fan_in = {"w2": F}
    shape = {"w_q": (D, D), "w_k": (D, D), "w_v": (D, D), "w_o": (D, D), "w1": (D, F), "w2": (F, D), "b1": (F,)}
    for bias in (True, False):
        for dtype in (np.float64, np.float32):
            got = init_block_params(D, F, np.random.default_rng(7), bias=bias, dtype=dtype)
            ref = np.random.default_rng(7)
            for field in BlockParams._fields:
                value = getattr(got, field)
                if field.startswith("w"):
                    expected = fan_in.get(field, D) ** -0.5 * ref.standard_normal(shape[field])
                elif field.startswith("gamma"):
                    expected = 1 + 0.1 * ref.standard_normal(D)
                elif not bias:
                    assert value is None, field
                    continue
                else:
                    expected = 0.1 * ref.standard_normal(shape.get(field, (D,)))
                assert isinstance(value, np.ndarray) and value.dtype == dtype, (field, dtype)
                np.testing.assert_allclose(value, expected.astype(dtype), rtol=1e-6 if dtype == np.float32 else 1e-15,
                                           err_msg=field)


def test_transformer_block_errors_name_the_argument():
    p, x = params(), tokens()
    with raises_message(TypeError, "params", options=["BlockParams"], values=["dict"]):
        transformer_block(x, p._asdict(), H)
    with raises_message(ValueError, "placement", values=["middle"], options=["post", "pre", "branch"]):
        transformer_block(x, p, H, placement="middle")
    with raises_message(ValueError, "x", shapes=["(..., n, d)"]):
        transformer_block(np.float64(1.0), p, H)
    with raises_message(ValueError, "x", shapes=["(..., n, d)"]):
        transformer_block(np.ones(D), p, H)
    with raises_message(TypeError, "x"):
        transformer_block(x > 0, p, H)


def test_transformer_block_names_a_missing_ffn_weight():
    p, x = params(), tokens()
    for field in ("w1", "w2"):
        with raises_message(ValueError, "params.w1", names=["params.w2"], values=["None"]):
            transformer_block(x, p._replace(**{field: None}), H)


@pytest.mark.parametrize("field,shape,expected", [
    ("w1", (D + 1, F), f"({D}, f)"),
    ("w1", (F,), f"({D}, f)"),
    ("w2", (F + 1, D), f"({F}, {D})"),
    ("b1", (F + 1,), f"({F},)"),
    ("w_k", (D, D + 1), f"({D}, {D})"),
    ("b_k", (D + 1,), f"({D},)"),
    ("gamma1", (D + 1,), f"({D},)"),
    ("beta2", (D, 1), f"({D},)"),
])
def test_transformer_block_names_a_field_of_the_wrong_shape(field, shape, expected):
    with raises_message(ValueError, f"params.{field}", shapes=[expected, shape]):
        transformer_block(tokens(), params(**{field: np.ones(shape)}), H)


def test_transformer_block_names_a_field_of_the_wrong_type():
    with raises_message(TypeError, "params.w1"):
        transformer_block(tokens(), params(w1=np.ones((D, F), bool)), H)


@pytest.mark.parametrize("placement", ["post", "pre", "branch"])
def test_transformer_block_passes_the_key_bias_on(placement):
    # A key bias adds q_i . b_k to every score of row i, which softmax ignores in exact
    # arithmetic, so the block's output can only show it through rounding.  Its validation
    # shows it: float32 tokens and weights give float32 keys, and a float64 key bias beyond
    # float32's largest number would make them inf, so it is refused, naming b_k.
    x = tokens().astype(np.float32)
    p = BlockParams(*(None if a is None else a.astype(np.float32) for a in params()))
    assert transformer_block(x, p, H, placement=placement).dtype == np.float32
    for field in ("b_q", "b_k", "b_v", "b_o"):
        big = p._replace(**{field: np.full(D, 1e39)})
        with raises_message(ValueError, field, dtypes=["float32"]):
            transformer_block(x, big, H, placement=placement)


# Written in parallel by a second pass over the same survivors: every field's shape,
# a 0-d w1, and the dtype and bias=False of init_block_params.

def wrong_shape(field):
    # one more entry along the last axis than the field's documented shape
    shape = {"w_q": (D, D), "w_k": (D, D), "w_v": (D, D), "w_o": (D, D), "w1": (D, F), "w2": (F, D), "b1": (F,)}
    good = shape.get(field, (D,))
    return good, np.ones(good[:-1] + (good[-1] + 1,))


@pytest.mark.parametrize("field", BlockParams._fields)
def test_transformer_block_names_the_field_of_the_wrong_shape(field):
    good, bad = wrong_shape(field)
    expected = f"({', '.join(map(str, good))}{',' if len(good) == 1 else ''})"
    if field == "w1":  # f is read from w1 itself, so only its first axis is fixed
        expected = f"({D}, f)"
        bad = np.ones((D + 1, F))
    with raises_message(ValueError, f"params.{field}", shapes=[expected, bad.shape]):
        transformer_block(np.ones((3, D)), params(**{field: bad}), 2)


def test_transformer_block_names_a_0d_w1():
    with raises_message(ValueError, "params.w1", shapes=[f"({D}, f)", "()"]):
        transformer_block(np.ones((3, D)), params(w1=np.float64(1.0)), 2)


def expected_shapes(d, f):
    return {"w_q": (d, d), "w_k": (d, d), "w_v": (d, d), "w_o": (d, d), "w1": (d, f), "w2": (f, d),
            "b_q": (d,), "b_k": (d,), "b_v": (d,), "b_o": (d,), "b1": (f,), "b2": (d,),
            "gamma1": (d,), "beta1": (d,), "gamma2": (d,), "beta2": (d,)}


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_init_block_params_fills_every_field_in_the_dtype(dtype):
    p = init_block_params(D, F, np.random.default_rng(1), dtype=dtype)
    for field, shape in expected_shapes(D, F).items():
        value = getattr(p, field)
        assert isinstance(value, np.ndarray), field
        assert value.shape == shape and value.dtype == dtype, (field, value.shape, value.dtype)
    p = init_block_params(D, F, np.random.default_rng(1), bias=False, dtype=dtype)
    for field, shape in expected_shapes(D, F).items():
        value = getattr(p, field)
        if field.startswith("w") or field.startswith("gamma"):
            assert value.shape == shape and value.dtype == dtype, field
        else:
            assert value is None, field
