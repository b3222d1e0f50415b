"""Launches through the driver's cuLaunchKernel with parameters packed in place
(kernels/cuda/raw_launch.py), on a GPU, against NumPy: every dtype over flat operands, built per
call and assigned again (the bound step), scalars of every type (float16's included), arrays that
change between calls, the current stream (a capture records the launch), another thread (its first
launch on a thread without a current context). Skipped where CuPy or a CUDA device is missing."""
from __future__ import annotations

import threading

import numpy as np
import pytest

from lazytensor.kernels.backend import cuda_usable

pytestmark = [pytest.mark.gpu,
              pytest.mark.skipif(not cuda_usable(), reason="needs CuPy and a CUDA device")]

import lazytensor as lt  # noqa: E402

DTYPES = [np.dtype(d) for d in ("bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
                                "float16", "float32", "float64")]


def _same(got, want, what=""):
    assert got.dtype == want.dtype, (what, got.dtype, want.dtype)
    np.testing.assert_array_equal(got, want, err_msg=what)
    if want.dtype.kind == "f":
        zeros = want == 0
        np.testing.assert_array_equal(np.signbit(got[zeros]), np.signbit(want[zeros]), err_msg=what + ": signed zeros")


def _values(dtype, n, seed):
    rng = np.random.default_rng(seed)
    if dtype.kind == "b":
        return rng.integers(0, 2, n).astype(bool)
    if dtype.kind in "iu":
        info = np.iinfo(dtype)
        return rng.integers(max(info.min, -1000), min(info.max, 1000), n, endpoint=True).astype(dtype)
    a = (rng.standard_normal(n) * 8).astype(dtype)
    a[:5] = [np.nan, np.inf, -np.inf, -0.0, 0.0][:n]
    return a


def _scalars(dtype):
    """Weak Python scalars and NumPy scalars of the dtype: -0.0, values float16 rounds, extremes."""
    if dtype.kind == "b":
        return [True, False, np.True_]
    if dtype.kind in "iu":
        info = np.iinfo(dtype)
        return [3, int(info.max), dtype.type(info.min), 0]
    return [-0.0, 0.1, 2.5, dtype.type(-1.75), 1e-7, float(np.finfo(dtype).max)]


def _expressions(dtype):
    """(lazytensor expression, NumPy's) of a, b and scalar s: each over distinct flat tensors."""
    if dtype.kind == "b":
        return [(lambda a, b, s: (a ^ s) | b, lambda a, b, s: (a ^ s) | b)]
    # (Not maximum: on a tie of zeros NumPy's float16 loop keeps the first operand, its other loops
    # and the op table the second; tests/kernels/test_cuda_gpu.py marks that case.)
    return [(lambda a, b, s: a * s + b, lambda a, b, s: a * s + b),
            (lambda a, b, s: (a - s) * b, lambda a, b, s: (a - s) * b)]


@pytest.mark.parametrize("n", [1, 1000, 1024, 4099])          # the scalar kernel, vector kernels with a tail
@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: d.name)
def test_flat_assignments_built_per_call_and_again_match_numpy(dtype, n):
    xa, xb = _values(dtype, n, 1), _values(dtype, n, 2)
    a, b = lt.asarray(xa, device="cuda"), lt.asarray(xb, device="cuda")
    y = lt.empty((n,), dtype, device="cuda")
    with np.errstate(all="ignore"):
        for f, g in _expressions(dtype):
            for s in _scalars(dtype):
                want = g(xa, xb, s)
                assert want.dtype == dtype
                e = f(a, b, s)
                assert "dispatch: direct" in lt.explain(e, out=y, source=False)
                for k in range(4):                # built per call; e unbound, bound, its step relaunched
                    y[...] = f(a, b, s) if k == 0 else e
                    _same(y.numpy(), want, f"{dtype} {s!r} call {k}")


def test_an_operand_off_16_byte_alignment_takes_its_own_plan():
    """A view one element in: contiguous, so direct, but its plan is the scalar kernel's (the
    alignment is part of the launch plan's key)."""
    x = np.linspace(-5, 5, 1025, dtype=np.float32)
    whole = lt.asarray(x, device="cuda")
    a, shifted = whole[:1024], whole[1:]
    y = lt.empty((1024,), np.float32, device="cuda")
    for k in range(3):
        for operand, host in ((a, x[:1024]), (shifted, x[1:]), (a, x[:1024])):
            y[...] = operand * 2.0 + float(k)
            _same(y.numpy(), host * np.float32(2.0) + np.float32(k), f"call {k}")
    text = lt.explain(shifted * 2.0 + 1.0, out=y)
    assert "dispatch: direct" in text and "is not 16-byte aligned" in text


def test_arrays_that_change_between_calls():
    """Built per call over a pool of tensors written in between (in place and through lt.assign): each
    launch reads its own call's pointers and the tensors' current values."""
    rng = np.random.default_rng(3)
    hosts = [rng.standard_normal(2048).astype(np.float32) for _ in range(4)]
    pool = [lt.asarray(h.copy(), device="cuda") for h in hosts]
    y = lt.empty((2048,), np.float32, device="cuda")
    for k in range(12):
        i, j = k % 4, (k * 3 + 1) % 4
        if i == j:
            j = (j + 1) % 4
        y[...] = lt.relu((pool[i] + pool[j]) * 0.5 + float(k))
        _same(y.numpy(), np.maximum((hosts[i] + hosts[j]) * np.float32(0.5) + np.float32(k), 0), f"call {k}")
        pool[i] += 1.0                            # written between launches
        hosts[i] = hosts[i] + np.float32(1.0)


def test_the_launch_is_on_the_current_stream():
    """Inside a stream capture the assignment is recorded, not run (a launch on another stream would
    run, or invalidate the capture); the graph then computes it."""
    import cupy as cp
    x = np.linspace(-3, 3, 512, dtype=np.float32)
    a = lt.asarray(x, device="cuda")
    y = lt.zeros((512,), np.float32, device="cuda")
    y[...] = a * 2.0 - 1.0                        # the launch plan made, the kernel loaded
    y[...] = lt.zeros((512,), np.float32, device="cuda")
    cp.cuda.get_current_stream().synchronize()
    stream = cp.cuda.Stream(non_blocking=True)
    with stream:
        stream.begin_capture()
        y[...] = a * 2.0 - 1.0
        graph = stream.end_capture()
    _same(y.numpy(), np.zeros(512, np.float32), "captured, not run")
    graph.launch()
    cp.cuda.get_current_stream().synchronize()
    _same(y.numpy(), x * np.float32(2.0) - np.float32(1.0), "the graph's launch")


def _in_a_new_thread(work):
    errors = []

    def run():
        try:
            work()
        except Exception as e:  # noqa: BLE001
            errors.append(e)
    thread = threading.Thread(target=run)
    thread.start()
    thread.join()
    assert not errors, errors


def test_new_threads_launch_and_get_numpys_values():
    """Threads that have made no CUDA call: one makes its own launch plan (a size not seen before);
    one relaunches a step bound on the main thread, whose raw launch may find no current context
    (CuPy's call then makes it current); one runs the main thread's plan (CuPy's call: the per-call
    slots are the main thread's)."""
    x = np.arange(777, dtype=np.float32)
    a = lt.asarray(x, device="cuda")
    y = lt.empty((777,), np.float32, device="cuda")

    def own_plan():
        for k in range(3):
            y[...] = a * float(k + 1) + 0.5
    _in_a_new_thread(own_plan)
    _same(y.numpy(), x * np.float32(3) + np.float32(0.5))
    y[...] = a * 4.0 + 0.5                        # the main thread, over the plan the other thread made
    _same(y.numpy(), x * np.float32(4) + np.float32(0.5))
    e = a * 5.0 - 2.0
    y[...] = e
    y[...] = e                                    # bound on the main thread
    y[...] = lt.zeros((777,), np.float32, device="cuda")

    def bound():
        y[...] = e
    _in_a_new_thread(bound)
    _same(y.numpy(), x * np.float32(5) - np.float32(2))

    def main_threads_plan():
        y[...] = a * 6.0 - 2.0
    _in_a_new_thread(main_threads_plan)
    _same(y.numpy(), x * np.float32(6) - np.float32(2))


def test_a_profile_records_direct_launches():
    a = lt.asarray(np.ones(64, np.float32), device="cuda")
    y = lt.empty((64,), np.float32, device="cuda")
    y[...] = a * 3.0
    with lt.profile() as p:
        y[...] = a * 3.0
    assert [(k.backend, k.kind, k.elements) for k in p.kernels] == [("cuda", "elementwise", 64)]
    _same(y.numpy(), np.full(64, 3, np.float32))
