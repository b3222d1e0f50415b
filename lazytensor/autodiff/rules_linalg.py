"""Gradient rules of the linalg nodes (lazytensor.ops.decompositions), real matrices: inv, solve, det,
slogdet, cholesky, eigh and eigvalsh, svd (its reduced factors) and svdvals. The composed functions
(norms, trace, pinv, ...) need none. qr has no rule, nor svd's U and Vh with full_matrices=True of
a non-square matrix (their extra columns are not unique): lt.grad says so. Functions that read
one triangle (cholesky, eigh) get the gradient of what they read: zero over the other triangle.

Design: docs/design/linalg.md, section "lazytensor/autodiff/rules_linalg.py".
"""
from __future__ import annotations

import numpy as np

from lazytensor.autodiff.rules import gradient_rule
from lazytensor.autodiff.rules_nn import sum_to_shape
from lazytensor.core import tensor as _tensor
from lazytensor.ops.decompositions import eigh, inv, solve, svd
from lazytensor.ops.matmul import matmul
from lazytensor.ops.triangles import tril, triu
from lazytensor.ops.elementwise import where
from lazytensor.ops.views import broadcast_to, expand_dims, swapaxes


def _t(x):
    return swapaxes(x, -1, -2)


def _scaled(g, m):
    """g (one value per matrix) times each matrix of m."""
    return expand_dims(expand_dims(g, -1), -1) * m


def _read_triangle(p, lower: bool):
    """The gradient with respect to a matrix of which only one triangle is read (the other taken as
    its mirror), from the symmetric gradient p: twice p off the diagonal, p on it, zero elsewhere."""
    half = tril(p, -1) if lower else triu(p, 1)
    return half + half + _diagonal_matrix(p)


def _diagonal_matrix(p):
    """p's diagonal as a matrix of p's shape, zero elsewhere."""
    return tril(triu(p))


def _inv(node, g):
    y = node
    return (-matmul(matmul(_t(y), g), _t(y)),)


def _solve(node, g):
    a, b = node.args
    x = node
    (vector,) = node.attrs.params
    if vector:
        db = solve(_t(a), expand_dims(g, -1))
        da = -matmul(db, expand_dims(x, -2))
        db = db[..., 0]
    else:
        db = solve(_t(a), g)
        da = -matmul(db, _t(x))
    return sum_to_shape(da, a.shape), sum_to_shape(db, b.shape)


def _det(node, g):
    (a,) = node.args
    return (_scaled(g * node, _t(inv(a))),)


def _slogdet(node, g):
    (a,) = node.args
    if node.attrs.index == 0:       # the sign: piecewise constant, zero almost everywhere
        return (broadcast_to(_tensor.zeros((), a.dtype, a.device), a.shape),)
    return (_scaled(g, _t(inv(a))),)


def _eigenvalues(node, g):
    """w = eigvalsh(a): dA = V diag(g) V^T over the triangle eigh reads."""
    (a,) = node.args
    (uplo,) = node.attrs.params
    v = eigh(a, UPLO=uplo).eigenvectors
    p = matmul(v * expand_dims(g, -2), _t(v))
    return (_read_triangle(p, uplo == "L"),)


def _off_diagonal(d):
    """1 / d off the diagonal of each matrix, 0 on it (d's diagonal is zero)."""
    n = d.shape[-1]
    off = ~_tensor.asarray(np.eye(n, dtype=bool), device=d.device)
    return where(off, 1.0 / where(off, d, 1.0), 0.0)


def _eigenvectors(node, g):
    """V of eigh (distinct eigenvalues w): dA = V (F * (V^T G)) V^T, F = 1 / (w_j - w_i) off the
    diagonal, symmetrized, over the triangle eigh reads."""
    (a,) = node.args
    (uplo,) = node.attrs.params
    v = node
    w = eigh(a, UPLO=uplo).eigenvalues
    f = _off_diagonal(expand_dims(w, -2) - expand_dims(w, -1))
    s = matmul(matmul(v, f * matmul(_t(v), g)), _t(v))
    return (_read_triangle(0.5 * (s + _t(s)), uplo == "L"),)


def _singular_vectors(node, g):
    """U or Vh of svd (distinct nonzero singular values s, reduced factors; Townsend 2016), each alone:
    U: dA = U (F * (U^T G - G^T U)) S V^T + (I - U U^T) G S^-1 V^T;
    Vh (G^T = dV): dA = U S (F * (V^T dV - dV^T V)) V^T + U S^-1 dV^T (I - V V^T); F = 1 / (s_j^2 - s_i^2)."""
    (a,) = node.args
    full_matrices, hermitian = node.attrs.params
    m, n = a.shape[-2:]
    if full_matrices and m != n:
        which = "U" if node.attrs.index == 0 else "Vh"
        raise NotImplementedError(f"lt.grad: no gradient rule for linalg.svd's {which} with full_matrices=True of a "
                                  f"{m} x {n} matrix (its extra columns are not unique); use full_matrices=False")
    u, s, vh = svd(a, full_matrices=full_matrices, hermitian=hermitian)
    v = _t(vh)
    s2 = s * s
    f = _off_diagonal(expand_dims(s2, -2) - expand_dims(s2, -1))
    row_s, inv_s = expand_dims(s, -2), expand_dims(1.0 / s, -2)
    if node.attrs.index == 0:
        ug = matmul(_t(u), g)
        inner = (f * (ug - _t(ug))) * row_s
        rest = (g - matmul(u, ug)) * inv_s                              # (I - U U^T) G S^-1
        return (matmul(matmul(u, inner) + rest, vh),)
    dv = _t(g)
    vg = matmul(vh, dv)
    inner = expand_dims(s, -1) * (f * (vg - _t(vg)))
    rest = matmul(u * inv_s, _t(dv - matmul(v, vg)))                   # U S^-1 dV^T (I - V V^T)
    return (matmul(matmul(u, inner), vh) + rest,)


def _cholesky(node, g):
    """L = cholesky(a) (Murray, 2016): P = sym(L^-T Phi(L^T G) L^-1), Phi the lower triangle with its
    diagonal halved; upper=True: U = L^T, G^T on L, and a's upper triangle read."""
    (a,) = node.args
    (upper,) = node.attrs.params
    factor, gl = (_t(node), _t(g)) if upper else (node, g)
    li = inv(factor)
    m = matmul(_t(factor), gl)
    phi = tril(m, -1) + 0.5 * _diagonal_matrix(m)
    s = matmul(matmul(_t(li), phi), li)
    p = 0.5 * (s + _t(s))
    return (_read_triangle(p, not upper),)


def _singular_values(node, g):
    """s = svdvals(a), or svd's S (distinct singular values): dA = U diag(g) Vh, the reduced factors."""
    (a,) = node.args
    hermitian = node.attrs.params[-1]
    u, _, vh = svd(a, full_matrices=False, hermitian=hermitian)
    return (matmul(u * expand_dims(g, -2), vh),)


_RULES = {"inv": _inv, "solve": _solve, "det": _det, "slogdet": _slogdet, "eigvalsh": _eigenvalues,
          "cholesky": _cholesky, "svdvals": _singular_values}


@gradient_rule("linalg")
def linalg_gradient(node, g):
    spec = node.attrs
    if any(a.dtype.kind == "c" for a in node.args):
        # The rules below are the real ones (transposes, not conjugate transposes): a wrong gradient otherwise.
        raise NotImplementedError(f"lt.grad: the linalg gradients are of real matrices; linalg.{spec.fn} has "
                                  f"a {node.args[0].dtype} operand")
    rule = _RULES.get(spec.fn)
    if spec.fn == "eigh":
        rule = _eigenvalues if spec.index == 0 else _eigenvectors
    elif spec.fn == "svd":
        rule = _singular_values if spec.index == 1 else _singular_vectors
    if rule is None:
        raise NotImplementedError(f"lt.grad: no gradient rule for linalg.{spec.fn}; the gradients lazytensor has for "
                                  f"linalg are those of inv, solve, det, slogdet, cholesky, eigh, eigvalsh, svd and "
                                  f"svdvals")
    return rule(node, g)

