"""xarray over lazytensor arrays: DataArray reductions with xarray's default skipna (which call
np.nanmean, np.nanmax, np.nancumsum, ...), groupby, arithmetic, order statistics, weighted means
and dot (the namespace's einsum) give what the same DataArray over a NumPy array gives; the lazy
ones stay lazy inside the DataArray."""
from __future__ import annotations

import warnings

import numpy as np
import pytest

xr = pytest.importorskip("xarray")

import lazytensor as lt  # noqa: E402

X = np.array([[1.0, np.nan, 3.0, 4.0, -2.0], [5.0, 6.0, np.nan, 8.0, 0.5], [0.5, 1.5, 2.5, np.nan, np.inf],
              [np.nan, np.nan, np.nan, np.nan, np.nan]])
COORDS = {"time": [0, 1, 2, 3], "g": ("space", ["a", "b", "a", "b", "c"])}

LAZY = {
    "mean": lambda d: d.mean(), "mean over time": lambda d: d.mean("time"), "std": lambda d: d.std("space"),
    "std ddof": lambda d: d.std("time", ddof=1), "var": lambda d: d.var(), "max": lambda d: d.max("space"),
    "min": lambda d: d.min("time"), "sum": lambda d: d.sum("space"), "prod": lambda d: d.prod("time"),
    "cumsum": lambda d: d.cumsum("time"), "cumprod": lambda d: d.cumprod("space"),
    "groupby mean": lambda d: d.groupby("g").mean(), "groupby max": lambda d: d.groupby("g").max(),
    "count": lambda d: d.count("space"), "arithmetic": lambda d: (d * 2 + 1).mean("time"),
    "skipna=False": lambda d: d.mean("time", skipna=False),
}
EVALUATED = {
    "median": lambda d: d.median("space"), "quantile": lambda d: d.quantile([0.25, 0.5], dim="space"),
    "argmax": lambda d: d[:3].argmax("space"),
    "weighted mean": lambda d: d.weighted(xr.DataArray(np.array([1.0, 2, 3, 0.5]), dims="time")).mean("time"),
    "dot": lambda d: d.fillna(0).dot(d.fillna(1)), "diff": lambda d: d.diff("time"),
    "where": lambda d: d.where(d > 2).sum("space"), "fillna": lambda d: d.fillna(-1.0),
}


def _pair(f):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return f(xr.DataArray(lt.asarray(X), dims=("time", "space"), coords=COORDS)), \
            f(xr.DataArray(X, dims=("time", "space"), coords=COORDS))


@pytest.mark.parametrize("name", [*LAZY, *EVALUATED])
def test_dataarray_reductions_match_numpy(name):
    got, want = _pair({**LAZY, **EVALUATED}[name])
    data = got.data
    assert isinstance(data, (lt.Tensor, lt.Expr)), type(data)
    if name in LAZY and name != "count":
        assert isinstance(data, lt.Expr)          # nothing evaluated until asked
    assert got.dims == want.dims and got.shape == want.shape
    values = data.numpy()
    assert values.dtype == want.values.dtype
    np.testing.assert_allclose(values, want.values, rtol=1e-12, equal_nan=True)
    for c in want.coords:
        np.testing.assert_array_equal(np.asarray(got.coords[c].values), want.coords[c].values)
