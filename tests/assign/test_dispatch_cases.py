"""The per-call caches never conflate two programs.

Operators keep each case they have built (lazytensor.core.expr: op and operand structure ids or
scalar types -> the node's structure id, dtype and loop dtypes), and an elementwise assignment over
flat operands launches the program found by the expression's structure id (lazytensor.assign.direct).
Random pairs of small programs, drawn from a space small enough that their structures often
coincide and differ in one thing only (a dtype, a shape that broadcasts, the same tensor twice or
two tensors, a scalar's type or value: -0.0, 0.0, NaN), run alternately, each time into the same
destination and into a new one, and must give NumPy's values bit for bit (every op here is exactly
rounded, in NumPy and in the kernels alike). The property runs on the interpreter tier, which runs
the very program the caches found (so a conflation shows) without a compile per drawn structure;
the tests after it launch compiled kernels.
"""
from __future__ import annotations

import operator

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import lazytensor as lt
from lazytensor.kernels.backend import backend_for
from lazytensor.kernels.cache import KernelCache

BINARY = {"add": np.add, "subtract": np.subtract, "multiply": np.multiply, "maximum": np.maximum,
          "minimum": np.minimum, "less": np.less}
UNARY = {"negative": np.negative, "absolute": np.absolute}
# as users write them: operators where there is one (the cached cases of binary and unary nodes)
SPELLED = {"add": operator.add, "subtract": operator.sub, "multiply": operator.mul, "less": operator.lt,
           "negative": operator.neg, "absolute": abs, "maximum": lt.maximum, "minimum": lt.minimum}
SCALARS = [0.0, -0.0, float("nan"), 1.5, 2, 0, True]
# name -> (dtype, shape): two names of one dtype and shape are two tensors over equal values
LEAVES = {"f32": (np.float32, (4,)), "f32b": (np.float32, (4,)), "f64": (np.float64, (4,)),
          "i32": (np.int32, (4,)), "i8": (np.int8, (4,)), "bool": (np.bool_, (4,)), "row": (np.float32, (1, 4)),
          "mat": (np.float32, (3, 4))}

SETTINGS = settings(max_examples=25, deadline=None, print_blob=True,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                           HealthCheck.function_scoped_fixture])   # the fixture holds for all


@pytest.fixture
def interpreted(monkeypatch):
    """Elementwise calls on the CPU run through the interpreter: no kernel cached, none compiled."""
    backend = backend_for("cpu")
    monkeypatch.setenv("LAZYTENSOR_JIT_WAIT", "0")
    monkeypatch.setattr(backend, "kernels", KernelCache())
    monkeypatch.setattr(backend.compiler, "submit", lambda key, job: None)


@st.composite
def programs(draw, pool):
    """A straight-line program over the leaves named in `pool`: each instruction (op, operand,
    operand), an operand a leaf's name, ("v", k) the k-th value before, or ("s", scalar); the last
    value is the result."""
    n = draw(st.integers(1, 3))
    instrs = []
    for k in range(n):
        def operand(allow_scalar=True):
            kinds = ["leaf"] + (["value"] if k else []) + (["scalar"] if allow_scalar else [])
            kind = draw(st.sampled_from(kinds))
            if kind == "leaf":
                return draw(st.sampled_from(pool))
            if kind == "value":
                return ("v", draw(st.integers(0, k - 1)))
            return ("s", draw(st.sampled_from(SCALARS)))
        op = draw(st.sampled_from(sorted(BINARY) + sorted(UNARY)))
        first = operand(allow_scalar=False)
        instrs.append((op, first) if op in UNARY else
                      ((op, first, operand()) if draw(st.booleans()) else (op, operand(), first)))
    return tuple(instrs)


def neighbours(program):
    """The programs that differ from `program` in one thing: an op for another of its arity, a leaf
    for another (of another dtype, shape or identity), a scalar for another (type or value)."""
    for k, (op, *operands) in enumerate(program):
        variants = [(other, *operands) for other in sorted(UNARY if op in UNARY else BINARY) if other != op]
        for j, a in enumerate(operands):
            if isinstance(a, str):
                choices = [name for name in sorted(LEAVES) if name != a]
            elif a[0] == "s":
                choices = [("s", v) for v in SCALARS if repr(v) != repr(a[1]) or type(v) is not type(a[1])]
            else:
                continue
            variants += [(op, *operands[:j], c, *operands[j + 1:]) for c in choices]
        for v in variants:
            yield program[:k] + (v,) + program[k + 1:]


def _run(program, leaves, lib):
    """The program's result built with `lib` ("lt": lazytensor over the leaves' Tensors, "np":
    NumPy eager over their arrays); None where NumPy refuses it (a shape that does not broadcast)."""
    values = []
    for op, *operands in program:
        args = []
        for a in operands:
            if isinstance(a, str):
                args.append(leaves[a][0 if lib == "lt" else 1])
            elif a[0] == "v":
                args.append(values[a[1]])
            else:
                args.append(a[1])
        if lib == "np":
            fn = (BINARY | UNARY)[op]
            with np.errstate(all="ignore"):
                values.append(fn(*[np.asarray(x) if isinstance(x, np.ndarray) else x for x in args]))
        else:
            values.append(SPELLED[op](*args))
    return values[-1]


def _same(got: np.ndarray, want: np.ndarray, what: str) -> None:
    assert got.dtype == want.dtype and got.shape == want.shape, (what, got.dtype, want.dtype, got.shape, want.shape)
    np.testing.assert_array_equal(got, want, err_msg=what)
    if want.dtype.kind == "f":                    # (a NaN's sign is NumPy's loop's business)
        zeros = want == 0
        np.testing.assert_array_equal(np.signbit(got[zeros]), np.signbit(want[zeros]), err_msg=what + ": signed zeros")


def _leaves(seed):
    rng = np.random.default_rng(seed)
    arrays = {}
    for name, (dtype, shape) in LEAVES.items():
        values = rng.choice(np.array([-2.0, -0.0, 0.0, 1.0, 3.0, np.nan]), shape)
        arrays[name] = values.astype(dtype) if np.dtype(dtype).kind == "f" else np.nan_to_num(values).astype(dtype)
    arrays["f32b"] = arrays["f32"].copy()         # equal values, another tensor: the same tensor twice differs
    return {name: (lt.asarray(a), a) for name, a in arrays.items()}


def _check(program, leaves, dests):
    """Run `program` into its destination (one per result shape and dtype, kept across calls) and
    into a new tensor, against NumPy; nothing where NumPy refuses it."""
    try:
        want = np.asarray(_run(program, leaves, "np"))
    except (ValueError, TypeError):
        return
    dest = dests.setdefault((want.shape, want.dtype), lt.empty(want.shape, want.dtype))
    dest[...] = _run(program, leaves, "lt")
    _same(dest.numpy(), want, f"{program} assigned")
    _same(lt.evaluate(_run(program, leaves, "lt")).numpy(), want, f"{program} evaluated")


@SETTINGS
@given(pool=st.lists(st.sampled_from(sorted(LEAVES)), min_size=1, max_size=3, unique=True), data=st.data(),
       seed=st.integers(0, 2**16))
def test_programs_and_their_neighbours_run_alternately_give_numpys_values(interpreted, pool, data, seed):
    """A drawn program, then each program one change away, run in turns with it: whichever ran
    first, the caches must not hand the other its node, dtype or program."""
    program = data.draw(programs(pool))
    leaves, dests = _leaves(seed), {}
    for other in neighbours(program):
        for p in (program, other, program):
            _check(p, leaves, dests)


def test_the_same_tensor_twice_and_two_tensors_of_equal_structure():
    x = np.array([1.0, -2.0, 3.0, 0.5], np.float32)
    a, b = lt.asarray(x), lt.asarray(x * 2)
    y = lt.empty((4,), np.float32)
    for _ in range(2):
        y[...] = a * b + a
        np.testing.assert_array_equal(y.numpy(), x * (x * 2) + x)
        y[...] = a * a + b                        # one leaf twice: the direct path must not take it
        np.testing.assert_array_equal(y.numpy(), x * x + x * 2)
        y[...] = b * a + a
        np.testing.assert_array_equal(y.numpy(), (x * 2) * x + x)


def test_scalar_types_and_signed_zeros_of_one_structure():
    x = np.array([0.0, -0.0, 2.0, np.nan], np.float32)
    a = lt.asarray(x)
    y = lt.empty((4,), np.float32)
    for s in (0.0, -0.0, 0, True, float("nan"), -0.0):
        y[...] = a * s
        _same(y.numpy(), (x * s).astype(np.float32), repr(s))
        _same(lt.evaluate(s + a).numpy(), np.asarray(s + x), repr(s))
    i = lt.asarray(np.array([1, -2, 3, 0], np.int8))
    for s in (True, 2, 1.5):
        _same(lt.evaluate(i * s).numpy(), np.array([1, -2, 3, 0], np.int8) * s, repr(s))


@pytest.fixture
def cpu_by_default(monkeypatch):
    """Tensors made without a device are CPU tensors, also where the default device is CUDA: these
    tests check the CPU backend's paths."""
    monkeypatch.setenv("LAZYTENSOR_DEVICE", "cpu")


def test_the_direct_path_leaves_strided_broadcast_and_aliased_operands_to_the_planner(cpu_by_default):
    from lazytensor.assign.direct import direct_refusal
    base = np.arange(8, dtype=np.float32)
    a, b = lt.asarray(base[:4].copy()), lt.asarray(base[4:].copy())
    y = lt.empty((4,), np.float32)
    assert direct_refusal(a + b, y) is None
    assert "twice" in direct_refusal(a + a, y)
    assert "broadcast" in direct_refusal(a + lt.asarray(np.ones(1, np.float32)), y)
    assert "C-contiguous" in direct_refusal(a + lt.asarray(base[::2]), y)
    s = a * 2
    assert "used twice" in direct_refusal(s + s, y)
    row, strided = lt.asarray(np.ones((1, 4), np.float32)), lt.asarray(base[::2])
    m = lt.empty((3, 4), np.float32)
    for _ in range(2):                            # after flat calls of the same structure
        y[...] = a + b
        np.testing.assert_array_equal(y.numpy(), base[:4] + base[4:])
        y[...] = a + strided
        np.testing.assert_array_equal(y.numpy(), base[:4] + base[::2])
        m[...] = lt.asarray(np.arange(12, dtype=np.float32).reshape(3, 4)) + row
        np.testing.assert_array_equal(m.numpy(), np.arange(12, dtype=np.float32).reshape(3, 4) + 1)
    whole = lt.asarray(base.copy())
    first, second = whole[:4], whole[4:]
    assert "shares memory" in direct_refusal(second + 1, first)
    first[...] = second + 1                       # planned: the same values as NumPy's
    np.testing.assert_array_equal(whole.numpy()[:4], base[4:] + 1)
    text = lt.explain(a + b, out=y, source=False)
    assert "dispatch: direct" in text
    assert "dispatch: planned on every call (a tensor is read twice" in lt.explain(a * a, out=y, source=False)


def test_the_direct_path_keeps_its_step_where_the_backend_binds_launches(cpu_by_default, monkeypatch):
    """On a backend that binds a step's launch (CUDA), the direct path runs the step itself and the
    expression keeps it: assigned again, the bound launch runs. Here the CPU backend stands in."""
    backend = backend_for("cpu")
    bound = []

    def bind(program, out, inputs, scalars, mask=None, memo=None):
        bound.append(program)
        return lambda: backend.run_elementwise(program, out, inputs, scalars)
    monkeypatch.setattr(backend, "bind_elementwise", bind)
    x = np.array([1.0, -0.0, 2.5, -3.0], np.float32)
    a, b = lt.asarray(x), lt.asarray(x[::-1].copy())
    y = lt.empty((4,), np.float32)
    e = a * b - 0.5
    for _ in range(3):
        y[...] = e
        np.testing.assert_array_equal(y.numpy(), x * x[::-1] - np.float32(0.5))
    assert len(bound) == 1 and e.last_plan is not None and e.last_plan[0] is y.data
    y[...] = a * a                                # planned (a read twice), bound as planned steps are
    np.testing.assert_array_equal(y.numpy(), x * x)


@pytest.mark.gpu
@pytest.mark.skipif(not lt.cuda_usable(), reason="needs CuPy and a CUDA device")
def test_the_direct_path_on_cuda():
    base = np.arange(8, dtype=np.float32) - 3
    a, b = (lt.asarray(x, device="cuda") for x in (base[:4].copy(), base[4:].copy()))
    y = lt.empty((4,), np.float32, device="cuda")
    assert "dispatch: direct" in lt.explain(a * b + 1.0, out=y, source=False)
    assert "read twice" in lt.explain(a * b + a, out=y, source=False)
    row = lt.asarray(np.ones((1, 4), np.float32), device="cuda")
    m = lt.empty((3, 4), np.float32, device="cuda")
    z = lt.zeros((3, 4), np.float32, device="cuda")
    whole = lt.asarray(base.copy(), device="cuda")
    for s in (0.0, -0.0, 2, True, -0.0):
        e = a * b + s
        for _ in range(2):                        # the second time, the step e keeps relaunches
            y[...] = e
            _same(y.numpy(), base[:4] * base[4:] + np.float32(s), f"a * b + {s!r}")
        y[...] = a * a + b * s                    # one tensor twice: planned
        _same(y.numpy(), base[:4] * base[:4] + base[4:] * np.float32(s), f"a * a + b * {s!r}")
        m[...] = z + row * s                      # broadcast: planned
        _same(m.numpy(), np.zeros((3, 4), np.float32) + np.ones((1, 4), np.float32) * np.float32(s), repr(s))
    whole[:4] = whole[4:] + 1                     # shares memory with the destination: planned
    np.testing.assert_array_equal(whole.numpy(), np.concatenate([base[4:] + 1, base[4:]]))


# -- a full reduction of a CPU tensor read as a Python scalar (lazytensor.assign.host_scalar) ----------

def test_host_scalars_of_full_reductions_match_numpy_and_keep_their_values(cpu_by_default):
    rng = np.random.default_rng(3)
    host = rng.standard_normal((6, 7)).astype(np.float32)
    for x_host in (host, host[:, ::2], host.T, host[0]):     # contiguous or not: the same values
        x = lt.asarray(x_host)
        for kind in ("sum", "mean", "max", "min", "var", "std", "prod", "argmax"):
            r = getattr(x, kind)()
            want = getattr(np, kind)(x_host.astype(np.float64)) if kind not in ("max", "min", "argmax") \
                else getattr(np, kind)(x_host)
            for _ in range(2):                                # the second call takes the kept launch
                got = r.item()
                assert type(got) is type(np.asarray(want).item()), (kind, type(got))
                assert got == pytest.approx(float(want), rel=1e-5, abs=1e-5), kind
            if kind != "argmax" or x.ndim == 1:               # (argmax of a matrix reduces a raveled view)
                assert r.result is None                       # read, not evaluated into a tensor
    half = host.astype(np.float16)                          # float16 travels as uint16 bit patterns
    h = lt.asarray(half)
    for _ in range(2):
        assert float(h.sum()) == float(np.float16(np.sum(half, dtype=np.float64)))
        assert float(h.max()) == float(half.max())
        assert float(lt.asarray(host[0]).sum(dtype=np.float16)) == float(np.float16(np.sum(host[0], dtype=np.float64)))
    b = lt.asarray(host > 0)
    assert bool(b.any()) is True and bool(b.all()) is bool(np.all(host > 0))
    assert int(lt.asarray(np.arange(10, dtype=np.int32)).sum()) == 45


def test_a_host_scalar_read_before_a_write_keeps_its_value():
    x = lt.asarray(np.array([1.0, 2.0, 3.0], np.float32))
    m = x.max()
    assert float(m) == 3.0                                  # no result kept: m still reads x
    x -= m                                                  # the write evaluates m first
    assert float(m) == 3.0 and m.result is not None
    np.testing.assert_array_equal(x.numpy(), [-2.0, -1.0, 0.0])
    with lt.profile() as p:
        float(x.sum())
    assert [k.kind for k in p.kernels] == ["reduction"]     # a profile sees the launch
