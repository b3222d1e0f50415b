"""CUDA code generation without a GPU: render kernels for every op, dtype and layout class and
compile them to PTX with NVRTC (cuda-bindings), so a codegen error in CUDA source fails CI."""
from __future__ import annotations

import itertools

import numpy as np
import pytest

pytest.importorskip("cuda.bindings.nvrtc", reason="cuda-bindings (the 'test' extra) compiles CUDA C to PTX")

import lazytensor as lt
from lazytensor.core.expr import apply
from lazytensor.kernels.cuda.backend import describe_geometry
from lazytensor.kernels.cuda.layout import (BLOCK, CONTIGUOUS, ROW_STEPS, ROW_UNROLL, RUNTIME, collapse,
                                          flat_geometry, plan_launch)
from lazytensor.kernels.cuda.prelude import prelude
from lazytensor.kernels.cuda.nvrtc_check import NvrtcError, compile_to_ptx
from lazytensor.kernels.ops import DTYPES, OPS
from lazytensor.kernels.program import program_for
from lazytensor.kernels.cuda.render_cuda import render_cuda
from lazytensor.plan.lower import lower
from tests.support.layouts import contiguous_strides

F16, F32, F64 = np.dtype("float16"), np.dtype("float32"), np.dtype("float64")


def _tensor(dtype, shape=(8,)):
    rng = np.random.default_rng(0)
    return lt.asarray((rng.integers(1, 5, size=shape)).astype(dtype), device="cpu")


def _program(expr):
    program, _, _ = lower(expr, expr.dtype)
    return program


def _compile_together(sources, optimize=True) -> str:
    """One translation unit per prelude: NVRTC runs once for many kernels."""
    ptx = []
    for float16 in (False, True):
        group = [s for s in sources if s.float16 == float16]
        if group:
            unit = prelude(float16) + "\n" + "\n".join(s.kernel for s in group)
            ptx.append(compile_to_ptx(unit, name=f"batch_{len(group)}.cu", optimize=optimize))
    text = "\n".join(ptx)
    for s in sources:
        assert f".entry {s.name}(" in text, s.name
    return text


def _op_expressions():
    """Each op of the table on every dtype it accepts, with array and scalar operands."""
    exprs = []
    for name, spec in OPS.items():
        for dtype in DTYPES:
            if spec.arity == 3:
                candidates = [(_tensor(bool), _tensor(dtype), _tensor(dtype)),
                              (_tensor(bool), _tensor(dtype), 2)]
            elif spec.arity == 2:
                candidates = [(_tensor(dtype), _tensor(dtype)), (_tensor(dtype), 3)]
            else:
                candidates = [(_tensor(dtype),)]
            for operands in candidates:
                try:
                    exprs.append(apply(name, *operands))
                except (TypeError, OverflowError):
                    pass            # NumPy has no loop for it: neither has lazytensor
    # Mixed-signedness comparisons take the table's dedicated snippets.
    for name in ("equal", "not_equal", "less", "less_equal", "greater", "greater_equal"):
        exprs.append(apply(name, _tensor(np.int64), _tensor(np.uint64)))
        exprs.append(apply(name, _tensor(np.uint64), _tensor(np.int64)))
    return exprs


def test_every_op_and_dtype_compiles():
    """Flat vector kernels: their scalar tail holds the scalar element code too."""
    exprs = _op_expressions()
    assert {e.op for e in exprs} == set(OPS)
    sources = {}
    for expr in exprs:
        program = _program(expr)
        source = render_cuda(program, flat_geometry(program, 1 << 20, [0] * (program.n_inputs + 1)).layout)
        sources[source.name] = source
    _compile_together(list(sources.values()), optimize=False)


def test_every_cast_compiles():
    sources = []
    for src, dst in itertools.product(DTYPES, DTYPES):
        program = program_for((("load", src, 0), ("astype", dst, 0)), 1, (), dst)
        sources.append(render_cuda(program, flat_geometry(program, 4096, [0, 0]).layout))
        # The store converts too when the destination's dtype differs from the result's.
        stored = program_for((("load", src, 0),), 1, (), dst)
        sources.append(render_cuda(stored, flat_geometry(stored, 4096, [0, 0]).layout))
    _compile_together(sources, optimize=False)


def _relu_affine(dtype):
    """relu((x - m) * s * g + b), the per-channel case of the benchmark."""
    ins = (("load", dtype, 0), ("load", dtype, 1), ("subtract", dtype, 0, 1), ("load", dtype, 2),
           ("multiply", dtype, 2, 3), ("load", dtype, 3), ("multiply", dtype, 4, 5), ("load", dtype, 4),
           ("add", dtype, 6, 7), ("relu", dtype, 8))
    return program_for(ins, 5, (), dtype)


def _plan(program, shape, operands, out_strides=None, out_address=0):
    out_strides = out_strides or contiguous_strides(shape, program.out_dtype.itemsize)
    return plan_launch(program, shape, out_strides, out_address, operands)


@pytest.mark.parametrize("dtype", [F32, F16, F64, np.dtype(np.int8)])
def test_per_channel_vectors_of_nc_are_read_once_per_thread(dtype):
    """The row loop: one modulo per thread, before the loop; inside it only the contiguous operands
    are loaded, ROW_UNROLL rows of them before the first store."""
    program = _relu_affine(dtype) if dtype.kind == "f" else program_for(
        (("load", dtype, 0), ("load", dtype, 1), ("add", dtype, 0, 1)), 2, (), dtype)
    n, c, it = 1 << 12, 64, dtype.itemsize
    x = ((n, c), contiguous_strides((n, c), it), 0)
    vec = ((c,), (it,), 4096)
    geometry = _plan(program, (n, c), [x] + [vec] * (program.n_inputs - 1))
    layout = geometry.layout
    assert layout.ndim == 2 and layout.access[:2] == (CONTIGUOUS, CONTIGUOUS)
    assert all(acc == (0, 1) for acc in layout.access[2:])
    assert layout.vector == 16 // it and layout.rows == ROW_UNROLL
    assert geometry.grid * BLOCK % (c // layout.vector) == 0        # the step keeps the channels
    source = render_cuda(program, layout)
    head, loop = source.kernel.split("lt_index j = first;")
    assert head.count("%") == 1 and "%" not in loop and "/=" not in loop
    assert all(f"in{k}_c" in head and f"in{k} +" not in loop for k in range(1, program.n_inputs))
    unrolled = loop[:loop.index("out + i0")]
    assert all(f"(in0_v{r}, in0 + i{r})" in unrolled for r in range(ROW_UNROLL))
    assert "in per-channel rows" in describe_geometry(geometry)
    _compile_together([source])


@pytest.mark.parametrize("rows,channels,vector", [(4099, 64, 4), (1001, 24, 4), (1000, 8, 8), (33, 4096 * 3, 4),
                                                  (5, 2 ** 20, 8), (1 << 20, 64, 8)])
def test_row_loop_covers_every_step_once_with_fixed_channels(rows, channels, vector):
    """The row loop's indexing replayed in NumPy, unrolled iterations and remainder: every vector
    step is visited exactly once, and always by a thread whose first step has the same channels."""
    from lazytensor.kernels.cuda.layout import _row_loop_grid
    grid = _row_loop_grid((rows, channels), (CONTIGUOUS, CONTIGUOUS, (0, 1)), vector, False)
    chunks, nv = channels // vector, rows * channels // vector
    step = grid * BLOCK
    assert -(-nv // step) <= ROW_STEPS
    first = np.arange(step, dtype=np.int64)
    visits = np.zeros(nv, np.int64)
    j = first.copy()
    for unroll in (ROW_UNROLL, 1):          # the unrolled loop, then the remainder loop
        while True:
            go = j + (unroll - 1) * step < nv
            if not go.any():
                break
            for r in range(unroll):
                at = j[go] + r * step
                np.add.at(visits, at, 1)
                assert np.array_equal(at % chunks, first[go] % chunks)
            j[go] += unroll * step
    assert (visits == 1).all()


def test_row_loop_applies_only_where_the_channels_stay_fixed():
    f32 = _relu_affine(F32)
    n, c = 1000, 32
    x = ((n, c), (c * 4, 4), 0)
    vec = ((c,), (4,), 0)
    assert _plan(f32, (n, c), [x] + [vec] * 4).layout.rows == ROW_UNROLL
    # A per-row operand varies along the rows; a strided destination is not contiguous; odd rows are scalar.
    assert _plan(f32, (n, c), [x, ((n, 1), (4, 4), 0)] + [vec] * 3).layout.rows == 0
    assert _plan(f32, (n, c), [x] + [vec] * 4, out_strides=(c * 8, 4)).layout.rows == 0
    assert _plan(f32, (n, 7), [((n, 7), (28, 4), 0)] + [((7,), (4,), 0)] * 4).layout.rows == 0
    # Three rows of 1025 chunks: a thread count that keeps the channels would be mostly idle.
    assert _plan(f32, (3, 4100), [((3, 4100), (16400, 4), 0)] + [((4100,), (4,), 0)] * 4).layout.rows == 0
    # The flat layout keeps its one step per thread.
    assert flat_geometry(f32, 1 << 20, [0] * 6).layout.rows == 0


def test_row_loop_kernels_compile():
    """Row loops over every dtype class, a row-constant (0, 0) operand, float16 storage with
    float32 vectors, 64-bit indexing, and channels that are no multiple of the block."""
    mixed = program_for((("load", F16, 0), ("astype", F32, 0), ("load", F32, 1), ("multiply", F32, 1, 2),
                         ("load", F32, 2), ("add", F32, 3, 4)), 3, (), F16)
    cases = []
    for dtype in (np.dtype(bool), np.dtype(np.uint8), np.dtype(np.int16), np.dtype(np.int64), F64, F16):
        program = program_for((("load", dtype, 0), ("load", dtype, 1), ("maximum", dtype, 0, 1)), 2, (), dtype)
        it = dtype.itemsize
        cases.append((program, _plan(program, (1000, 48), [((1000, 48), (48 * it, it), 0), ((48,), (it,), 0)])))
    cases.append((mixed, _plan(mixed, (900, 24), [((900, 24), (48, 2), 0), ((24,), (4,), 0), ((), (), 0)])))
    cases.append((mixed, _plan(mixed, (1 << 26, 64), [((1 << 26, 64), (128, 2), 0), ((64,), (4,), 0),
                                                      ((1, 64), (256, 4), 0)])))
    assert cases[-2][1].layout.access[3] == (0, 0) and cases[-1][1].layout.index64
    assert all(g.layout.rows == ROW_UNROLL for _, g in cases)
    _compile_together([render_cuda(p, g.layout) for p, g in cases])


def test_nchw_per_channel_needs_one_division_and_one_modulo():
    program = _relu_affine(F32)
    shape = (8, 16, 5, 6)
    x = (shape, contiguous_strides(shape, 4), 0)
    vec = ((16, 1, 1), (4, 4, 4), 0)
    geometry = _plan(program, shape, [x] + [vec] * 4)
    assert geometry.extents == (8, 16, 30)
    assert geometry.layout.access[2] == (0, 1, 0)
    assert geometry.layout.vector == 2            # 30 is no multiple of 4: 8-byte vectors
    source = render_cuda(program, geometry.layout)
    step = source.kernel[source.kernel.index("for (lt_index j"):]
    assert step.count("%") == 1 and step.count("/=") == 1
    _compile_together([source])


def test_odd_rows_fall_back_to_scalar_and_say_why():
    program = _relu_affine(F32)
    shape = (10, 7)
    geometry = _plan(program, shape, [(shape, (28, 4), 0)] + [((7,), (4,), 0)] * 4)
    assert geometry.layout.vector == 1 and geometry.notes == ("the innermost extent 7 is odd",)


def test_layout_classes_compile():
    f32 = _relu_affine(F32)
    mixed = program_for((("load", F16, 0), ("astype", F32, 0), ("load", F32, 1), ("add", F32, 1, 2),
                         ("scalar", F32, 0), ("multiply", F32, 3, 4)), 2, (F32,), F32)
    cases = []
    n, c = 1000, 30
    # Row vector (N, 1) over (N, C): only the outer index is needed.
    cases.append((f32, _plan(f32, (n, c), [((n, c), (c * 4, 4), 0), ((n, 1), (4, 4), 0)] * 2 + [((c,), (4,), 0)])))
    # A transposed input and a reversed one: runtime strides.
    cases.append((f32, _plan(f32, (n, c), [((n, c), (4, n * 4), 0), ((n, c), (-c * 4, 4), 4 * n * c),
                                           ((c,), (4,), 0), ((), (), 0), ((1, c), (c * 4, 4), 0)])))
    # A strided destination (every other column) and a size-1 expression.
    cases.append((f32, _plan(f32, (n, c), [((n, c), (c * 4, 4), 0)] * 5, out_strides=(2 * c * 4, 8))))
    cases.append((f32, _plan(f32, (1, 1), [((1, 1), (4, 4), 0)] * 5)))
    # float16 storage read into a float32 expression, flat vector and unaligned scalar.
    cases.append((mixed, flat_geometry(mixed, 12345, [0, 0, 0])))
    cases.append((mixed, flat_geometry(mixed, 12345, [0, 2, 0])))
    # Beyond 2**31 elements: 64-bit indexing (only the geometry is planned, nothing is allocated).
    big = _plan(f32, (1 << 26, 64), [(((1 << 26), 64), (256, 4), 0)] + [((64,), (4,), 0)] * 4)
    cases.append((f32, big))
    assert big.layout.index64 and not cases[0][1].layout.index64
    sources = [render_cuda(p, g.layout) for p, g in cases]
    assert "long long n" in sources[-1].kernel
    assert cases[2][1].layout.access[0] != CONTIGUOUS
    assert any(RUNTIME in acc for acc in cases[1][1].layout.access if acc != CONTIGUOUS)
    assert cases[5][1].layout.vector == 1 and "in0 is not 16-byte aligned" in cases[5][1].notes
    _compile_together(sources)


def test_collapse_merges_only_dims_contiguous_for_every_operand():
    extents, strides = collapse((4, 5, 6), [(30, 6, 1), (30, 6, 1)])
    assert extents == (120,) and strides == [(1,), (1,)]
    extents, strides = collapse((4, 5, 6), [(30, 6, 1), (0, 6, 1)])
    assert extents == (4, 30) and strides == [(30, 1), (0, 1)]
    extents, strides = collapse((4, 1, 6), [(6, 6, 1), (0, 0, 1)])
    assert extents == (4, 6) and strides == [(6, 1), (0, 1)]


def test_scalars_are_arguments_not_source():
    a = _tensor(F32)
    sources = []
    for expr in (a * 2.5 + 1.0, a * 7.0 + 3.0):
        program = _program(expr)
        sources.append(render_cuda(program, flat_geometry(program, 64, [0, 0]).layout))
    assert sources[0].name == sources[1].name and "2.5" not in sources[0].source


def test_compile_error_carries_nvrtc_log():
    with pytest.raises(NvrtcError, match="undefined"):
        compile_to_ptx('extern "C" __global__ void k(float* x) { x[0] = not_a_function(1.0f); }')


def test_random_dag_kernels_compile_to_ptx():
    """Every kernel the CUDA backend would generate for the property tests' DAGs (their leaves are
    contiguous, strided, reversed and broadcast arrays) compiles."""
    import os

    from hypothesis import HealthCheck, given, settings
    from lazytensor.testing.strategies import dags

    @settings(max_examples=int(os.environ.get("LT_PROPERTY_EXAMPLES", "70")), deadline=None,
              suppress_health_check=list(HealthCheck), print_blob=True)
    @given(dags())
    def check(dag):
        program, inputs, _ = lower(dag.expr, dag.expr.dtype)
        out = np.empty(dag.expected.shape, dag.expr.dtype)
        geometry = plan_launch(program, out.shape, out.strides, out.ctypes.data,
                               [(a.shape, a.strides, a.ctypes.data) for a in inputs])
        source = render_cuda(program, geometry.layout)
        try:
            compile_to_ptx(source.source, name=f"{source.name}.cu", optimize=False)
        except NvrtcError as exc:
            raise AssertionError(f"{dag!r}\n{exc}") from None

    check()


def _first_use_source(dtype=F32):
    """The kernel of bench_cuda's first-use case, for dtype."""
    x = lt.asarray(np.linspace(-3, 3, 4096, dtype=dtype), device="cpu")
    program = _program(lt.expm1(lt.sin(x) * 0.25 + lt.cos(x)) % 3 - x // 2)
    return render_cuda(program, flat_geometry(program, 4096, [0, 0]).layout)


def test_nvrtc_options_keep_numpy_numerics():
    """The speed options only add to render_cuda's: no -ftz, fast math or FMA contraction, ever."""
    from lazytensor.kernels.cuda.compile import nvrtc_options
    from lazytensor.kernels.cuda.render_cuda import NVRTC_OPTIONS

    assert {"--fmad=false", "-ftz=false", "-prec-div=true", "-prec-sqrt=true"} <= set(NVRTC_OPTIONS)
    assert nvrtc_options((12, 3)) == NVRTC_OPTIONS
    for version in ((12, 4), (13, 0), (13, 5)):
        options = nvrtc_options(version)
        assert options[:len(NVRTC_OPTIONS)] == NVRTC_OPTIONS and options[len(NVRTC_OPTIONS):] == ("-minimal",)
        assert not any("fast" in o or "ftz=true" in o or "fmad=true" in o for o in options)


def test_cubin_cache_key_follows_the_options():
    """The disk cache key covers the options actually passed, -minimal included."""
    from lazytensor.kernels.cuda.compile import CubinCompiler

    source = _first_use_source()
    paths = {}
    for version in ((12, 3), (12, 4)):
        compiler = object.__new__(CubinCompiler)
        compiler.nvrtc_version, compiler.arch = version, 90
        path, options = compiler.cache_path(source)
        assert ("-minimal" in options) == (version >= (12, 4)) and "-arch=sm_90" in options
        paths[version] = path
    assert paths[(12, 3)] != paths[(12, 4)]


def test_minimal_changes_no_instruction(monkeypatch):
    """-minimal only shortens the front end: float32, float64 and float16 kernels, and every layout
    class, compile to the same PTX with and without it."""
    import lazytensor.kernels.cuda.nvrtc_check as nvrtc_check
    from lazytensor.kernels.cuda.render_cuda import NVRTC_OPTIONS

    assert "-minimal" in nvrtc_check.nvrtc_options(nvrtc_check.nvrtc_version())
    mixed = program_for((("load", F16, 0), ("astype", F32, 0), ("load", F32, 1), ("add", F32, 1, 2),
                         ("scalar", F32, 0), ("multiply", F32, 3, 4)), 2, (F32,), F32)
    f32 = _relu_affine(F32)
    sources = [_first_use_source(F32), _first_use_source(F64),
               render_cuda(mixed, flat_geometry(mixed, 12345, [0, 0, 0]).layout),
               render_cuda(f32, _plan(f32, (1000, 30), [((1000, 30), (4, 4000), 0)] * 5).layout)]
    with_minimal = _compile_together(sources)
    monkeypatch.setattr(nvrtc_check, "nvrtc_options", lambda version: NVRTC_OPTIONS)
    assert _compile_together(sources) == with_minimal


def test_float_floordiv_and_mod_are_compiled_once_per_kernel():
    """lt_floordiv_f / lt_mod_f are out of line: one body each however many lanes call them (the
    first-use kernel calls each from 4 unrolled vector lanes and the scalar tail)."""
    ptx = compile_to_ptx(_first_use_source().source)
    for helper in ("_Z13lt_floordiv_fIfET_S0_S0_", "_Z8lt_mod_fIfET_S0_S0_"):
        assert ptx.count(f"{helper}(") == 1, helper        # the definition; the other line declares it
    assert "call.uni" in ptx
