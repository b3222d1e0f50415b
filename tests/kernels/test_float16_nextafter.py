"""float16 nextafter of equal operands follows the installed NumPy: x up to NumPy 2.4
(npy_half_nextafter), y from 2.5 on (C's nextafter), in the compiled kernels (numba and CUDA, the
choice part of the kernel's text) as in the interpreter tier, which runs NumPy's loop."""
import numpy as np
import pytest

import lazytensor as lt
from lazytensor.kernels.ops import HALF_NEXTAFTER_EQUAL_GIVES_Y

H = np.float16
ZEROS_AND_MORE = np.array([0x0000, 0x8000, 0x0001, 0x8001, 0x3C00, 0xBC00, 0x7C00, 0xFC00, 0x7BFF],
                          np.uint16).view(H)


def _check(device):
    x = np.repeat(ZEROS_AND_MORE, len(ZEROS_AND_MORE))
    y = np.tile(ZEROS_AND_MORE, len(ZEROS_AND_MORE))
    for a, b in ((x, y), (x[:1].reshape(()), y[1:2].reshape(()))):     # (arrays, and a 0-d pair)
        want = np.nextafter(a, b)
        got = lt.evaluate(lt.nextafter(lt.asarray(a, device=device), lt.asarray(b, device=device))).numpy()
        assert np.array_equal(got.view(np.uint16), want.view(np.uint16)), (a, b, got, want)
    scalar = lt.evaluate(lt.nextafter(lt.asarray(x, device=device), -0.0)).numpy()
    assert np.array_equal(scalar.view(np.uint16), np.nextafter(x, H(-0.0)).view(np.uint16))


def test_the_probe_reads_the_installed_numpy():
    assert HALF_NEXTAFTER_EQUAL_GIVES_Y == bool(np.signbit(np.nextafter(H(0.0), H(-0.0))))


def test_cpu_kernels_give_the_installed_numpy_s_values():
    _check("cpu")


def test_the_helpers_take_either_meaning():
    from lazytensor.kernels.cuda.prelude import FLOAT16_NEXTAFTER
    from lazytensor.kernels.cpu.numba_prelude import lt_nextafter
    assert f"if (x == y) return {'y' if HALF_NEXTAFTER_EQUAL_GIVES_Y else 'x'};" in FLOAT16_NEXTAFTER
    for equal_gives_y, want in ((False, False), (True, True)):
        got = lt_nextafter(np.float32(0.0), np.float32(-0.0), 16, equal_gives_y)
        assert np.signbit(got) == want


@pytest.mark.gpu
@pytest.mark.skipif(not lt.cuda_usable(), reason="needs CuPy and a CUDA device")
def test_cuda_kernels_give_the_installed_numpy_s_values():
    _check("cuda")
