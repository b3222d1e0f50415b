"""CPU benchmark cases of `python -m lazytensor bench`: lazytensor against NumPy eager and numexpr,
and against the floor (bytes that must move / copy bandwidth measured in the same run)."""
from __future__ import annotations

import numpy as np

import lazytensor as lt
from lazytensor.bench.table import Table
from lazytensor.kernels.timing import time_host


def _copy_bandwidth(nbytes: int) -> float:
    """Bytes per second of np.copyto between two large arrays (read + write counted). np.copyto is
    glibc's memcpy, which writes arrays this large with streaming stores: no line is read before it
    is written, so this is the bandwidth of kernels that stream their results too (kernel_stream,
    kernels/cpu/numba_stream.py); ordinary stores also read each line they write."""
    src = np.random.rand(nbytes // 8)
    dst = np.empty_like(src)
    s = time_host(lambda: np.copyto(dst, src), repeat=7)
    return 2 * src.nbytes / s


def _numexpr():
    try:
        import numexpr
        return numexpr
    except ImportError:
        return None


def run_cpu_bench(print_fn=print, scale: int = 25) -> Table:
    rng = np.random.default_rng(0)
    ne = _numexpr()
    table = Table(f"lazytensor CPU benchmark ({_threads()} threads)", "NumPy eager")
    bw = _copy_bandwidth(1 << 28)
    table.notes.append(f"copy bandwidth measured in this run: {bw / 1e9:.1f} GB/s (read + write)")

    # 1. relu((a+b)*c+5*d) on 2**scale float32
    n = 1 << scale
    A = [rng.random(n, dtype=np.float32) for _ in range(4)]
    a, b, c, d = (lt.asarray(x, device="cpu") for x in A)
    y = lt.empty_like(a)
    case = f"relu((a+b)*c+5*d), 2^{scale} f32"
    table.add(case, "lazytensor", time_host(lambda: y.__setitem__(Ellipsis, lt.relu((a + b) * c + 5 * d))))
    x0, x1, x2, x3 = A
    table.add(case, "NumPy eager", time_host(lambda: np.maximum((x0 + x1) * x2 + 5 * x3, 0), repeat=3))
    if ne:
        out = np.empty_like(x0)
        table.add(case, "numexpr", time_host(lambda: ne.evaluate(
            "where((x0+x1)*x2+5*x3 > 0, (x0+x1)*x2+5*x3, 0)",
            local_dict={"x0": x0, "x1": x1, "x2": x2, "x3": x3}, out=out), repeat=3))
    table.floor(case, 5 * n * 4 / bw, "4 reads + 1 write of float32")

    # 2. BN-apply broadcast relu((x-m)*s*g+b), x of (2**(scale-6), 64), per-channel vectors
    rows = 1 << (scale - 6)
    X = rng.random((rows, 64), dtype=np.float32)
    V = [rng.random(64, dtype=np.float32) for _ in range(4)]
    x = lt.asarray(X, device="cpu")
    m, s, g, bb = (lt.asarray(v, device="cpu") for v in V)
    y2 = lt.empty_like(x)
    case = f"relu((x-m)*s*g+b), ({rows}, 64) f32"
    table.add(case, "lazytensor", time_host(lambda: y2.__setitem__(Ellipsis, lt.relu((x - m) * s * g + bb))))
    vm, vs, vg, vb = V
    table.add(case, "NumPy eager", time_host(lambda: np.maximum((X - vm) * vs * vg + vb, 0), repeat=3))
    if ne:
        out2 = np.empty_like(X)
        table.add(case, "numexpr", time_host(lambda: ne.evaluate(
            "where((X-vm)*vs*vg+vb > 0, (X-vm)*vs*vg+vb, 0)",
            local_dict={"X": X, "vm": vm, "vs": vs, "vg": vg, "vb": vb}, out=out2), repeat=3))
    table.floor(case, 2 * X.nbytes / bw, "1 read + 1 write of x")

    # 3. dispatch: the same expression on 1024 elements, all Python work included
    S = [rng.random(1024, dtype=np.float32) for _ in range(4)]
    sa, sb, sc, sd = (lt.asarray(v, device="cpu") for v in S)
    sy = lt.empty_like(sa)
    e = lt.relu((sa + sb) * sc + 5 * sd)
    case = "dispatch, 1024 f32"
    table.add(case, "lazytensor (expression built each time)",
              time_host(lambda: sy.__setitem__(Ellipsis, lt.relu((sa + sb) * sc + 5 * sd)), repeat=9, number=2000))
    table.add(case, "lazytensor (prebuilt expression)",
              time_host(lambda: sy.__setitem__(Ellipsis, e), repeat=9, number=2000))
    s0, s1, s2, s3 = S
    so = np.empty_like(s0)
    table.add(case, "NumPy eager", time_host(lambda: np.maximum((s0 + s1) * s2 + 5 * s3, 0, out=so),
                                             repeat=9, number=2000))
    if ne:
        table.add(case, "numexpr", time_host(lambda: ne.evaluate(
            "where((s0+s1)*s2+5*s3 > 0, (s0+s1)*s2+5*s3, 0)",
            local_dict={"s0": s0, "s1": s1, "s2": s2, "s3": s3}, out=so), repeat=9, number=2000))
    print_fn(table.render())
    return table


def _threads() -> int:
    import numba
    return numba.config.NUMBA_NUM_THREADS


def run_cpu_reduction_bench(print_fn=print, scale: int = 25) -> Table:
    """sum((a-b)**2) fused into one reduction kernel, and per-channel sums, against NumPy/numexpr."""
    rng = np.random.default_rng(1)
    ne = _numexpr()
    table = Table(f"lazytensor CPU reductions ({_threads()} threads)", "NumPy eager")
    bw = _copy_bandwidth(1 << 28)
    n = 1 << scale
    A, B = rng.random(n, dtype=np.float32), rng.random(n, dtype=np.float32)
    a, b = lt.asarray(A, device="cpu"), lt.asarray(B, device="cpu")
    case = f"sum((a-b)**2), 2^{scale} f32"
    table.add(case, "lazytensor", time_host(lambda: ((a - b) ** 2).sum().numpy()))
    table.add(case, "NumPy eager", time_host(lambda: np.sum((A - B) ** 2), repeat=3))
    if ne:
        table.add(case, "numexpr", time_host(lambda: ne.evaluate("sum((A-B)**2)", local_dict={"A": A, "B": B}),
                                             repeat=3))
    table.floor(case, 2 * n * 4 / bw, "2 reads of float32 at the copy bandwidth")
    rows = 1 << (scale - 6)
    X = rng.random((rows, 64), dtype=np.float32)
    x = lt.asarray(X, device="cpu")
    case = f"per-channel sum, ({rows}, 64) f32, axis 0"
    table.add(case, "lazytensor", time_host(lambda: x.sum(axis=0).numpy()))
    table.add(case, "NumPy eager", time_host(lambda: X.sum(axis=0), repeat=3))
    table.floor(case, X.nbytes / bw, "1 read of x at the copy bandwidth")
    print_fn(table.render())
    return table
