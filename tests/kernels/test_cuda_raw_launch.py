"""The host's side of CUDA launches, on the CPU (tests/support/cuda_stand_in.py: stand-in CuPy arrays, and a
driver that reads the kernel parameters through the addresses it is given): each kernel parameter's
bytes against what CuPy's Function call would pass (a device pointer's 8 bytes, a NumPy scalar's
bytes: a float16 scalar as the float32 of its float16 value), pointer order, the geometry's
integers, and the fall-backs to CuPy's call."""
from __future__ import annotations

import ctypes
import os
import struct
import threading
import warnings

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import lazytensor as lt
from lazytensor.kernels.cuda.raw_launch import CODES, KernelParameters, slot_struct
from lazytensor.assign.direct import ASSIGNED_ONCE

from tests.support.cuda_stand_in import DeviceArray, device_tensor, stand_in_backend

DTYPES = [np.dtype(d) for d in ("bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
                                "float16", "float32", "float64")]
EXAMPLES = int(os.environ.get("LT_PROPERTY_EXAMPLES", "60"))


def _pointer(t) -> bytes:
    return struct.pack("<Q", t.data.data.ptr)


def _scalar(value, dtype) -> bytes:
    """The bytes CuPy's call passes for a scalar parameter of `dtype` (a NumPy scalar's own):
    float16 travels as float."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)     # (NumPy's overflow warning: inf, as NumPy computes)
        if dtype == np.float16:
            return np.float16(value).astype(np.float32).tobytes()
        return dtype.type(value).tobytes()


def _operands(dtype, n=1024, seed=0):
    rng = np.random.default_rng(seed)
    return [(rng.standard_normal(n) * 50).astype(dtype) for _ in range(2)]


def _slots(launch) -> list:
    kind, *_, params = launch
    assert kind == "raw", launch
    return params


@pytest.fixture
def cuda(monkeypatch):
    return stand_in_backend(monkeypatch)


def test_slots_hold_one_value_each_at_their_start_in_little_endian():
    codes = set(CODES.values()) | {"Q"}
    assert {c: slot_struct(c).size for c in codes} == {c: 8 * len(c) for c in codes}    # a complex: its two parts
    params = KernelParameters("Qfd", "ii", (7, 1 << 30))
    params.pack(params.slots, 0, 0x1122334455667788, -0.0, 2.5)
    raw = bytes(params.slots)
    assert raw == (struct.pack("<Q", 0x1122334455667788) + struct.pack("<f", -0.0) + bytes(4) + struct.pack("<d", 2.5)
                   + struct.pack("<i", 7) + bytes(4) + struct.pack("<i", 1 << 30) + bytes(4))
    assert list(params.pointers) == [ctypes.addressof(params.slots) + 8 * k for k in range(5)]
    assert params.address == ctypes.addressof(params.pointers)


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: d.name)
def test_each_parameter_of_a_direct_assignment_for_every_dtype(cuda, dtype):
    """`y[...] = a + s` (a ^ s for bool): out, in0, the scalar in its C type, n as int."""
    _, launches = cuda
    x, _ = _operands(dtype)
    if dtype.kind == "b":
        x, s = x > 0, np.bool_(True)
    else:
        s = dtype.type(-3.25 if dtype.kind == "f" else 3)
    a, y = device_tensor(x), device_tensor(np.empty_like(x))
    y[...] = (a ^ s) if dtype.kind == "b" else (a + s)
    slots = _slots(launches[-1])
    assert slots[0] == _pointer(y) and slots[1] == _pointer(a)
    size = 4 if dtype == np.float16 else dtype.itemsize
    assert len(slots) == 4 and slots[2][:size] == _scalar(s, dtype)
    assert slots[3] == struct.pack("<i", x.size) + bytes(4)


def test_the_five_op_expression_pointers_in_leaf_order_then_the_scalar_then_n(cuda):
    backend, launches = cuda
    hosts = [np.full(1024, k, np.float32) for k in range(4)]
    a, b, c, d = (device_tensor(h) for h in hosts)
    y = device_tensor(np.empty(1024, np.float32))
    y[...] = lt.relu((a + b) * c + 5 * d)
    kind, function, grid, block, stream, slots = launches[-1]
    assert kind == "raw" and (grid, block) == (1, 256)        # 4 elements per thread, 16-byte vectors
    assert "launched by the driver's cuLaunchKernel" in lt.explain(lt.relu((a + b) * c + 5 * d), out=y)
    assert slots == [_pointer(t) for t in (y, a, b, c, d)] + [struct.pack("<f", 5.0) + bytes(4),
                                                               struct.pack("<i", 1024) + bytes(4)]


def test_new_arrays_and_scalars_each_call_rewrite_the_same_slots(cuda):
    """Built per call over arrays that change mid-loop (the same launch plan): every launch reads its
    own call's pointers and scalars."""
    _, launches = cuda
    pool = [device_tensor(np.full(256, k, np.float32)) for k in range(6)]
    y = device_tensor(np.empty(256, np.float32))
    for k in range(8):
        a, b = pool[k % 6], pool[(k * 5 + 1) % 6]
        y[...] = a * b + float(k)
        slots = _slots(launches[-1])
        assert slots[:3] == [_pointer(y), _pointer(a), _pointer(b)]
        assert slots[3][:4] == struct.pack("<f", float(k))


@settings(max_examples=EXAMPLES, deadline=None)
@given(st.sampled_from(DTYPES), st.data())
def test_scalar_parameters_match_numpys_conversion(dtype, data):
    """A Python scalar (weak, NEP 50: the tensor's dtype) of any value: the parameter's bytes are
    NumPy's conversion of it, float32's inf for finite doubles beyond its range included."""
    if dtype.kind == "b":
        value = data.draw(st.booleans())
    elif dtype.kind in "iu":
        info = np.iinfo(dtype)
        value = data.draw(st.integers(int(info.min), int(info.max)))
    else:
        value = data.draw(st.floats(allow_nan=True, allow_infinity=True))
    with pytest.MonkeyPatch.context() as mp:
        _, launches = stand_in_backend(mp)
        x = np.ones(64, dtype)
        a, y = device_tensor(x), device_tensor(np.empty_like(x))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            y[...] = (a ^ value) if dtype.kind == "b" else (a + value)
        slots = _slots(launches[-1])
    size = 4 if dtype == np.float16 else dtype.itemsize
    assert slots[2][:size] == _scalar(value, dtype)


def test_a_float_beyond_float32_warns_as_numpy_does_and_travels_as_inf(cuda):
    _, launches = cuda
    a, y = device_tensor(np.ones(8, np.float32)), device_tensor(np.empty(8, np.float32))
    with pytest.warns(RuntimeWarning, match="overflow"):
        want = np.ones(8, np.float32) * 1e300
    with pytest.warns(RuntimeWarning, match="overflow"):
        y[...] = a * 1e300
    assert _slots(launches[-1])[2][:4] == want[0].tobytes() == struct.pack("<f", np.inf)


def test_the_second_assignment_binds_every_parameter_once(cuda):
    """The node's second assignment runs the planner's step, whose launch packs all its parameters
    once (its own buffer, which no call writes again); later assignments launch them as they are."""
    _, launches = cuda
    a, b = (device_tensor(np.full(100, k, np.float64)) for k in (1, 2))
    y, z = device_tensor(np.empty(100)), device_tensor(np.empty(100))
    e = a * b - 0.5
    y[...] = e
    assert e.last_plan is ASSIGNED_ONCE
    y[...] = a + b - 2.0                          # the same program over another node: the plan's slots rewritten
    z[...] = e
    assert e.last_plan[0] is z.data
    for _ in range(2):
        z[...] = e
    assert [launch[0] for launch in launches] == ["raw"] * 5
    want = [_pointer(z), _pointer(a), _pointer(b), struct.pack("<d", 0.5), struct.pack("<i", 100) + bytes(4)]
    assert [_slots(launch) for launch in launches[2:]] == [want] * 3
    assert _slots(launches[1])[:4] == [_pointer(y), _pointer(a), _pointer(b), struct.pack("<d", 2.0)]


def test_another_thread_launches_through_cupys_call(cuda):
    """The per-call slots belong to the thread that made the plan (the driver reads them with the GIL
    released): from another thread the launch goes through CuPy's Function call, with the same values."""
    _, launches = cuda
    a, y = device_tensor(np.full(64, 2, np.float32)), device_tensor(np.empty(64, np.float32))
    y[...] = a * 3.0
    done = threading.Thread(target=lambda: y.__setitem__(Ellipsis, a * 3.0))
    done.start()
    done.join()
    kind, function, grid, block, args = launches[-1]
    assert kind == "cupy" and function == launches[0][1] and (grid, block) == launches[0][2:4]
    assert [args[0].ptr, args[1].ptr] == [y.data.data.ptr, a.data.data.ptr]
    assert type(args[2]) is np.float32 and args[2] == 3 and type(args[3]) is np.int32 and args[3] == 64


def test_a_launch_the_driver_refuses_goes_through_cupys_call(cuda):
    """A thread without a current context (CuPy's call makes it current) or a real error (which CuPy's
    call raises again): the driver's refusal falls back to CuPy's call; the next launch is raw again."""
    backend, launches = cuda
    a, y = device_tensor(np.full(64, 2, np.float32)), device_tensor(np.empty(64, np.float32))
    y[...] = a * 3.0
    launches.fail = 2                     # run_flat's raw launch, then run_elementwise's
    y[...] = a * 3.0
    y[...] = a * 3.0
    assert [launch[0] for launch in launches] == ["raw", "cupy", "raw"]


def test_the_current_stream_is_read_on_every_launch(cuda):
    _, launches = cuda
    a, y = device_tensor(np.full(64, 2, np.float32)), device_tensor(np.empty(64, np.float32))
    e = a * 3.0
    for stream in (0, 0x5000, 0x6000, 0):
        launches.stream.ptr = stream
        y[...] = e                        # unbound, bound, then the bound launch again
        y[...] = a - 1.0
        assert [launch[4] for launch in launches[-2:]] == [stream, stream]


def test_a_relu_mask_program_takes_the_mask_right_after_out(cuda):
    backend, launches = cuda
    from lazytensor.kernels.program import program_for, with_relu_mask
    program = with_relu_mask(program_for((("load", np.dtype(np.float32), 0), ("relu", np.dtype(np.float32), 0)),
                                         1, (), np.float32))
    x = DeviceArray(np.linspace(-1, 1, 64, dtype=np.float32))
    out, mask = DeviceArray(np.empty(64, np.float32)), DeviceArray(np.empty(8, np.uint8))
    backend.run_elementwise(program, out, [x], [], mask=mask)
    run = backend.bind_elementwise(program, out, [x], [], mask=mask)
    run()
    for launch in launches:
        assert _slots(launch)[:3] == [struct.pack("<Q", a.data.ptr) for a in (out, mask, x)]


def test_a_profile_records_the_launch(cuda):
    _, launches = cuda
    a, y = device_tensor(np.full(64, 2, np.float32)), device_tensor(np.empty(64, np.float32))
    y[...] = a * 3.0
    with lt.profile() as prof:
        y[...] = a * 3.0
    assert launches[-1][0] == "raw"
    assert [(r.backend, r.kind, r.elements, r.cache) for r in prof.kernels] == [("cuda", "elementwise", 64, "memory")]


def _raw_launch(dtypes, launched):
    """A RawLaunch of one pointer and scalars of `dtypes`, whose driver appends the parameter bytes."""
    import types
    from lazytensor.kernels.cuda.kernel import scalar_converters
    from lazytensor.kernels.program import program_for
    from lazytensor.kernels.cuda.raw_launch import RawLaunch
    program = program_for((("load", np.dtype(np.float32), 0),), 1, tuple(dtypes), np.float32)
    count = 2 + len(dtypes)

    def launch_kernel(f, gx, gy, gz, bx, by, bz, shared, stream, params, extra):
        launched.append([ctypes.string_at(p, 8) for p in (ctypes.c_void_p * count).from_address(params)])
    driver = types.SimpleNamespace(launchKernel=launch_kernel, CUDADriverError=RuntimeError)
    cupy = types.SimpleNamespace(cuda=types.SimpleNamespace(driver=driver,
                                                            get_current_stream=lambda: types.SimpleNamespace(ptr=0)))
    return RawLaunch(1, 1, 256, 1, program.scalar_dtypes, scalar_converters(program), False, (7,), cupy)


def test_scalars_not_yet_of_their_dtype_are_converted_as_cupys_call_gets_them():
    """Const scalars arrive already of their dtype; any other value takes NumPy's conversion, as
    kernels/cuda/kernel.scalar_converters gives CuPy's call: float16 rounded, then passed as float;
    a double beyond float32's range is inf, with NumPy's warning; a float for an integer parameter."""
    launched = []
    f16, f32, i32, u8 = (np.dtype(d) for d in ("float16", "float32", "int32", "uint8"))
    for dtypes in ((f16, f32, i32, u8), (f32, i32, u8, f32)):     # float16 converts always; else on refusal
        launch = _raw_launch(dtypes, launched)
        values = {f16: 0.1, f32: 1e300, i32: 2.0, u8: 255}
        with pytest.warns(RuntimeWarning, match="overflow"):
            assert launch.run([0x1234], [values[d] for d in dtypes])
        want = {f16: np.float32(np.float16(0.1)).tobytes() + bytes(4), f32: struct.pack("<f", np.inf) + bytes(4),
                i32: struct.pack("<i", 2) + bytes(4), u8: bytes([255]) + bytes(7)}
        assert launched[-1] == [struct.pack("<Q", 0x1234), *[want[d] for d in dtypes], struct.pack("<i", 7) + bytes(4)]
        with pytest.raises(OverflowError):
            launch.run([0x1234], [256 if d == u8 else 1 for d in dtypes])        # as np.uint8(256) raises
    launch = _raw_launch((f16,), launched)                   # alone: struct would take 0.1 as a float32
    assert launch.run([0x1234], [0.1]) and launched[-1][1] == np.float32(np.float16(0.1)).tobytes() + bytes(4)
