"""What a recorded training step holds, accounted on the CPU: lt.explain(step)'s breakdown adds up
to the measured peak (tools.peak_memory's mark over lazytensor's CPU arrays) within 1%, and the
first call's peak is no higher than a later call's, as the step is planned over placeholders that
hold no memory (lazytensor.plan.planning_space). A measurement while planning (a measured choice)
runs over real memory, and the placeholders are back afterwards."""
import numpy as np
import pytest

import lazytensor as lt
from lazytensor.kernels.backend import backend_for
from lazytensor.nn.step_memory import memory_parts
from lazytensor.plan.planning_space import PlanningSpace, backed
from lazytensor.tools.peak_memory import PeakMemory
from tests.support.devices import cudnn_ready
from tests.step.test_memory_plan import resnet_like, vgg_like


@pytest.mark.parametrize("build", [vgg_like, resnet_like])
def test_the_breakdown_adds_up_to_the_measured_peak(build):
    rng = np.random.default_rng(1)
    x = lt.asarray(rng.standard_normal((4, 8, 8, 3)).astype(np.float32))
    labels = lt.asarray(rng.integers(0, 4, 4))
    with PeakMemory("cpu") as peak:
        model = build()
        optimizer = lt.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
        step = lt.train_step(model, lt.cross_entropy, optimizer)
        step(x, labels)
        first = peak.bytes
        step(x, labels)
    parts = memory_parts(step.last, optimizer)
    total = sum(parts.values())
    # Before planning over placeholders the first call held every temporary at once (2.3x the arena).
    assert first == peak.bytes
    assert abs(peak.bytes - total) <= 0.01 * total
    assert parts["arena"] == step.last.plan.memory.arena
    # the parameters' regions: each parameter's bytes, each segment rounded up to 256 bytes
    assert parts["parameters"] == sum(u.weights.nbytes for u in optimizer.units)
    assert 0 <= parts["parameters"] - sum(p.nbytes for p in optimizer.params) < 256 * len(optimizer.params)
    assert parts["static inputs"] == x.nbytes + labels.nbytes
    text = lt.explain(step, source=False)
    assert f"memory of a call: {total / 2**20:.3f} MB" in text
    assert "alive at the arena's peak" in text


class _Stand:
    """A stand-in step: what a measured choice runs while planning."""
    __slots__ = ("out",)

    def run(self):
        self.out[...] = 2.0


def test_a_measurement_while_planning_runs_over_real_memory():
    backend = backend_for("cpu")
    with PlanningSpace(backend) as space:
        placeholder = backend.empty((4, 3), np.float32)
        view = placeholder[1:]
        step = _Stand()
        step.out = view
        tensor = lt.Tensor(placeholder[:, 0], "cpu")
        with pytest.raises(ValueError):             # a placeholder holds no memory to write
            view[...] = 1

        def measure():
            step.run()
            tensor.data[...] = 3.0
            scratch = backend.empty((2,), np.float32)       # what it allocates itself is real too
            scratch[...] = 0.5
            return step.out.sum() + tensor.data.sum() + scratch.sum()
        with backed(measure):
            # one real allocation stands in for the placeholder: its views overlap as they did
            assert measure() == (2.0 * 6 + 3.0 * 3) + 3.0 * 4 + 1.0
            assert not space.holds(step.out.base)
        assert step.out is view and tensor.data.base is placeholder     # the placeholders are back
        assert not backend.empty((2,), np.float32).flags.writeable     # planning over placeholders again
    assert "empty" not in vars(backend)


def test_peak_memory_on_the_cpu_counts_an_allocation_until_it_is_freed():
    with PeakMemory("cpu") as peak:
        a = lt.empty((1000,), np.float64)
        del a
        b = lt.empty((500,), np.float64)
    assert peak.bytes == 8000 and "lazytensor's CPU arrays" in peak.describe()
    assert "empty" not in vars(backend_for("cpu")) and "asarray" not in vars(backend_for("cpu"))
    del b


@pytest.mark.gpu
@pytest.mark.skipif(not lt.cuda_usable(), reason="needs CUDA and CuPy")
def test_device_placeholders_hold_no_memory_and_are_backed_for_a_measurement():
    import cupy
    backend = backend_for("cuda")
    pool = cupy.get_default_memory_pool()
    used = pool.used_bytes()
    with PlanningSpace(backend) as space:
        big = backend.empty((1 << 28,), np.float16)          # 512 MB of address space, no memory
        a = backend.empty((64, 8), np.float32)
        assert pool.used_bytes() == used and big.data.ptr >= 1 << 52 and a.data.ptr % 512 == 0
        assert space.holds(a.data.mem)
        step = _Stand()
        step.out = a[1:]

        def measure():
            step.run()
            scratch = backend.empty((4,), np.float32)
            scratch[...] = 1.0
            return float(step.out.sum() + scratch.sum())
        with backed(measure):
            assert measure() == 2.0 * 63 * 8 + 4.0
        assert step.out.data.ptr == a.data.ptr + a.strides[0]      # the placeholder view is back
    cupy.cuda.get_current_stream().synchronize()
    assert "empty" not in vars(backend)


@pytest.mark.gpu
@pytest.mark.skipif(not cudnn_ready(), reason="needs CUDA, CuPy and the cuDNN frontend")
def test_the_cbr_stage1_choice_measured_while_planning_over_placeholders(monkeypatch):
    # What a recorded step whose plan weighs the CBR stage 1 does on a GPU that has not measured the
    # shape yet: the measurement runs over real memory standing in for the placeholders.
    from lazytensor.plan.conv import stage1 as cbr_stage1
    monkeypatch.setattr(cbr_stage1._CHOICES, "memory", {})
    monkeypatch.setattr(cbr_stage1._CHOICES.disk, "get", lambda key: None)
    monkeypatch.setattr(cbr_stage1._CHOICES.disk, "put", lambda key, value: None)
    monkeypatch.setenv("LAZYTENSOR_CBR_TUNE", "1")
    backend = backend_for("cuda")
    rng = np.random.default_rng(0)
    w = lt.asarray(rng.standard_normal((24, 3, 3, 16)).astype(np.float16), device="cuda")
    attrs = lt.conv2d(lt.zeros((2, 9, 9, 16), np.float16, "cuda"), w, padding=1).attrs
    with PlanningSpace(backend) as space:
        x = lt.Tensor(backend.empty((2, 9, 9, 16), np.float16), "cuda")
        y = backend.empty((2, 9, 9, 24), np.float16)
        choice, note = cbr_stage1.choose_stage1(backend, x, w, attrs, y)
        assert space.holds(x.data.data.mem) and space.holds(y.data.mem)     # the placeholders are back
    import cupy
    cupy.cuda.get_current_stream().synchronize()
    assert choice in (cbr_stage1.GENSTATS, cbr_stage1.REDUCTION) and note.startswith("measured")


def _amp_bottlenecks(seed=0):
    from lazytensor.nn.models import Bottleneck
    rng = np.random.default_rng(seed)
    f16 = np.float16
    return lt.nn.Sequential(lt.nn.Conv2d(8, 16, 3, padding=1, bias=False, rng=rng, dtype=f16), lt.nn.BatchNorm2d(16),
                            lt.nn.ReLU(), Bottleneck(16, 8, rng=rng, dtype=f16), Bottleneck(32, 8, rng=rng, dtype=f16),
                            lt.nn.GlobalAvgPool(), lt.nn.Flatten(), lt.nn.Linear(32, 4, rng=rng, dtype=f16))


def _amp_step_arena(monkeypatch=None):
    model = _amp_bottlenecks()
    step = lt.train_step(model, lt.cross_entropy, lt.optim.SGD(model.parameters(), lr=0.05, momentum=0.9), amp=True)
    rng = np.random.default_rng(3)
    loss = step(rng.standard_normal((4, 8, 8, 8)).astype(np.float32), rng.integers(0, 4, 4))
    wide = [s for s in step.last.plan.steps if "evaluated once" in (getattr(s, "note", "") or "")
            and s.out.dtype == np.float32 and s.out.shape[:3] == (4, 8, 8)]
    return step.last.plan.memory.arena, wide, float(loss.numpy())


def test_a_value_evaluated_once_is_kept_in_its_narrow_dtype(monkeypatch):
    # The ResNet backward's gradient down a stage (a sum of masked float16 dgrads, read by a
    # batch_norm backward's reductions and kernel) is evaluated once: as float16, the float32 cast
    # done by each reader as it loads, not stored as a float32 copy of twice the bytes.
    arena, wide, loss = _amp_step_arena()
    assert wide == []
    from lazytensor.plan import shared_values
    monkeypatch.setattr(shared_values, "_widening", lambda node: False)
    arena_wide, wide, loss_wide = _amp_step_arena()
    assert loss == loss_wide
    if wide:                    # the planner stores such values (the per-op batch_norm backward reads them)
        assert arena < 0.8 * arena_wide
