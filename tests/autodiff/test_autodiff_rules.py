"""Every gradient rule against central finite differences in float64 (tests/support/autodiff_oracle.py:
NumPy evaluates the same DAG), on hypothesis-drawn shapes (broadcasting, 0-d, unit dims), values,
axes, keepdims and views; and the conventions at kinks (ties of max/min, clip at its bounds,
relu and abs at 0, max/min reductions with ties, prod with zeros) against their PyTorch values."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

import lazytensor as lt
from tests.support.autodiff_oracle import assert_gradients_match, finite_difference
from lazytensor.testing import broadcastable_shapes as leaf_shapes

SHAPES = ((), (1,), (5,), (3, 4), (2, 1, 3))
# Each new structure or layout costs a kernel compile (about a second, cold), so the examples are
# drawn from a fixed seed: a second run finds every kernel in the disk cache. test_hunt (slow) draws
# fresh ones, many more.
FAST = settings(max_examples=5, derandomize=True, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _values(seed, shape, lo, hi, signs=False):
    rng = np.random.default_rng(seed)
    v = rng.uniform(lo, hi, shape)
    if signs:
        v = v * rng.choice([-1.0, 1.0], shape)
    return np.asarray(v, np.float64)


def check(build, arrays, seed=0, device="cpu", context=""):
    """lt.grad of sum(build(*tensors) * w) (through grad_output=w) against finite differences."""
    tensors = [lt.asarray(a, device=device) for a in arrays]
    out = build(*tensors)
    w = _values(seed + 1, out.shape, -1.0, 1.0)
    grads = lt.grad(out, tensors, grad_output=lt.asarray(w, device=device))
    got = [g.numpy() for g in grads]
    for g, x in zip(got, tensors):
        assert g.dtype == x.dtype and g.shape == x.shape, context
    assert_gradients_match(got, finite_difference(out, tensors, w), context=context)


UNARY = {   # op -> domain of its inputs (away from poles and kinks)
    "negative": (-2, 2), "absolute": (0.1, 2, True), "exp": (-2, 2), "expm1": (-2, 2), "log": (0.2, 3),
    "log1p": (-0.5, 2), "sqrt": (0.2, 3), "sin": (-3, 3), "cos": (-3, 3), "tan": (-1.2, 1.2), "tanh": (-2, 2),
    "sigmoid": (-3, 3), "relu": (0.1, 2, True), "floor": (-3, 3), "ceil": (-3, 3), "sign": (0.1, 2, True),
}


@pytest.mark.parametrize("op", list(UNARY))
@FAST
@given(shape=st.sampled_from(SHAPES), seed=st.integers(0, 2**16))
def test_unary_rules(op, shape, seed):
    x = _values(seed, shape, *UNARY[op])
    check(getattr(lt, op), [x], seed, context=f"{op} {shape}")


def test_square_is_differentiated():
    x = _values(3, (3, 4), -2, 2)
    check(lambda t: t ** 2, [x], context="x ** 2")


BINARY = {  # op -> (domain of a, domain of b)
    "add": ((-2, 2), (-2, 2)), "subtract": ((-2, 2), (-2, 2)), "multiply": ((-2, 2), (-2, 2)),
    "true_divide": ((-2, 2), (0.5, 2, True)), "power": ((0.2, 2), (-2, 2)),
    "maximum": ((-2, 2), (-2, 2)), "minimum": ((-2, 2), (-2, 2)),
    "remainder": ((0.5, 5, True), (0.7, 2, True)), "floor_divide": ((0.5, 5, True), (0.7, 2, True)),
}
_BUILD = {"add": lambda a, b: a + b, "subtract": lambda a, b: a - b, "multiply": lambda a, b: a * b,
          "true_divide": lambda a, b: a / b, "power": lambda a, b: a ** b, "maximum": lt.maximum,
          "minimum": lt.minimum, "remainder": lambda a, b: a % b, "floor_divide": lambda a, b: a // b}


@st.composite
def broadcast_pair(draw):
    out = draw(st.sampled_from(SHAPES))
    a, b = draw(leaf_shapes(out)), draw(leaf_shapes(out))
    return (a, b) if draw(st.booleans()) else (b, a)


@pytest.mark.parametrize("op", list(BINARY))
@FAST
@given(shapes=broadcast_pair(), seed=st.integers(0, 2**16))
def test_binary_rules_broadcast(op, shapes, seed):
    (da, db), build = BINARY[op], _BUILD[op]
    a, b = _values(seed, shapes[0], *da), _values(seed + 7, shapes[1], *db)
    check(build, [a, b], seed, context=f"{op} {shapes}")


@pytest.mark.parametrize("op", ["add", "subtract", "multiply", "true_divide", "power", "maximum", "minimum"])
def test_binary_rules_with_a_scalar(op):
    (da, db), build = BINARY[op], _BUILD[op]
    a = _values(5, (3, 4), *da)
    scalar_b, scalar_a = 1.3, 0.8
    check(lambda t: build(t, scalar_b), [a], context=f"{op}(x, {scalar_b})")
    b = _values(6, (3, 4), *db)
    check(lambda t: build(scalar_a, t), [b], context=f"{op}({scalar_a}, x)")


@FAST
@given(shapes=broadcast_pair(), seed=st.integers(0, 2**16))
def test_where_routes_by_its_condition(shapes, seed):
    a, b = _values(seed + 1, shapes[0], -2, 2), _values(seed + 2, shapes[1], -2, 2)
    c = lt.asarray(_values(seed, np.broadcast_shapes(*shapes), -1, 1) > 0)
    check(lambda x, y: lt.where(c, x * x, lt.sin(y)), [a, b], seed, context=f"where {shapes}")


def test_clip_with_scalar_bounds():
    x = _values(1, (4, 5), -2, 2)
    check(lambda t: lt.clip(t * 1.5, -1.0, 0.7), [x], context="clip")


def test_astype_float_to_float_casts_the_gradient_back():
    x32 = _values(2, (3, 4), -2, 2).astype(np.float32)
    t = lt.asarray(x32)
    out = lt.sum(lt.exp(t.astype(np.float64)) * 2.0)
    g = lt.grad(out, t)
    assert g.dtype == np.float32
    np.testing.assert_allclose(g.numpy(), 2 * np.exp(x32.astype(np.float64)), rtol=1e-6)


def test_astype_to_integer_stops_the_gradient():
    x = lt.asarray(_values(2, (3, 4), -3, 3))
    out = lt.sum(x.astype(np.int32).astype(np.float64) * x)
    gradients = lt.grad(out, [x])
    np.testing.assert_array_equal(gradients[0].numpy(), x.numpy().astype(np.int32))
    assert any("int32" in why for _, _, why in gradients.stops)


# -- kinks: PyTorch's conventions ------------------------------------------------------------------

def _grad_of(build, *arrays):
    tensors = [lt.asarray(a) for a in arrays]
    return [g.numpy() for g in lt.grad(lt.sum(build(*tensors)), tensors)]


def test_maximum_minimum_split_ties_evenly():
    a = np.array([1.0, 2.0, 3.0, -0.0, np.nan])
    b = np.array([1.0, 1.0, 4.0, 0.0, 1.0])
    ga, gb = _grad_of(lt.maximum, a, b)
    np.testing.assert_array_equal(ga, [0.5, 1.0, 0.0, 0.5, 1.0])       # torch.maximum: NaN gets it (both)
    np.testing.assert_array_equal(gb, [0.5, 0.0, 1.0, 0.5, 1.0])
    ga, gb = _grad_of(lt.minimum, a, b)
    np.testing.assert_array_equal(ga, [0.5, 0.0, 1.0, 0.5, 1.0])
    np.testing.assert_array_equal(gb, [0.5, 1.0, 0.0, 0.5, 1.0])


def test_clip_passes_the_gradient_at_its_bounds_and_relu_abs_are_zero_at_zero():
    x = np.array([-1.0, -0.5, 0.0, 0.5, 1.0, 2.0])
    (g,) = _grad_of(lambda t: lt.clip(t, -0.5, 1.0), x)
    np.testing.assert_array_equal(g, [0, 1, 1, 1, 1, 0])               # torch.clamp
    (g,) = _grad_of(lt.relu, x)
    np.testing.assert_array_equal(g, [0, 0, 0, 1, 1, 1])               # relu'(0) = 0
    (g,) = _grad_of(lt.abs, x)
    np.testing.assert_array_equal(g, [-1, -1, 0, 1, 1, 1])


def test_power_at_zero():
    a = np.array([0.0, 0.0, 2.0, 0.0])
    b = np.array([0.0, 2.0, 0.0, 0.5])
    ga, gb = _grad_of(lambda x, y: x ** y, a, b)
    np.testing.assert_array_equal(ga, [0.0, 0.0, 0.0, np.inf])          # torch.pow: none to x where y == 0
    np.testing.assert_array_equal(gb, [0.0, 0.0, np.log(2.0), 0.0])     # none to y where x == 0 and y >= 0


# -- reductions ----------------------------------------------------------------------------------

REDUCTIONS = ["sum", "mean", "prod", "max", "min", "var", "std"]


@st.composite
def reduction_case(draw):
    shape = draw(st.sampled_from(((5,), (3, 4), (2, 3, 4), (1, 4), ())))
    axis = draw(st.one_of(st.none(), st.sampled_from(range(-len(shape), len(shape))) if shape else st.none(),
                          st.lists(st.sampled_from(range(len(shape))), unique=True, max_size=len(shape)).map(tuple)
                          if shape else st.none()))
    return shape, axis, draw(st.booleans())


@pytest.mark.parametrize("kind", REDUCTIONS)
@FAST
@given(case=reduction_case(), seed=st.integers(0, 2**16), ddof=st.sampled_from([0, 1]))
def test_reduction_rules(kind, case, seed, ddof):
    shape, axis, keepdims = case
    x = _values(seed, shape, 0.5, 2, signs=True)
    kwargs = {"ddof": ddof} if kind in ("var", "std") else {}
    count = int(np.prod([shape[a] for a in ((range(len(shape)) if axis is None else np.atleast_1d(axis)))]))
    if kind in ("var", "std") and count - ddof <= 0:
        kwargs = {}
    assume(not (kind == "std" and count <= 1))     # std of one element: d sqrt(0), NaN as in PyTorch
    check(lambda t: getattr(lt, kind)(t * 1.5, axis=axis, keepdims=keepdims, **kwargs), [x], seed,
          context=f"{kind} axis={axis} keepdims={keepdims} {kwargs} {shape}")


def test_prod_with_zeros_is_the_product_of_the_others():
    x = np.array([[2.0, 0.0, 3.0, 4.0],      # one zero: only it gets the product of the rest
                  [0.0, 5.0, 0.0, 1.5],      # two zeros: nothing
                  [1.5, 2.0, -1.0, 0.5]])    # none: prod / x
    (g,) = _grad_of(lambda t: lt.prod(t, axis=1), x)
    np.testing.assert_allclose(g, [[0, 24, 0, 0], [0, 0, 0, 0], [-1, -0.75, 1.5, -3]])
    (g,) = _grad_of(lambda t: lt.prod(t, axis=0), x)
    np.testing.assert_allclose(g, [[0, 10, 0, 0.75], [3, 0, -3, 2], [0, 0, 0, 6]])


def test_max_min_reductions_split_ties_evenly():
    x = np.array([[1.0, 3.0, 3.0, 3.0], [2.0, -1.0, 2.0, 0.0], [5.0, 5.0, -5.0, -5.0]])
    (g,) = _grad_of(lambda t: lt.max(t, axis=1), x)
    np.testing.assert_allclose(g, [[0, 1 / 3, 1 / 3, 1 / 3], [0.5, 0, 0.5, 0], [0.5, 0.5, 0, 0]])    # torch.amax
    (g,) = _grad_of(lambda t: lt.min(t, axis=1, keepdims=True), x)
    np.testing.assert_allclose(g, [[1, 0, 0, 0], [0, 1, 0, 0], [0, 0, 0.5, 0.5]])
    (g,) = _grad_of(lt.max, x)
    np.testing.assert_allclose(g, [[0, 0, 0, 0], [0, 0, 0, 0], [0.5, 0.5, 0, 0]])


# -- views -------------------------------------------------------------------------------------------

@st.composite
def basic_index(draw, shape):
    key = []
    for n in shape:
        choice = draw(st.integers(0, 3))
        if choice == 0 and n > 0:
            key.append(draw(st.integers(-n, n - 1)))
        elif choice == 1:
            start = draw(st.one_of(st.none(), st.integers(-n - 1, n + 1)))
            stop = draw(st.one_of(st.none(), st.integers(-n - 1, n + 1)))
            key.append(slice(start, stop, draw(st.sampled_from([None, 1, 2, 3, -1, -2]))))
        else:
            key.append(slice(None))
        if draw(st.integers(0, 5)) == 0:
            key.append(None)
    if key and draw(st.booleans()):
        key = key[:draw(st.integers(0, len(key)))] + [Ellipsis]
    return tuple(key)


@FAST
@given(data=st.data(), seed=st.integers(0, 2**16))
def test_basic_indexing_of_tensors_and_expressions(data, seed):
    shape = data.draw(st.sampled_from(((7,), (4, 5), (3, 1, 4))))
    key = data.draw(basic_index(shape))
    a, b = _values(seed, shape, -2, 2), _values(seed + 1, shape[-1:], -2, 2)
    check(lambda x, y: lt.sin(x[key]) * 2.0 + (x * y)[key], [a, b], seed, context=f"index {key}")


VIEWS = {
    "transpose": lambda x: lt.transpose(x, (1, 2, 0)) * 2.0,
    "T of an expression": lambda x: (x * x).T,
    "swapaxes": lambda x: lt.swapaxes(lt.exp(x), 0, 2),
    "moveaxis": lambda x: lt.moveaxis(x, 0, -1) * lt.moveaxis(x, 2, 0).reshape(3, 4, 2),
    "reshape": lambda x: lt.reshape(x, (4, 6)) * 2.0,
    "reshape of an expression": lambda x: lt.reshape(lt.tanh(x), (6, 4)),
    "reshape needing a copy": lambda x: lt.reshape(x.T, (-1,)) * 3.0,
    "ravel": lambda x: lt.ravel(x[:, ::2]) ** 2,
    "squeeze": lambda x: lt.squeeze(x[:, :1], axis=1),
    "expand_dims": lambda x: lt.expand_dims(x, (0, 2)) * 1.5,
    "broadcast_to": lambda x: lt.broadcast_to(x[:, :1], (5, 2, 3, 4)) * 1.5,
    "keepdims of a reduction": lambda x: x / lt.sum(x * x, axis=1, keepdims=True),
    "view of a reduction": lambda x: lt.sum(x, axis=0)[::-1, 1:],
    "reversed": lambda x: x[::-1, :, ::-1] * x,
}


@pytest.mark.parametrize("name", list(VIEWS))
def test_view_rules(name):
    x = _values(11, (2, 3, 4), 0.5, 2, signs=True)
    check(VIEWS[name], [x], context=name)


@pytest.mark.slow
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(op=st.sampled_from(sorted(BINARY)), shapes=broadcast_pair(), seed=st.integers(0, 2**32 - 1))
def test_hunt(op, shapes, seed):
    (da, db), build = BINARY[op], _BUILD[op]
    a, b = _values(seed, shapes[0], *da), _values(seed + 7, shapes[1], *db)
    check(lambda x, y: lt.tanh(build(x * 0.5, lt.exp(y * 0.3))) * build(y, x), [a, b], seed,
          context=f"{op} {shapes}")
