"""Fused breadth, against NumPy: scans (cumsum, cumprod, cumulative_*) as one kernel that
computes their elementwise input; lazy concatenate (one kernel per part, into its slice); masked
writes `y[mask] = e`, `y[mask] += e` as one where kernel. Kernel counts come from lt.profile."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import lazytensor as lt
from lazytensor.testing.strategies import elements

SETTINGS = settings(max_examples=5, deadline=None)
DTYPES = st.sampled_from(["bool", "int8", "uint16", "int32", "float16", "float32", "float64"])
SHAPES = st.sampled_from([(1,), (7,), (3, 5), (2, 1, 4), (4, 3, 2)])


def _kinds(p):
    return [k.kind for k in p.kernels]


def _one_kernel_over(p, size):
    """One kernel, over `size` elements: a masked write's where kernel runs over the whole tensor (an
    update of the gathered elements alone, then a scatter, would run over the mask's count)."""
    return _kinds(p) == ["elementwise"] and p.kernels[0].elements == size


# -- scans ---------------------------------------------------------------------------------------------

@SETTINGS
@given(DTYPES.flatmap(lambda d: hnp.arrays(d, SHAPES, elements=elements(d))), st.data())
def test_fused_scans_match_numpy(x, data):
    u = data.draw(hnp.arrays(x.dtype, x.shape[-1:], elements=elements(x.dtype)))     # broadcast along the rest
    axis = data.draw(st.sampled_from([None, *range(-x.ndim, x.ndim)]))
    t, v = lt.asarray(x), lt.asarray(u)
    with np.errstate(all="ignore"):
        fused = x * u
        for name in ("cumsum", "cumprod"):
            want = getattr(np, name)(fused, axis=axis)
            got = getattr(lt, name)(t * v, axis=axis)
            assert got.dtype == want.dtype and got.shape == want.shape
            np.testing.assert_array_equal(got.numpy(), want)           # same order, same roundings: exact
        if axis is not None:
            for name in ("cumulative_sum", "cumulative_prod"):
                want = getattr(np, name)(fused, axis=axis, include_initial=True)
                np.testing.assert_array_equal(getattr(lt, name)(t * v, axis=axis, include_initial=True).numpy(), want)
        if x.dtype.kind != "b":
            want = np.cumsum(fused, axis=axis, dtype=np.float32)
            np.testing.assert_array_equal(lt.cumsum(t * v, axis=axis, dtype=np.float32).numpy(), want)


def test_cumsum_of_an_expression_is_one_kernel_reading_its_operands():
    a, b = lt.asarray(np.arange(12.0).reshape(3, 4)), lt.asarray(np.linspace(0, 1, 4))
    e = lt.cumsum(a * b + 1, axis=0)
    text = lt.explain(e, source=False)
    assert "plan: 1 step" in text and "FusedScan on cpu: cumsum along axis 0" in text
    with lt.profile() as p:
        got = lt.evaluate(e)
    assert _kinds(p) == ["scan"]
    np.testing.assert_array_equal(got.numpy(), np.cumsum(a.numpy() * b.numpy() + 1, axis=0))
    y = lt.zeros((3, 4))
    with lt.profile() as p:
        y[...] = lt.cumprod(a * 0.5, axis=1) - 1       # the scan's result fuses into the next kernel
    assert _kinds(p) == ["scan", "elementwise"]
    np.testing.assert_array_equal(y.numpy(), np.cumprod(a.numpy() * 0.5, axis=1) - 1)


def test_scan_into_its_own_input_and_overlapping_views():
    x = np.arange(10.0)
    a = lt.asarray(x.copy())
    a[...] = lt.cumsum(a)                              # read at the same index before it is written
    np.testing.assert_array_equal(a.numpy(), np.cumsum(x))
    b = lt.asarray(x.copy())
    b[1:] = lt.cumsum(b[:-1])                          # another index map: through a temporary
    want = x.copy()
    want[1:] = np.cumsum(x[:-1])
    np.testing.assert_array_equal(b.numpy(), want)


def test_scan_interpreter_tier_matches_numpy(monkeypatch):
    monkeypatch.setenv("LAZYTENSOR_JIT_WAIT", "0")
    x = np.random.default_rng(1).standard_normal((5, 6)).astype(np.float16)
    t = lt.asarray(x)
    np.testing.assert_array_equal(lt.cumsum(t * t - 7, axis=1).numpy(), np.cumsum(x * x - np.float16(7), axis=1))


def test_cumsum_gradient_is_a_reversed_cumsum():
    rng = np.random.default_rng(2)
    x, w = rng.standard_normal((3, 5)), rng.standard_normal((3, 5))
    t = lt.asarray(x)
    (g,) = lt.grad(lt.sum(lt.cumsum(t * 2, axis=1) * lt.asarray(w)), [t])
    np.testing.assert_allclose(g.numpy(), 2 * np.flip(np.cumsum(np.flip(w, 1), axis=1), 1), rtol=1e-12)
    eps, loss = 1e-6, lambda z: np.sum(np.cumsum(z * 2, axis=1) * w)
    dx = np.zeros_like(x)
    dx[1, 2] = eps
    np.testing.assert_allclose(g.numpy()[1, 2], (loss(x + dx) - loss(x - dx)) / (2 * eps), rtol=1e-6)
    with pytest.raises(NotImplementedError, match="cumprod"):
        lt.grad(lt.sum(lt.cumprod(t, axis=0)), [t])


def test_scan_errors_are_numpys():
    t = lt.asarray(np.ones((2, 3)))
    with pytest.raises(np.exceptions.AxisError):
        lt.cumsum(t, axis=2)
    with pytest.raises(ValueError, match="axis must be specified"):
        lt.cumulative_sum(t)


# -- concatenate -------------------------------------------------------------------------------------

@SETTINGS
@given(DTYPES, DTYPES, st.sampled_from([(3, 4), (2, 3, 2), (5,)]), st.data())
def test_lazy_concatenate_of_expressions_matches_numpy(d1, d2, shape, data):
    axis = data.draw(st.integers(-len(shape), len(shape) - 1))
    x = data.draw(hnp.arrays(d1, shape, elements=elements(d1)))
    s2 = list(shape)
    s2[axis] = data.draw(st.integers(0, 3))
    y = data.draw(hnp.arrays(d2, tuple(s2), elements=elements(d2)))
    tx, ty = lt.asarray(x), lt.asarray(y)
    with lt.profile() as p:
        e = lt.concatenate([tx * tx, ty, -tx if d1 not in ("bool",) else ~tx], axis=axis)
    assert isinstance(e, lt.Expr) and p.kernels == []                   # lazy: nothing ran
    with np.errstate(all="ignore"):
        want = np.concatenate([x * x, y, -x if d1 != "bool" else ~x], axis=axis)
    with lt.profile() as p:
        got = lt.evaluate(e)
    assert got.dtype == want.dtype and len(p.kernels) == 2 + (s2[axis] > 0)   # one kernel per non-empty part
    np.testing.assert_array_equal(got.numpy(), want)


def test_concatenate_parts_write_slices_of_the_destination_and_fuse_above():
    a = lt.asarray(np.arange(6.0).reshape(2, 3))
    text = lt.explain(lt.concatenate([a, a * 2], axis=1), source=False)
    assert "part 0 of 2 of the concatenation along axis 1, written into its slice [0:3]" in text
    assert "part 1 of 2" in text and "plan: 2 steps" in text
    y = lt.zeros((2, 6))
    with lt.profile() as p:
        y[...] = lt.relu(lt.stack([a, -a], axis=1).reshape(2, 6) + 1)
    assert len(p.kernels) == 3
    np.testing.assert_array_equal(y.numpy(), np.maximum(np.stack([a.numpy(), -a.numpy()], 1).reshape(2, 6) + 1, 0))


def test_concatenate_reading_its_destination_goes_through_a_temporary():
    x = np.arange(7.0)
    a = lt.asarray(x.copy())
    a[...] = lt.concatenate([a[2:], a[:2]])
    np.testing.assert_array_equal(a.numpy(), np.roll(x, -2))


def test_concatenate_values_stay_values_and_gradient_is_slices():
    a = lt.asarray(np.arange(3.0))
    e = lt.concatenate([a, a + 1])
    a[...] = 0                                         # e was built before: it keeps its value
    np.testing.assert_array_equal(e.numpy(), [0, 1, 2, 1, 2, 3])
    x, w = lt.asarray(np.array([1.0, 2.0])), np.array([3.0, 4.0, 5.0, 6.0])
    (g,) = lt.grad(lt.sum(lt.concatenate([x * x, x]) * lt.asarray(w)), [x])
    np.testing.assert_array_equal(g.numpy(), 2 * x.numpy() * w[:2] + w[2:])


# -- masked writes ---------------------------------------------------------------------------------------

@SETTINGS
@given(st.sampled_from(["int16", "float16", "float64"]).flatmap(
    lambda d: hnp.arrays(d, st.sampled_from([(5,), (3, 4), (2, 3, 2)]), elements=elements(d))), st.data())
def test_masked_writes_fuse_and_match_numpy(x, data):
    mask = data.draw(hnp.arrays(bool, x.shape))
    a = data.draw(hnp.arrays(x.dtype, x.shape, elements=elements(x.dtype)))
    y, want, ta = lt.asarray(x.copy()), x.copy(), lt.asarray(a)
    one = x.dtype.type(3)
    with np.errstate(all="ignore"):
        for key in (mask, lt.asarray(mask)):
            with lt.profile() as p:
                y[key] += one
            want[mask] += one
            assert _one_kernel_over(p, x.size)
            np.testing.assert_array_equal(y.numpy(), want)
            with lt.profile() as p:
                y[key] = (ta * one)[key]
            want[mask] = (a * one)[mask]
            assert _one_kernel_over(p, x.size)
            np.testing.assert_array_equal(y.numpy(), want)
            with lt.profile() as p:
                y[key] -= ta[key] + lt.asarray(np.array(one))
            want[mask] -= a[mask] + one
            assert _one_kernel_over(p, x.size)
            np.testing.assert_array_equal(y.numpy(), want)


def test_masked_write_of_an_expression_mask_and_held_gathers():
    x = np.array([3.0, -1.0, 4.0, -1.5, 5.0])
    y = lt.asarray(x.copy())
    with lt.profile() as p:
        y[y < 0] = lt.asarray(np.array(7.0))          # one element: where(y < 0, 7, y), the mask inside it
    assert _kinds(p) == ["elementwise"]
    np.testing.assert_array_equal(y.numpy(), np.where(x < 0, 7.0, x))
    m = y.numpy() > 4
    g = y[m]                                           # held: it keeps the values it had
    y[m] = g * 10
    np.testing.assert_array_equal(g.numpy(), [7.0, 7.0, 5.0])
    np.testing.assert_array_equal(y.numpy(), [3.0, 70.0, 4.0, 70.0, 50.0])
    y[m] = lt.asarray(np.array([1.0, 2.0, 3.0]))      # values of the count from elsewhere: a scatter
    np.testing.assert_array_equal(y.numpy(), [3.0, 1.0, 4.0, 2.0, 3.0])
    with pytest.raises(ValueError):
        y[m] = lt.asarray(np.ones(5))                  # NumPy's error: 5 values for 3 places
    assert "MaskGather on cpu" in lt.explain(lt.asarray(x)[m] * 2, source=False)


# -- CUDA: generated C compiled here, and run on a GPU -------------------------------------------------

def test_few_long_rows_take_cupys_scan_on_cuda():
    from lazytensor.kernels.scan import Scan
    from lazytensor.kernels.cuda.scan import library_fallback
    f32 = np.dtype(np.float32)
    assert library_fallback(Scan("cumsum", 0, (1 << 20,), f32))          # one row: one thread would walk it all
    assert not library_fallback(Scan("cumsum", 0, (1000, 5000), f32))    # 5000 rows of 1000, coalesced
    assert not library_fallback(Scan("cumsum", 1, (64, 100), f32))       # short rows: the kernel


def test_scan_cuda_kernels_compile_to_ptx():
    pytest.importorskip("cuda.bindings.nvrtc", reason="cuda-bindings (the 'test' extra) compiles CUDA C to PTX")
    from lazytensor.kernels.cuda.nvrtc_check import compile_to_ptx
    from lazytensor.kernels.program import program_for
    from lazytensor.kernels.scan import Scan
    from lazytensor.kernels.cuda.scan import render_cuda_scan
    for src, out in (("float16", "float16"), ("int8", "int64"), ("bool", "int64"), ("float32", "float32"),
                     ("uint32", "uint64"), ("int16", "int16"), ("float64", "float64")):
        src, out = np.dtype(src), np.dtype(out)
        op = "logical_and" if src.kind == "b" else "multiply"
        program = program_for((("load", src, 0), ("load", src, 1), (op, src, 0, 1)), 2, (), out)
        for kind in ("cumsum", "cumprod"):
            for axis, shapes in ((1, [(3, 4, 5), (5,)]), (0, [(6,), ()]), (2, [(2, 3, 4), (2, 3, 4)])):
                shape = shapes[0] if len(shapes[0]) > 1 or axis == 0 else None
                compile_to_ptx(render_cuda_scan(program, Scan(kind, axis, shape, out), shapes).source, optimize=False)


gpu = pytest.mark.skipif(not lt.cuda_usable(), reason="needs CuPy and a CUDA device")


@pytest.mark.gpu
@gpu
def test_scans_concatenate_and_masked_writes_on_cuda():
    rng = np.random.default_rng(3)
    x = rng.standard_normal((33, 70)).astype(np.float32)
    b = rng.standard_normal(70).astype(np.float32)
    t, v = lt.asarray(x, device="cuda"), lt.asarray(b, device="cuda")
    for axis in (0, 1):
        with lt.profile() as p:
            got = lt.evaluate(lt.cumsum(t * v + 1, axis=axis))
        assert _kinds(p) == ["scan"] and got.device == "cuda"
        np.testing.assert_array_equal(got.numpy(), np.cumsum(x * b + np.float32(1), axis=axis))
    long = rng.standard_normal(300_000)                # one long row: CuPy's parallel scan
    e = lt.cumsum(lt.asarray(long, device="cuda") * 2)
    assert "cupy.cumsum over a temporary" in lt.explain(e)
    with lt.profile() as p:
        got = lt.evaluate(e)
    assert _kinds(p) == ["elementwise", "scan"]
    np.testing.assert_allclose(got.numpy(), np.cumsum(long * 2), rtol=1e-9, atol=1e-9)
    for dtype in ("int8", "float16", "bool", "uint32"):
        xi = (x * 5).astype(dtype)
        ti = lt.asarray(xi, device="cuda")
        with np.errstate(all="ignore"):
            for name in ("cumsum", "cumprod"):
                np.testing.assert_array_equal(getattr(lt, name)(ti[:, ::-1], axis=1).numpy(),
                                              getattr(np, name)(xi[:, ::-1], axis=1))
    c = lt.evaluate(lt.concatenate([t * 2, v[None, :]], axis=0))
    np.testing.assert_array_equal(c.numpy(), np.concatenate([x * 2, b[None, :]]))
    y, want = lt.asarray(x.copy(), device="cuda"), x.copy()
    m = x > 0
    tm = lt.asarray(m, device="cuda")
    with lt.profile() as p:
        y[tm] += t[tm] * 2                             # the same mask object: one where kernel
    assert _kinds(p) == ["elementwise"] and p.kernels[0].elements == x.size
    want[m] += x[m] * 2
    np.testing.assert_array_equal(y.numpy(), want)
    y[m] = 0.5                                         # a NumPy mask with a tensor on CUDA
    want[m] = 0.5
    np.testing.assert_array_equal(y.numpy(), want)
    np.testing.assert_array_equal((t * 2)[tm].numpy(), (x * 2)[m])


# -- writes through an integer index array -------------------------------------------------------------

@settings(max_examples=4, deadline=None)
@given(st.sampled_from(["int8", "float16", "float32", "bool"]).flatmap(
    lambda d: hnp.arrays(d, st.sampled_from([(6,), (5, 3), (4, 2, 3)]), elements=elements(d))), st.data())
def test_index_writes_are_one_scatter_kernel_and_match_numpy(x, data):
    n = x.shape[0]
    idx = data.draw(hnp.arrays(np.int64, st.integers(0, 5), elements=st.integers(-n, n - 1)))
    a = data.draw(hnp.arrays(x.dtype, x.shape[1:], elements=elements(x.dtype)))    # broadcast over the rows
    y, want, ta = lt.asarray(x.copy()), x.copy(), lt.asarray(a)
    with np.errstate(all="ignore"):
        value = (a & a) if x.dtype == bool else a * a
        for key in (idx, lt.asarray(idx), list(idx)):
            with lt.profile() as p:
                y[key] = (ta & ta) if x.dtype == bool else ta * ta
            want[idx] = value
            assert _kinds(p) == ["scatter"]
            np.testing.assert_array_equal(y.numpy(), want)          # repeated rows: the last write wins
        if x.dtype != bool:
            y[idx] += ta
            want[idx] += a
            np.testing.assert_array_equal(y.numpy(), want)


def test_index_write_reading_its_destination_and_errors():
    x = np.arange(12.0).reshape(4, 3)
    y = lt.asarray(x.copy())
    y[[3, 0]] = y[0] * 2                               # the right side first, as NumPy
    want = x.copy()
    want[[3, 0]] = x[0] * 2
    np.testing.assert_array_equal(y.numpy(), want)
    from lazytensor.ops.index_write import index_write
    text = lt.explain(index_write(y, np.array([1]), y[2] + 1), source=False)
    assert "FusedScatter on cpu: out[index] = values, 1 rows" in text
    with pytest.raises(IndexError, match="index 4 is out of bounds for axis 0 with size 4"):
        y[[4]] = 1.0
    with pytest.raises(ValueError, match="could not be broadcast to indexing result of shape"):
        y[[0, 1]] = lt.asarray(np.ones((3, 3)))
    with pytest.raises(TypeError, match="same_kind"):
        lt.asarray(np.zeros(3, np.int32))[[0]] = lt.asarray(np.ones(1))


def test_index_write_cuda_kernels_compile_to_ptx():
    pytest.importorskip("cuda.bindings.nvrtc", reason="cuda-bindings (the 'test' extra) compiles CUDA C to PTX")
    from lazytensor.kernels.cuda.index_write import render_cuda_index_write
    from lazytensor.kernels.cuda.nvrtc_check import compile_to_ptx
    from lazytensor.kernels.program import program_for
    for dtype in ("float16", "int8", "bool", "float64", "uint64"):
        dtype = np.dtype(dtype)
        op = "logical_or" if dtype.kind == "b" else "add"
        program = program_for((("load", dtype, 0), ("load", dtype, 1), (op, dtype, 0, 1)), 2, (), dtype)
        for shape, shapes in (((3,), [(3,), ()]), ((2, 5), [(5,), (2, 5)]), ((2, 3, 4), [(2, 1, 4), (4,)])):
            compile_to_ptx(render_cuda_index_write(program, shape, shapes).source, optimize=False)
            compile_to_ptx(render_cuda_index_write(program, shape, shapes, from_out=(0,)).source, optimize=False)


@pytest.mark.gpu
@gpu
def test_index_writes_on_cuda():
    rng = np.random.default_rng(4)
    x = rng.standard_normal((50, 33)).astype(np.float16)
    a = rng.standard_normal(33).astype(np.float16)
    idx = rng.permutation(50)[:20]                      # no repeats: CuPy's undefined winner stays out
    y, want = lt.asarray(x.copy(), device="cuda"), x.copy()
    ta = lt.asarray(a, device="cuda")
    with lt.profile() as p:
        y[lt.asarray(idx, device="cuda")] = ta * 2 - 1
    assert _kinds(p) == ["scatter"]
    want[idx] = a * np.float16(2) - np.float16(1)
    np.testing.assert_array_equal(y.numpy(), want)
    with lt.profile() as p:
        y[idx[::-1]] += ta                             # no repeats: the kernel reads the rows it writes
    assert _kinds(p) == ["scatter"]
    want[idx[::-1]] += a
    np.testing.assert_array_equal(y.numpy(), want)


def test_index_write_interpreter_tier_and_rebound_plans(monkeypatch):
    rng = np.random.default_rng(5)
    monkeypatch.setenv("LAZYTENSOR_JIT_WAIT", "0")
    x, a = rng.standard_normal((6, 7)).astype(np.float16), rng.standard_normal(7).astype(np.float16)
    y, want = lt.asarray(x.copy()), x.copy()
    y[[5, 1, 5]] = lt.asarray(a) * 3 - 1             # a new kernel: NumPy's ufuncs run this call
    want[[5, 1, 5]] = a * np.float16(3) - np.float16(1)
    np.testing.assert_array_equal(y.numpy(), want)
    monkeypatch.setenv("LAZYTENSOR_JIT_WAIT", "1")
    for _ in range(2):                                 # plans kept as recipes, rebound to new tensors
        x, b = rng.standard_normal((4, 5)), rng.standard_normal(5)
        t, v = lt.asarray(x), lt.asarray(b)
        np.testing.assert_array_equal(lt.evaluate(lt.cumsum(t * v, axis=0) + 1).numpy(), np.cumsum(x * b, axis=0) + 1)
        np.testing.assert_array_equal(lt.evaluate(lt.concatenate([t * 2, t + v], axis=1) * 3).numpy(),
                                      np.concatenate([x * 2, x + b], axis=1) * 3)


def test_mask_gather_gradient_goes_back_through_the_mask():
    rng = np.random.default_rng(6)
    x, target = rng.standard_normal((4, 5)), rng.standard_normal((4, 5))
    valid = rng.random((4, 5)) > 0.4
    t = lt.asarray(x)
    loss = lambda z: np.mean((z[valid] - target[valid]) ** 2)                       # noqa: E731
    (g,) = lt.grad(lt.mean((t[valid] - lt.asarray(target)[valid]) ** 2), [t])
    assert "MaskExpand on cpu" in lt.explain(g, source=False)
    want = np.where(valid, 2 * (x - target) / valid.sum(), 0.0)
    np.testing.assert_allclose(g.numpy(), want, rtol=1e-12)
    eps, dx = 1e-6, np.zeros_like(x)
    i = tuple(np.argwhere(valid)[0])
    dx[i] = eps
    np.testing.assert_allclose(g.numpy()[i], (loss(x + dx) - loss(x - dx)) / (2 * eps), rtol=1e-6)


# -- a longer hunt (pytest -m slow) ----------------------------------------------------------------------

@pytest.mark.slow
@settings(max_examples=120, deadline=None)
@given(DTYPES.flatmap(lambda d: hnp.arrays(d, st.sampled_from([(6,), (4, 5), (3, 1, 4), (2, 3, 4)]),
                                           elements=elements(d))), st.data())
def test_hunt_scans_and_writes_through_views(x, data):
    t = lt.asarray(x)
    flip = data.draw(st.booleans())
    tv, xv = (t[::-1], x[::-1]) if flip else (t, x)
    axis = data.draw(st.integers(-x.ndim, x.ndim - 1))
    kind = data.draw(st.sampled_from(["cumsum", "cumprod"]))
    dtype = data.draw(st.sampled_from([None, "int64", "float64"]))
    with np.errstate(all="ignore"):
        want = getattr(np, kind)(xv + xv, axis=axis, dtype=dtype)
        np.testing.assert_array_equal(getattr(lt, kind)(tv + tv, axis=axis, dtype=dtype).numpy(), want)
        n = x.shape[0]
        idx = data.draw(hnp.arrays(np.int64, st.integers(0, 6), elements=st.integers(-n, n - 1)))
        y, w = lt.asarray(x.copy()), x.copy()
        y[idx] = tv[0] if x.ndim > 1 else tv[0:1]
        w[idx] = xv[0] if x.ndim > 1 else xv[0:1]
        np.testing.assert_array_equal(y.numpy(), w)
        mask = data.draw(hnp.arrays(bool, x.shape))
        if x.dtype != bool:
            y[mask] += (tv * tv)[mask]
            w[mask] += (xv * xv)[mask]
            np.testing.assert_array_equal(y.numpy(), w)
        parts = [y, tv, t * 2 if x.dtype != bool else ~t]
        axis2 = data.draw(st.integers(0, x.ndim - 1))
        np.testing.assert_array_equal(lt.concatenate(parts, axis=axis2).numpy(),
                                      np.concatenate([w, xv, x * 2 if x.dtype != bool else ~x], axis=axis2))


def test_index_update_in_place_is_one_scatter_kernel_reading_its_rows():
    rng = np.random.default_rng(7)
    x, a = rng.standard_normal((6, 4)), rng.standard_normal(4)
    y, want, ta = lt.asarray(x.copy()), x.copy(), lt.asarray(a)
    idx = np.array([4, -1, 0])
    with lt.profile() as p:
        y[idx] += ta * 2                               # no gather: the kernel reads y's rows, then writes them
    want[idx] += a * 2
    assert _kinds(p) == ["scatter"]
    np.testing.assert_array_equal(y.numpy(), want)
    ti = lt.asarray(idx)
    with lt.profile() as p:
        y[ti] = y[ti] * 3 - ta
    want[idx] = want[idx] * 3 - a
    assert _kinds(p) == ["scatter"]
    np.testing.assert_array_equal(y.numpy(), want)
    from lazytensor.ops.index_write import RowsFromDestination, index_write
    placeholder = lt.Tensor(np.broadcast_to(np.zeros(()), (3, 4)), "cpu")
    text = lt.explain(index_write(y, idx, placeholder + 1, RowsFromDestination(placeholder)), source=False)
    assert "each element read from the result just before it is written" in text
    for rows in ([1, 1, 2], [0, -6]):                  # repeated rows add once (NumPy's buffered update): gather first
        with lt.profile() as p:
            y[rows] += 1.0
        want[rows] += 1.0
        assert _kinds(p) == ["gather", "scatter"]
        np.testing.assert_array_equal(y.numpy(), want)
    g = y[ti]                                          # held: it keeps its values
    old = want[idx].copy()
    y[ti] = g + 1
    want[idx] += 1
    np.testing.assert_array_equal(g.numpy(), old)
    np.testing.assert_array_equal(y.numpy(), want)


def test_update_of_a_temporary_gather_is_one_kernel_and_a_named_one_keeps_numpy_s_meaning():
    """`y[k] += v`: the `y[k]` that only the statement holds takes no memory of its own (no gather and
    update kernels before the write); a gather bound to a name still sees its own write, y does not."""
    rng = np.random.default_rng(9)
    x, a = rng.standard_normal((6, 4)).astype(np.float32), rng.standard_normal(4).astype(np.float32)
    y, want, t, ta = lt.asarray(x.copy()), x.copy(), lt.asarray(x), lt.asarray(a)
    idx = np.array([4, 1, 0])[::-1]                    # a view: NumPy's index of negative stride
    with lt.profile() as p:
        y[idx] += ta
    want[idx] += a
    assert _kinds(p) == ["scatter"]
    np.testing.assert_array_equal(y.numpy(), want)
    m = x > 0
    tm = lt.asarray(m)
    with lt.profile() as p:
        y[tm] += t[tm] * 2                             # the same mask object: one where kernel
    want[m] += x[m] * 2
    assert _one_kernel_over(p, x.size)
    np.testing.assert_array_equal(y.numpy(), want)
    g = y[idx]
    g += 1.0
    np.testing.assert_array_equal(g.numpy(), want[idx] + 1)
    np.testing.assert_array_equal(y.numpy(), want)
    yi = lt.asarray(np.arange(6))
    with pytest.raises(TypeError, match="same_kind"):
        yi[[0, 1]] += 1.5                              # NumPy: a float64 result is no int64's under same_kind
    with pytest.raises(ValueError, match="shape"):
        y[idx] += lt.asarray(np.ones((2, 3, 4), np.float32))
    np.testing.assert_array_equal(yi.numpy(), np.arange(6))
    np.testing.assert_array_equal(y.numpy(), want)


def test_row_gather_gradient_adds_repeated_rows():
    rng = np.random.default_rng(8)
    x, w = rng.standard_normal((5, 3)), rng.standard_normal((4, 3))
    t = lt.asarray(x)
    idx = [3, 0, 3, 1]
    (g,) = lt.grad(lt.sum(t[idx] * t[idx] * lt.asarray(w)), [t])
    want = np.zeros_like(x)
    np.add.at(want, idx, 2 * x[idx] * w)
    np.testing.assert_allclose(g.numpy(), want, rtol=1e-12)


@pytest.mark.parametrize("kind", ["cumsum", "cumprod"])
@pytest.mark.parametrize("axis", [0, 1])
def test_a_scan_into_another_kind_of_dtype_twice(kind, axis):
    """cumsum(t + t, dtype='int64') over float16: the second call runs the interpreter's kept block
    plan, which wrote the float16 sum straight into the int64 values (NumPy refuses that cast)."""
    x = np.arange(6, dtype=np.float16).reshape(3, 2) - 2.5
    t = lt.asarray(x)
    want = getattr(np, kind)(x + x, axis=axis, dtype=np.int64)
    for _ in range(2):
        np.testing.assert_array_equal(getattr(lt, kind)(t + t, axis=axis, dtype="int64").numpy(), want)
