"""Every user error, raised by the statement that caused it (building the expression, not a
later evaluation), with a message that names what was wrong; and a failed compile or run leaves
the destination as it was."""
from __future__ import annotations

import numpy as np
import pytest

import lazytensor as lt
from lazytensor.kernels.backend import backend_for
from lazytensor.kernels.ops import DTYPES


def _t(shape, dtype=np.float32):
    return lt.asarray(np.arange(int(np.prod(shape)), dtype=np.float64).reshape(shape).astype(dtype))


# -- shapes ----------------------------------------------------------------------------------------

def test_broadcast_error_at_construction_names_both_shapes():
    a, b = _t((3, 4)), _t((5,))
    with lt.profile() as p:
        with pytest.raises(ValueError, match=r"cannot broadcast shapes \(3, 4\) and \(5,\)"):
            a + b
    assert p.kernels == []
    with pytest.raises(ValueError, match=r"cannot broadcast shapes \(2, 3\) and \(3, 2\)"):
        lt.where(_t((2, 3)) > 0, _t((3, 2)), 0.0)
    with pytest.raises(ValueError, match=r"cannot broadcast shapes"):
        np.add(_t((4,)), _t((3,)))                    # through the ufunc protocol
    with pytest.raises(ValueError, match=r"cannot broadcast shapes \(3, 4\) and \(5,\)"):
        a * 2 + lt.exp(b)                            # deep inside an expression: still where it is built


def test_assigning_to_a_destination_of_another_shape():
    y = lt.zeros((3, 4))
    with pytest.raises(ValueError, match=r"cannot assign an expression of shape \(4, 3\) to a destination of shape \(3, 4\)"):
        y[...] = _t((4, 3)) + 1
    with pytest.raises(ValueError, match=r"shape \(2, 3, 4\) to a destination of shape \(3, 4\)"):
        y[...] = _t((2, 3, 4)) * 2                   # broadcastable, but larger than the destination
    with pytest.raises(ValueError, match=r"shape \(3, 4\)"):
        y[:2] = _t((3, 4)) * 2
    with pytest.raises(ValueError, match=r"cannot broadcast shapes \(3, 4\) and \(5,\)"):
        y += _t((5,))
    with pytest.raises(ValueError, match=r"shape \(2, 3, 4\) to a destination of shape \(3, 4\)"):
        y += _t((2, 3, 4))                           # y + x broadcasts, but not into y
    np.testing.assert_array_equal(y.numpy(), np.zeros((3, 4)))


# -- dtypes and ops --------------------------------------------------------------------------------

@pytest.mark.parametrize("values,name", [(np.array([1 + 2j], np.clongdouble), "complex256|clongdouble"),
                                         (np.array(["a"]), "<U1|str"), (np.array([object()]), "object"),
                                         (np.array([1.0], np.longdouble), "float128|longdouble")])
def test_unsupported_dtype(values, name):
    with pytest.raises(TypeError, match=rf"unsupported dtype ({name})"):
        lt.asarray(values)


@pytest.mark.parametrize("dtype", [np.clongdouble, object, "U3", np.datetime64])
def test_unsupported_dtype_in_constructors_and_astype(dtype):
    with pytest.raises(TypeError, match="unsupported dtype"):
        lt.zeros((2,), dtype)
    with pytest.raises(TypeError, match="unsupported dtype"):
        lt.empty((2,), dtype)
    with pytest.raises(TypeError, match="unsupported dtype"):
        _t((2,)).astype(dtype)


def test_unsupported_scalar_operands():
    a = _t((2,))
    with pytest.raises(TypeError, match="unsupported"):
        a * "x"
    with pytest.raises(TypeError, match="unsupported dtype (complex256|clongdouble)"):
        a - np.clongdouble(1)


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
def test_bitwise_ops_on_floats_are_refused(dtype):
    a, b = _t((3,), dtype), _t((3,), dtype)
    with pytest.raises(TypeError, match=rf"bitwise_and is not supported for \({np.dtype(dtype).name}, {np.dtype(dtype).name}\)"):
        a & b
    with pytest.raises(TypeError, match=r"bitwise_or is not supported"):
        a | 1
    with pytest.raises(TypeError, match=r"bitwise_xor is not supported"):
        True ^ a
    with pytest.raises(TypeError, match=rf"invert is not supported for \({np.dtype(dtype).name}\)"):
        ~a


def test_negative_of_bool_is_refused_like_numpy():
    b = lt.asarray(np.array([True, False]))
    with pytest.raises(TypeError, match=r"negative is not supported for \(bool\).*use the `~` operator"):
        -b
    with pytest.raises(TypeError, match=r"negative is not supported for \(bool\)"):
        np.negative(b)
    with pytest.raises(TypeError, match=r"subtract is not supported for \(bool, bool\)"):
        b - b
    np.testing.assert_array_equal(lt.evaluate(~b).numpy(), [False, True])     # what to do instead


def test_error_messages_use_numpys_words_for_weak_scalars():
    with pytest.raises(TypeError, match=r"bitwise_and is not supported for \(float32, Python int\)"):
        _t((2,)) & 1


# -- devices ---------------------------------------------------------------------------------------

def _fake_cuda_tensor(shape=(3,)):
    """A Tensor that claims device 'cuda' (no GPU is needed to build expressions with it; the
    device check happens while building, before any backend is asked for)."""
    return lt.Tensor(np.zeros(shape, np.float32), "cuda")


def test_mixing_devices_in_one_expression():
    a, g = _t((3,)), _fake_cuda_tensor()
    with pytest.raises(ValueError, match=r"expression mixes devices 'cpu' and 'cuda'.*lt.asarray\(x, device="):
        a + g
    with pytest.raises(ValueError, match=r"mixes devices 'cuda' and 'cpu'"):
        g * 2 + a
    with pytest.raises(ValueError, match=r"mixes devices"):
        lt.where(a > 0, g, a)


def test_assigning_across_devices():
    y = lt.zeros((3,))
    before = y.numpy().copy()
    with pytest.raises(ValueError, match=r"cannot assign an expression on 'cuda' to a tensor on 'cpu'"):
        y[...] = _fake_cuda_tensor() * 2
    np.testing.assert_array_equal(y.numpy(), before)


def test_unknown_device():
    with pytest.raises(ValueError, match=r"unknown device 'tpu': expected 'cpu' or 'cuda'"):
        lt.zeros((2,), device="tpu")


# -- casting on assignment (NumPy's same_kind rule) ---------------------------------------------------

@pytest.mark.parametrize("dst", DTYPES, ids=lambda d: d.name)
@pytest.mark.parametrize("src", DTYPES, ids=lambda d: d.name)
def test_assignment_casting_follows_same_kind(src, dst):
    y = lt.asarray(np.zeros(4, dst))
    e = _t((4,), src) + _t((4,), src) if src != np.bool_ else _t((4,), src) | _t((4,), src)
    if np.can_cast(src, dst, casting="same_kind"):
        y[...] = e
        return
    with pytest.raises(TypeError, match=rf"cannot assign {src.name} to {dst.name} under the 'same_kind' casting rule"):
        y[...] = e
    np.testing.assert_array_equal(y.numpy(), np.zeros(4, dst))


def test_unsafe_casts_in_place_and_with_scalars():
    i = lt.asarray(np.arange(4, dtype=np.int32))
    with pytest.raises(TypeError, match=r"float64 to int32 under the 'same_kind' casting rule"):
        i += 1.5
    with pytest.raises(TypeError, match=r"float64 to int32"):
        i /= 2                                     # true division makes floats, as NumPy refuses too
    with pytest.raises(TypeError, match=r"Python float to a int32 tensor"):
        i[...] = 2.5
    with pytest.raises(TypeError, match=r"float32 to int32"):
        i.assign(_t((4,)) * 2)
    b = lt.asarray(np.zeros(4, bool))
    with pytest.raises(TypeError, match=r"Python int to a bool tensor"):
        b[...] = 1
    with pytest.raises(TypeError, match=r"same_kind"):
        np.add(_t((4,)), 1.0, out=i)
    np.testing.assert_array_equal(i.numpy(), np.arange(4, dtype=np.int32))
    f = lt.asarray(np.zeros(4, np.float16))
    f[...] = _t((4,), np.float64) * 2                  # same kind: allowed, rounds
    np.testing.assert_array_equal(f.numpy(), np.arange(4, dtype=np.float16) * 2)


# -- a failed compile or run leaves the destination unchanged -------------------------------------------

@pytest.fixture
def cpu_backend():
    backend = backend_for("cpu")
    yield backend
    backend.kernels.clear()        # drop any kernel built while the backend was broken


@pytest.mark.compiled_tier
def test_failed_compile_leaves_destination_unchanged(monkeypatch, cpu_backend):
    def broken_build(*args, **kwargs):
        raise RuntimeError("compiler exploded")
    monkeypatch.setattr(type(cpu_backend), "_build", broken_build)
    y = lt.asarray(np.full((5, 3), 7.0, np.float64))
    buf = y.data
    # a structure no other test builds, so the memory cache cannot serve it
    e = lt.tanh(_t((5, 3), np.float64) * 0.25) - lt.expm1(_t((3,), np.float64)) * 3.0
    with pytest.raises(RuntimeError, match="compiler exploded"):
        y[...] = e
    assert y.data is buf
    np.testing.assert_array_equal(y.numpy(), np.full((5, 3), 7.0))
    with pytest.raises(RuntimeError, match="compiler exploded"):
        y += e
    np.testing.assert_array_equal(y.numpy(), np.full((5, 3), 7.0))


@pytest.mark.compiled_tier
def test_failed_kernel_codegen_leaves_destination_unchanged(monkeypatch, cpu_backend, tmp_path):
    """Source that numba cannot type fails at the first call, before the body writes anything."""
    import lazytensor.kernels.cpu.backend as cpu

    real = cpu.render_numba

    def bad_render(program, layout):
        return real(program, layout).replace("import math", "import math\nundefined_helper = None", 1) \
            .replace("= np.float64(v", "= undefined_helper(v")

    monkeypatch.setenv("LAZYTENSOR_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(cpu, "render_numba", bad_render)
    y = lt.asarray(np.full((4, 6), -1.0, np.float64))
    e = lt.log1p(lt.abs(_t((4, 6), np.float64))) / 7.0 + lt.sin(_t((6,), np.float64))
    with pytest.raises(Exception) as info:
        y[...] = e
    assert not isinstance(info.value, AssertionError)
    np.testing.assert_array_equal(y.numpy(), np.full((4, 6), -1.0))
