"""Dask programs drawn by hypothesis, run over lazytensor chunks and over NumPy chunks."""
from __future__ import annotations

import numpy as np
from hypothesis import strategies as st

da = __import__("pytest").importorskip("dask.array")

# Elementwise ops whose float64 results are correctly rounded (or exact), so lazytensor's kernel and
# NumPy give the same bits; the transcendentals are compared within a few ULPs.
EXACT_UNARY = {"neg": lambda x: -x, "abs": abs, "sqrt_abs": lambda x: da.sqrt(abs(x)), "square": lambda x: x * x,
               "half": lambda x: x * 0.5 + 1.0}
EXACT_BINARY = {"add": lambda x, y: x + y, "sub": lambda x, y: x - y, "mul": lambda x, y: x * y,
                "div": lambda x, y: x / (abs(y) + 1.0), "max": da.maximum, "min": da.minimum,
                "where": lambda x, y: da.where(x > y, x, y * 2.0)}
APPROX_UNARY = {"sin": da.sin, "exp": lambda x: da.exp(x * 0.01), "tanh": da.tanh}
REDUCTIONS = ("sum", "mean", "max", "min", "std")


@st.composite
def chunked_shapes(draw):
    """A shape of 1 or 2 axes and a chunking of it (uneven chunks included)."""
    shape = tuple(draw(st.lists(st.integers(1, 13), min_size=1, max_size=2)))
    chunks = []
    for n in shape:
        cuts = sorted(draw(st.sets(st.integers(1, n - 1), max_size=3))) if n > 1 else []
        edges = [0, *cuts, n]
        chunks.append(tuple(b - a for a, b in zip(edges, edges[1:])))
    return shape, tuple(chunks)


@st.composite
def programs(draw, unary=EXACT_UNARY, binary=EXACT_BINARY):
    """A list of steps over two inputs: each applies an op to earlier values."""
    steps = []
    for i in range(draw(st.integers(1, 5))):
        n = 2 + i
        if draw(st.booleans()):
            steps.append((draw(st.sampled_from(sorted(unary))), draw(st.integers(0, n - 1))))
        else:
            steps.append((draw(st.sampled_from(sorted(binary))), draw(st.integers(0, n - 1)),
                          draw(st.integers(0, n - 1))))
    return steps


def run(steps, x, y, unary=None, binary=None):
    unary = {**EXACT_UNARY, **APPROX_UNARY} if unary is None else unary
    binary = EXACT_BINARY if binary is None else binary
    values = [x, y]
    for name, *args in steps:
        f = unary.get(name) or binary[name]
        values.append(f(*(values[a] for a in args)))
    return values[-1]


def inputs(shape, chunks, seed, backend):
    """Two float64 dask arrays of the same values (NumPy's generator), with NumPy or lazytensor chunks."""
    rng = np.random.default_rng(seed)
    x, y = (rng.uniform(-10, 10, shape) for _ in range(2))
    x.flat[::3] = -0.0 if x.size > 2 else x.flat[::3]
    if backend == "numpy":
        return da.from_array(x, chunks=chunks), da.from_array(y, chunks=chunks)
    import lazytensor as lt
    return (da.from_array(lt.asarray(x, device="cpu"), chunks=chunks),
            da.from_array(lt.asarray(y, device="cpu"), chunks=chunks))
