"""lazytensor.testing: test code written with lazytensor against NumPy.

Assertions (NumPy alone): `assert_allclose`, `assert_array_equal` (np.testing's, taking tensors and
expressions, which are evaluated first) and `assert_same_as_numpy(fn, *arrays)` (one function run on
tensors and on NumPy arrays: same dtypes, shapes and values).

Hypothesis strategies (need hypothesis, the test extra: pip install 'lazytensor[test]'):
`tensors`, `broadcastable_shapes`, `expressions` (random DAGs with their NumPy reference), `dags`,
`elements`, `scalars`; see lazytensor.testing.strategies. They are imported on first use, so the
assertions work where hypothesis is not installed.
"""
from lazytensor.testing.assertions import assert_allclose, assert_array_equal, assert_same_as_numpy
from lazytensor.testing.oracle import DrawnDag, assert_matches

STRATEGIES = ("tensors", "broadcastable_shapes", "expressions", "dags", "elements", "scalars",
              "python_scalars", "numpy_scalars")

__all__ = ["assert_allclose", "assert_array_equal", "assert_same_as_numpy", "assert_matches", "DrawnDag",
           *STRATEGIES]


def __getattr__(name: str):
    if name in STRATEGIES:
        from lazytensor.testing import strategies
        return getattr(strategies, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
