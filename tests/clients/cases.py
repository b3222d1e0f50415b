"""The table of client functions run on lazytensor arrays and on NumPy's: one entry a row.

Each case calls a library function through the arrays it is given (lazytensor's, or NumPy's for the
reference) and returns an array or a tuple of arrays. `status` is "pass" where the case gives NumPy's
values, else why not; test_clients.py checks every row, and docs/guide/clients.md shows the table.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable


@dataclass(frozen=True)
class Case:
    library: str            # the distribution, as pip names it (skipped where it is not installed)
    name: str               # what the docs' table shows
    run: Callable           # run(X, Y, B): X, Y: (20, 5) float64 arrays; B: (20,) with both signs
    status: str = "pass"


def _sklearn(estimator):
    def run(X, Y, B):
        from sklearn import config_context
        from lazytensor.core.operand import Operand
        with config_context(array_api_dispatch=isinstance(X, Operand)):
            return estimator(X, Y)
    return run


def _standard_scaler(X, Y):
    from sklearn.preprocessing import StandardScaler
    s = StandardScaler().fit(X)
    return s.transform(Y), s.mean_, s.scale_, s.var_


def _normalizer(X, Y):
    from sklearn.preprocessing import Normalizer
    return Normalizer().fit_transform(X), Normalizer(norm="l1").fit_transform(Y), Normalizer(norm="max").fit_transform(X)


def _cosine_similarity(X, Y):
    from sklearn.metrics.pairwise import cosine_similarity
    return cosine_similarity(X, Y), cosine_similarity(X)


def _rbf_kernel(X, Y):
    from sklearn.metrics.pairwise import rbf_kernel
    return rbf_kernel(X, Y, gamma=0.3), rbf_kernel(X)


def _logsumexp(X, Y, B):
    from scipy.special import logsumexp
    return logsumexp(X, axis=1), logsumexp(X)


def _logsumexp_b(X, Y, B):
    from scipy.special import logsumexp
    return (*logsumexp(X, axis=0, b=B[:, None], return_sign=True), logsumexp(Y[0], b=B[:5]))


def _log_softmax(X, Y, B):
    from scipy.special import log_softmax
    return log_softmax(X, axis=1), log_softmax(Y, axis=0)


def _zscore(X, Y, B):
    from scipy.stats import zscore
    return zscore(X, axis=0), zscore(Y, axis=1, ddof=1)


def _pearsonr(X, Y, B):
    from scipy.stats import pearsonr
    r = pearsonr(X[:, 0], Y[:, 1])
    return r.statistic, r.pvalue


def _whiten(X, Y, B):
    from scipy.cluster.vq import whiten
    return whiten(X)


CASES = [
    Case("scikit-learn", "preprocessing.StandardScaler", _sklearn(_standard_scaler)),
    Case("scikit-learn", "preprocessing.Normalizer (l2, l1, max)", _sklearn(_normalizer)),
    Case("scikit-learn", "metrics.pairwise.cosine_similarity", _sklearn(_cosine_similarity)),
    Case("scikit-learn", "metrics.pairwise.rbf_kernel", _sklearn(_rbf_kernel)),
    Case("scipy", "special.logsumexp", _logsumexp),
    Case("scipy", "special.logsumexp (b=, return_sign=True)", _logsumexp_b),
    Case("scipy", "special.log_softmax", _log_softmax),
    Case("scipy", "stats.zscore", _zscore),
    Case("scipy", "stats.pearsonr", _pearsonr),
    Case("scipy", "cluster.vq.whiten", _whiten),
]
