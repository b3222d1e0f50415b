"""einops on lazytensor arrays: rearrange, reduce, repeat, einsum, pack/unpack and parse_shape take
tensors and expressions and give NumPy's results (einops' numpy backend as the oracle), lazily.
The backend is found whether einops is imported before or after lazytensor."""
from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

einops = pytest.importorskip("einops")

import lazytensor as lt  # noqa: E402

X = np.arange(120.0).reshape(2, 3, 4, 5) - 40.0


@pytest.mark.parametrize("pattern,lengths", [
    ("a b c d -> d c b a", {}), ("a b c d -> (a b) (c d)", {}), ("a b (c1 c2) d -> a b c1 c2 d", {"c1": 2}),
    ("a b c d -> b (d a) c", {}), ("a ... d -> d ... a", {}), ("a b c d -> a b c d 1", {})])
def test_rearrange(pattern, lengths):
    t = lt.asarray(X)
    for operand in (t, t * 1.0):
        got = einops.rearrange(operand, pattern, **lengths)
        assert isinstance(got, (lt.Tensor, lt.Expr))
        np.testing.assert_array_equal(got.numpy(), einops.rearrange(X, pattern, **lengths))


@pytest.mark.parametrize("op", ["sum", "mean", "max", "min", "prod", "any", "all"])
def test_reduce(op):
    x = X if op not in ("any", "all") else X > 0
    got = einops.reduce(lt.asarray(x) if op in ("any", "all") else lt.asarray(x) * 1.0, "a b c d -> a d", op)
    assert isinstance(got, lt.Expr)
    np.testing.assert_allclose(got.numpy(), einops.reduce(x, "a b c d -> a d", op), rtol=1e-12)
    np.testing.assert_allclose(einops.reduce(lt.asarray(x), "a b (c h) d -> a c d", op, h=2).numpy(),
                               einops.reduce(x, "a b (c h) d -> a c d", op, h=2), rtol=1e-12)


def test_repeat_is_a_value_of_its_own():
    t = lt.asarray(X)
    for pattern, lengths in (("a b c d -> a b c d r", {"r": 3}), ("a b c d -> (r a) b c d", {"r": 2}),
                             ("a b c d -> a (b r) c d", {"r": 2})):
        got = einops.repeat(t, pattern, **lengths)
        np.testing.assert_array_equal(got.numpy(), einops.repeat(X, pattern, **lengths))
    y = einops.repeat(lt.asarray(np.arange(3.0)), "n -> n r", r=2).eval()
    y[0, 0] = 99.0                                # a copy, as einops' numpy backend gives
    assert float(y[0, 1].item()) == 0.0


def test_einsum_pack_unpack_parse_shape():
    t = lt.asarray(X)
    got = einops.einsum(t, t, "a b c d, a b c d -> a c")
    np.testing.assert_allclose(got.numpy(), einops.einsum(X, X, "a b c d, a b c d -> a c"), rtol=1e-12)
    packed, shapes = einops.pack([t, t[0]], "* d")
    want, _ = einops.pack([X, X[0]], "* d")
    np.testing.assert_array_equal(packed.numpy(), want)
    for got, part in zip(einops.unpack(packed, shapes, "* d"), (X, X[0])):
        np.testing.assert_array_equal(got.numpy(), part)
    assert einops.parse_shape(t, "a b _ d") == {"a": 2, "b": 3, "d": 5}
    stacked = einops.rearrange([t[0], t[1]], "n b c d -> b n c d")
    np.testing.assert_array_equal(stacked.numpy(), einops.rearrange([X[0], X[1]], "n b c d -> b n c d"))


@pytest.mark.parametrize("order", ["einops first", "lazytensor first"])
def test_backend_is_found_in_either_import_order(order):
    imports = "import einops; import lazytensor as lt" if order == "einops first" else \
        "import lazytensor as lt, sys; assert 'einops' not in sys.modules; import einops"
    code = f"{imports}; import numpy as np; print(einops.rearrange(lt.asarray(np.ones((2, 3))), 'a b -> b a').shape)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "(3, 2)"
