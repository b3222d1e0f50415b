"""Streaming stores on the CPU (kernel_stream, kernels/cpu/numba_stream.py and kernels/cpu/stream_stores.py):
results above the last-level cache are written block by block through L1 buffers with streaming
stores. The oracle is the ordinary kernel (kernel_par) on the same operands, bit for bit, and NumPy.
The size threshold is lowered here so that small arrays stream."""
import os
import platform
import subprocess
import sys
import textwrap

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import lazytensor as lt
from lazytensor.kernels.cpu import stream_stores
from lazytensor.kernels.program import Layout, program_for
from lazytensor.kernels.cpu.render_numba import render_numba

BLOCK = stream_stores.STREAM_BLOCK
CHUNKS = stream_stores.STREAM_CHUNKS


def placed(n: int, dtype, offset: int) -> np.ndarray:
    """An array of n elements starting `offset` elements past a 64-byte boundary, NaN-filled."""
    dtype = np.dtype(dtype)
    buf = np.empty(n + 64, dtype)
    start = (-buf.ctypes.data % 64) // dtype.itemsize + offset
    out = buf[start:start + n]
    out[...] = np.nan if dtype.kind == "f" else 0
    return out


def gradients(n, offset):
    """Destinations for the gradients of a, b, c, d of sum(tanh(a*b+c)*d) and the four gradients."""
    rng = np.random.default_rng(n)
    a, b, c, d = (lt.asarray(rng.standard_normal(n).astype(np.float32)) for _ in range(4))
    grads = lt.grad(lt.sum(lt.tanh(a * b + c) * d), [a, b, c, d])
    return [placed(n, np.float32, offset) for _ in range(4)], grads


def assign(dests, exprs, min_bytes, monkeypatch):
    monkeypatch.setattr(stream_stores, "MIN_BYTES", min_bytes)
    pairs = [(lt.asarray(d), e) for d, e in zip(dests, exprs)]
    text = str(lt.explain(pairs))
    lt.assign(pairs)
    return text


@settings(max_examples=12, deadline=None)
@given(st.sampled_from([32, 33, BLOCK - 1, BLOCK, BLOCK + 1, 3 * BLOCK + 17, 8 * BLOCK + 5]), st.integers(0, 7))
def test_gradients_stream_bit_for_bit_as_the_ordinary_kernel(n, offset):
    """Every size around a block (STREAM_BLOCK elements) and the alignment head, through lt.assign: the streamed
    results equal the ordinary kernel's, element for element, and NumPy's within float32 rounding."""
    with pytest.MonkeyPatch.context() as mp:
        streamed, grads = gradients(n, offset)
        text = assign(streamed, grads, 0, mp)
        assert "kernel_stream (numba parallel, streaming stores" in text
        ordinary = [placed(n, np.float32, offset) for _ in range(4)]
        assert "ordinary stores: results of" in assign(ordinary, grads, 1 << 62, mp)
    for got, want in zip(streamed, ordinary):
        assert np.array_equal(got.view(np.uint32), want.view(np.uint32))


@settings(max_examples=25, deadline=None)
@given(st.one_of(st.integers(8, 4 * BLOCK + 40), st.integers(2 * CHUNKS * BLOCK, 3 * CHUNKS * BLOCK)),   # (several blocks a chunk)
       st.integers(0, 7), st.booleans())
def test_any_length_and_offset_streams_every_element_as_the_ordinary_kernel(n, offset, flat):
    """Drawn lengths and offsets, on both renderings of kernel_stream: the flat one (a * b + 1 and a - b,
    1-D operands of one shape) and the 1-D one with a broadcast operand (the gradients, whose seed is
    broadcast). The elements before the first 32-byte boundary, the whole blocks split between the
    threads (one or several a chunk) and the elements after the last whole block together write every
    element (destinations start NaN) with the ordinary kernel's bits."""
    if flat:
        rng = np.random.default_rng(n)
        a, b = (lt.asarray(rng.standard_normal(n).astype(np.float32)) for _ in range(2))
        exprs = [a * b + 1, a - b]
    else:
        _, exprs = gradients(n, offset)
    with pytest.MonkeyPatch.context() as mp:
        streamed = [placed(n, np.float32, offset) for _ in exprs]
        assert "kernel_stream (numba parallel, streaming stores" in assign(streamed, exprs, 0, mp)
        ordinary = [placed(n, np.float32, offset) for _ in exprs]
        assert "ordinary stores: results of" in assign(ordinary, exprs, 1 << 62, mp)
    for got, want in zip(streamed, ordinary):
        assert np.array_equal(got.view(np.uint32), want.view(np.uint32))


@pytest.mark.parametrize("dtype", [np.float64, np.float16, np.int32, np.bool_])
def test_other_dtypes_and_several_outputs_stream(dtype, monkeypatch):
    """A flat 2-D layout writing an output of `dtype` and a float32 one: the streamed values equal
    NumPy's (the float16 helpers round as NumPy does)."""
    rng = np.random.default_rng(1)
    shape = (37, 101)
    x = rng.standard_normal(shape).astype(np.float32)
    y = rng.standard_normal(shape).astype(np.float32)
    tx, ty = lt.asarray(x), lt.asarray(y)
    first = (tx * ty + 1).astype(dtype) if dtype != np.bool_ else tx > ty
    dests = [placed(x.size, dtype, 0).reshape(shape), placed(x.size, np.float32, 0).reshape(shape)]
    text = assign(dests, [first, tx - ty], 0, monkeypatch)
    assert "kernel_stream (numba parallel, streaming stores" in text
    want = (x * y + 1).astype(dtype) if dtype != np.bool_ else x > y
    np.testing.assert_array_equal(dests[0], want)
    np.testing.assert_array_equal(dests[1], x - y)


def test_outputs_off_each_others_alignment_store_ordinarily(monkeypatch):
    """The streaming stores need every output on a 32-byte boundary at the same element: outputs one
    float32 apart store ordinarily, and explain says why."""
    dests, grads = gradients(5000, 0)
    dests[1] = placed(5000, np.float32, 1)
    text = assign(dests, grads, 0, monkeypatch)
    assert "kernel_seq (numba serial); ordinary stores: the outputs reach a 32-byte boundary at different elements" in text
    assert "kernel_stream (" not in text


def test_small_results_stay_in_the_cache():
    """Below the last-level cache's size the results are stored ordinarily, and explain says why."""
    a = lt.asarray(np.ones(1 << 17, np.float32))
    text = str(lt.explain(a * 2 + 1))
    assert "kernel_par (numba parallel, prange); ordinary stores: results of 524288 bytes fit in the last-level cache" in text
    assert stream_stores.MIN_BYTES == stream_stores.last_level_cache_bytes() >= 1 << 20


@pytest.mark.skipif(platform.machine() not in ("x86_64", "AMD64"), reason="reads x86 assembly")
def test_the_stream_kernel_vectorizes_and_stores_non_temporally():
    """kernel_stream's block loop keeps packed float32 arithmetic, and its copies are streaming
    32-byte stores (vmovntdq / vmovntps), each thread's ended by sfence. Its buffers are on the stack:
    it allocates nothing (heap buffers made every block check at run time that they overlap no input)."""
    import numba
    f32 = np.dtype(np.float32)
    program = program_for((("load", f32, 0), ("load", f32, 1), ("multiply", f32, 0, 1), ("tanh", f32, 2)), 2, (), f32)
    source = render_numba(program, Layout(1, True)).replace("cache=True", "cache=False")
    module = {}
    exec(compile(source, "<kernel>", "exec"), module)
    fn = module["kernel_stream"]
    array = numba.types.Array(numba.float32, 1, "C")
    fn.compile((array, array, array, numba.intp))
    asm = fn.inspect_asm(fn.signatures[0])
    assert "vmovntdq" in asm or "vmovntps" in asm
    assert "sfence" in asm
    assert "vmulps" in asm and "ymm" in asm
    assert "NRT_MemInfo_alloc" not in asm


def test_the_direct_path_streams_too(monkeypatch):
    """y[...] = a * 2 + 1 repeated takes the direct path (lazytensor.assign.direct, run_flat), which must
    take kernel_stream as lt.explain says, not kernel_par or kernel_seq."""
    import re
    import sys
    monkeypatch.setattr(stream_stores, "MIN_BYTES", 0)
    x = np.arange(3000, dtype=np.float32)
    a = lt.asarray(x)
    y = lt.asarray(placed(3000, np.float32, 0))
    for _ in range(2):              # (the second call files the kernel where the direct path looks)
        y[...] = a * 2 + 1
    text = str(lt.explain(a * 2 + 1, y))
    assert "kernel_stream (numba parallel, streaming stores" in text
    module = sys.modules[re.search(r"cpu kernel (lt_\w+)", text).group(1)]

    def refuse(*args):
        raise AssertionError("kernel_par or kernel_seq ran where explain says kernel_stream")
    monkeypatch.setattr(module, "kernel_par", refuse)
    monkeypatch.setattr(module, "kernel_seq", refuse)
    y.numpy()[...] = np.nan
    y[...] = a * 2 + 1
    np.testing.assert_array_equal(y.numpy(), x * 2 + 1)


def test_the_background_compile_prepares_kernel_stream(tmp_path):
    """In a fresh process without waiting for numba: a first call large enough to stream is served
    by the interpreter while kernel_par, kernel_seq and kernel_stream compile; the next call streams,
    with the interpreter's bits for these exact ops."""
    code = textwrap.dedent("""
        import numpy as np, lazytensor as lt
        from lazytensor.kernels.cpu import stream_stores
        from lazytensor.kernels.backend import backend_for
        stream_stores.MIN_BYTES = 1 << 16
        n = 40000
        buf = np.empty(n + 16, np.float32)
        y = lt.asarray(buf[(-buf.ctypes.data % 32) // 4:][:n])
        a = lt.asarray(np.arange(n, dtype=np.float32))
        with lt.profile() as first:
            y[...] = (a - 7) * 0.5
        v1 = y.numpy().copy()
        assert backend_for("cpu").compiler.drain(300)
        with lt.profile() as later:
            y[...] = (a - 7) * 0.5
        assert first.kernels[0].name == "interpreter", first
        assert later.kernels[0].config == "parallel, streaming stores", later
        assert np.array_equal(v1.view(np.uint32), y.numpy().view(np.uint32))
        print("ok")
    """)
    env = dict(os.environ, LAZYTENSOR_JIT_WAIT="0", LAZYTENSOR_CACHE_DIR=str(tmp_path))
    run = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=600)
    assert run.returncode == 0 and run.stdout.strip() == "ok", run.stdout + run.stderr
