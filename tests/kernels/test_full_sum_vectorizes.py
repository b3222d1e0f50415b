"""The lane loop of a full sum over contiguous float32 (kernels/cpu/render_numba_reduce.py) compiles
to packed float64 adds, and its lanes give the same value as a plain float64 sum of the lanes'
elements in their order."""
import platform

import numpy as np
import pytest

from lazytensor.kernels.cpu.render_numba_reduce import LANES, render_numba_reduce
from lazytensor.kernels.program import Layout, Reduction, program_for

F32 = np.dtype(np.float32)


def _module(n):
    program = program_for((("load", F32, 0), ("multiply", F32, 0, 0)), 1, (), F32)
    spec = Reduction("sum", (0,), (n,), np.dtype(np.float64), F32)
    source = render_numba_reduce(program, spec, Layout(1, True)).replace("cache=True", "cache=False")
    module = {}
    exec(compile(source, "<kernel>", "exec"), module)
    return module


@pytest.mark.skipif(platform.machine() not in ("x86_64", "AMD64"), reason="reads x86 assembly")
def test_the_lane_loop_holds_packed_adds():
    fn = _module(4096)["reduce_main_seq"]
    x = np.linspace(-1, 1, 4096, dtype=np.float32)
    parts = np.empty((4, 1))
    fn(parts, 4, x, x.size, float(x.size))
    asm = fn.inspect_asm(fn.signatures[0])
    assert "vaddpd" in asm or "addpd" in asm.replace("vaddsd", ""), "the lanes are added one by one"


@pytest.mark.parametrize("n", [1, 15, 16, 17, 1000, 4099])
def test_the_lanes_sum_each_element_once_in_order(n):
    """Each chunk of the kernel: lane u adds the chunk's elements u, u + 16, ... of its whole blocks,
    in float64; then the tail, then the lanes in order (the kernel's fixed order, whatever the
    vector width)."""
    x = np.random.default_rng(n).standard_normal(n).astype(np.float32)
    nchunks = 3
    parts = np.empty((nchunks, 1))
    _module(n)["reduce_main_seq"](parts, nchunks, x, n, float(n))
    sq = (x * x).astype(np.float64)
    for c in range(nchunks):
        lo, hi = c * n // nchunks, (c + 1) * n // nchunks
        blocks = (hi - lo) // LANES
        lanes = [0.0] * LANES
        for b in range(blocks):
            for u in range(LANES):
                lanes[u] += sq[lo + b * LANES + u]
        a = 0.0
        for i in range(lo + blocks * LANES, hi):
            a += sq[i]
        for u in range(LANES):
            a += lanes[u]
        assert parts[c, 0] == a
