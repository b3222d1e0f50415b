"""The direct path on a backend that binds a step's launch (CUDA): a node's first assignment
launches without a step (most nodes are built for one assignment); its second binds the step and
the node keeps it; later ones relaunch the bound launch. The CPU backend stands in for CUDA here
(tests/assign/test_dispatch_cases.py::test_the_direct_path_on_cuda runs the real one)."""
from __future__ import annotations

import numpy as np

import lazytensor as lt
from lazytensor.kernels.backend import backend_for
from lazytensor.assign.direct import ASSIGNED_ONCE


def test_first_assignment_launches_unbound_then_the_step_is_bound_and_kept(monkeypatch):
    backend = backend_for("cpu")
    bound, launched = [], []
    run_elementwise, run_flat = backend.run_elementwise, backend.run_flat

    def bind(program, out, inputs, scalars, mask=None, memo=None):
        bound.append(program)

        def run():
            launched.append("bound")
            run_elementwise(program, out, inputs, scalars)
        return run

    def unbound(program, out, inputs, scalars):
        launched.append("unbound")
        run_flat(program, out, inputs, scalars)
    monkeypatch.setattr(backend, "bind_elementwise", bind)
    monkeypatch.setattr(backend, "run_flat", unbound)
    x = np.array([1.0, -0.0, 2.5, -3.0], np.float32)
    a, b = lt.asarray(x, device="cpu"), lt.asarray(x[::-1].copy(), device="cpu")
    y, z = lt.empty((4,), np.float32, device="cpu"), lt.empty((4,), np.float32, device="cpu")
    e = a * b - 0.5
    want = x * x[::-1] - np.float32(0.5)
    y[...] = e
    assert launched == ["unbound"] and not bound and e.last_plan is ASSIGNED_ONCE
    np.testing.assert_array_equal(y.numpy(), want)
    z[...] = e                                    # a second assignment, elsewhere: bound and kept
    assert len(bound) == 1 and e.last_plan[0] is z.data
    for _ in range(2):
        z[...] = e
    assert len(bound) == 1 and launched[1:] == ["bound", "bound", "bound"]
    np.testing.assert_array_equal(z.numpy(), want)
    for _ in range(3):                            # built per call: never bound
        y[...] = a * b - 0.5
    assert len(bound) == 1 and launched[-3:] == ["unbound"] * 3
    np.testing.assert_array_equal(y.numpy(), want)
