"""The Origins made by one evaluation share one record of the write counts (WriteCounts), which each
memory knows once: an optimizer step keeps a value for every gradient, update and the loss, and one
record per Origin registered with every parameter's memory cost a registration per (Origin, tensor)
pair. Sharing must not blur which Origin a write makes stale."""
import numpy as np
import pytest

import lazytensor as lt
from lazytensor.core.readers import memory_of


def test_one_evaluation_registers_its_write_counts_once_per_memory():
    w = lt.asarray(np.arange(6, dtype=np.float64), device="cpu")
    values = [lt.sum(w * k) for k in range(1, 41)]
    before = len(memory_of(w).origins)
    lt.evaluate(*values)
    assert len(memory_of(w).origins) == before + 1
    assert all(v.origin.counts is values[0].origin.counts for v in values)


@pytest.mark.parametrize("written", ["a", "b"])
def test_a_write_makes_stale_only_the_origins_that_read_it(written):
    rng = np.random.default_rng(1)
    a = lt.asarray(rng.standard_normal(5), device="cpu")
    b = lt.asarray(rng.standard_normal(5), device="cpu")
    ya, yb, yab = lt.sum(a * a), lt.sum(lt.sin(b)), lt.sum(a * b)
    lt.evaluate(ya, yb, yab)
    target = a if written == "a" else b
    for _ in range(2):              # the second write drops what the first made stale
        target[...] = target + 1.0
    kept, stale = (yb, ya) if written == "a" else (ya, yb)
    assert kept.origin.args != ()
    assert stale.origin.args == () and yab.origin.args == ()
    if written == "a":
        np.testing.assert_allclose(lt.evaluate(lt.grad(yb, b)).numpy(), np.cos(b.numpy()))
    else:
        np.testing.assert_allclose(lt.evaluate(lt.grad(ya, a)).numpy(), 2 * a.numpy())
    with pytest.raises(ValueError, match="written since|operands are gone"):
        lt.grad(yab, [a, b])


def test_an_expression_given_its_own_memory_records_that_memory_too():
    x = lt.asarray(np.arange(3, dtype=np.float64), device="cpu")
    y = x * 2
    y[0] = 7.0                      # y becomes a value in memory of its own, written there
    np.testing.assert_array_equal(y.numpy(), [7.0, 2.0, 4.0])
    assert any(t is y.result for t, _ in y.origin.versions)
    assert y.origin.stale() is y.result     # its value is no longer what x * 2 computed
