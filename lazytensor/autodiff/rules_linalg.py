"""Gradient rules of the linalg nodes (lazytensor.ops.decompositions): inv, solve, det, slogdet,
cholesky, eigh and eigvalsh, svd (its reduced factors) and svdvals. The composed functions (norms,
trace, pinv, ...) need none. qr has no rule, nor svd's U and Vh with full_matrices=True of a
non-square matrix (their extra columns are not unique): lt.grad says so. Functions that read one
triangle (cholesky, eigh) get the gradient of what they read: zero over the other triangle.

Complex matrices take the same rules in PyTorch's convention (autodiff.complex_rules): conjugate
transposes where a real rule transposes (_h is the transpose of a real matrix, the same node), plus
what only a complex value has: the phase of slogdet's sign, the real diagonal a Hermitian matrix is
read with, the phase svd gives U's columns. Eigenvectors and singular vectors are defined up to a
phase each, so a loss must not depend on it (as PyTorch requires; unchecked here).

Design: docs/design/linalg.md, section "lazytensor/autodiff/rules_linalg.py".
"""
from __future__ import annotations

import numpy as np

from lazytensor.autodiff.rules import gradient_rule
from lazytensor.autodiff.rules_nn import sum_to_shape
from lazytensor.core import tensor as _tensor
from lazytensor.core.expr import apply
from lazytensor.ops.decompositions import eigh, inv, solve, svd
from lazytensor.ops.matmul import matmul
from lazytensor.ops.triangles import tril, triu
from lazytensor.ops.elementwise import where
from lazytensor.ops.views import broadcast_to, expand_dims, swapaxes


def _t(x):
    return swapaxes(x, -1, -2)


def _complex(x) -> bool:
    return x.dtype.kind == "c"


def _conj(x):
    return apply("conjugate", x) if _complex(x) else x


def _h(x):
    """The conjugate transpose; of a real matrix its transpose."""
    return _t(_conj(x))


def _scaled(g, m):
    """g (one value per matrix) times each matrix of m."""
    return expand_dims(expand_dims(g, -1), -1) * m


def _read_triangle(p, lower: bool):
    """The gradient with respect to a matrix of which only one triangle is read (the other taken as
    its mirror), from the symmetric gradient p: twice p off the diagonal, p on it, zero elsewhere.
    Complex: the mirror is conjugated and the diagonal's imaginary part not read (LAPACK's Hermitian
    routines), so from any p: p + p^H over the triangle, the real part of p's diagonal."""
    if _complex(p):
        both = p + _h(p)
        d = _diagonal_matrix(p)
        return (tril(both, -1) if lower else triu(both, 1)) + 0.5 * (d + _conj(d))
    half = tril(p, -1) if lower else triu(p, 1)
    return half + half + _diagonal_matrix(p)


def _diagonal_matrix(p):
    """p's diagonal as a matrix of p's shape, zero elsewhere."""
    return tril(triu(p))


def _inv(node, g):
    y = node
    return (-matmul(matmul(_h(y), g), _h(y)),)


def _solve(node, g):
    a, b = node.args
    x = node
    (vector,) = node.attrs.params
    if vector:
        db = solve(_h(a), expand_dims(g, -1))
        da = -matmul(db, expand_dims(_conj(x), -2))
        db = db[..., 0]
    else:
        db = solve(_h(a), g)
        da = -matmul(db, _h(x))
    return sum_to_shape(da, a.shape), sum_to_shape(db, b.shape)


def _det(node, g):
    (a,) = node.args
    return (_scaled(g * _conj(node), _h(inv(a))),)


def _slogdet(node, g):
    """logabsdet: g A^-H. The sign: of a real matrix piecewise constant, zero almost everywhere; of a
    complex one the phase of det, d sign = i sign Im tr(A^-1 dA): -i Im(conj(g) sign) A^-H."""
    (a,) = node.args
    if node.attrs.index == 0:
        if _complex(a):
            return (_scaled(apply("imag", _conj(g) * node) * -1j, _h(inv(a))),)
        return (broadcast_to(_tensor.zeros((), a.dtype, a.device), a.shape),)
    return (_scaled(g, _h(inv(a))),)


def _eigenvalues(node, g):
    """w = eigvalsh(a): dA = V diag(g) V^H over the triangle eigh reads."""
    (a,) = node.args
    (uplo,) = node.attrs.params
    v = eigh(a, UPLO=uplo).eigenvectors
    p = matmul(v * expand_dims(g, -2), _h(v))
    return (_read_triangle(p, uplo == "L"),)


def _off_diagonal(d):
    """1 / d off the diagonal of each matrix, 0 on it (d's diagonal is zero)."""
    n = d.shape[-1]
    off = ~_tensor.asarray(np.eye(n, dtype=bool), device=d.device)
    return where(off, 1.0 / where(off, d, 1.0), 0.0)


def _eigenvectors(node, g):
    """V of eigh (distinct eigenvalues w): dA = V (F * (V^H G)) V^H, F = 1 / (w_j - w_i) off the
    diagonal, symmetrized, over the triangle eigh reads. F's zero diagonal drops the part of G that
    turns a column's phase, which a loss must not depend on."""
    (a,) = node.args
    (uplo,) = node.attrs.params
    v = node
    w = eigh(a, UPLO=uplo).eigenvalues
    f = _off_diagonal(expand_dims(w, -2) - expand_dims(w, -1))
    s = matmul(matmul(v, f * matmul(_h(v), g)), _h(v))
    return (_read_triangle(0.5 * (s + _h(s)), uplo == "L"),)


def _singular_vectors(node, g):
    """U or Vh of svd (distinct nonzero singular values s, reduced factors; Townsend 2016), each alone:
    U: dA = U (F * (U^H G - G^H U)) S V^H + (I - U U^H) G S^-1 V^H;
    Vh (G^H = dV): dA = U S (F * (V^H dV - dV^H V)) V^H + U S^-1 dV^H (I - V V^H); F = 1 / (s_j^2 - s_i^2).
    Complex: svd fixes the phases of U's and V's columns together; where their difference moves
    (the phase of u_i^H dA v_i) is U's, as PyTorch takes it: U gets U diag(i Im(U^H G)_ii / s_i) V^H more."""
    (a,) = node.args
    full_matrices, hermitian = node.attrs.params
    m, n = a.shape[-2:]
    if full_matrices and m != n:
        which = "U" if node.attrs.index == 0 else "Vh"
        raise NotImplementedError(f"lt.grad: no gradient rule for linalg.svd's {which} with full_matrices=True of a "
                                  f"{m} x {n} matrix (its extra columns are not unique); use full_matrices=False")
    u, s, vh = svd(a, full_matrices=full_matrices, hermitian=hermitian)
    v = _h(vh)
    s2 = s * s
    f = _off_diagonal(expand_dims(s2, -2) - expand_dims(s2, -1))
    row_s, inv_s = expand_dims(s, -2), expand_dims(1.0 / s, -2)
    if node.attrs.index == 0:
        ug = matmul(_h(u), g)
        inner = (f * (ug - _h(ug))) * row_s
        if _complex(ug):
            d = _diagonal_matrix(ug)
            inner = inner + 0.5 * (d - _conj(d)) * inv_s                 # i Im(U^H G)_ii / s_i
        rest = (g - matmul(u, ug)) * inv_s                              # (I - U U^H) G S^-1
        return (matmul(matmul(u, inner) + rest, vh),)
    dv = _h(g)
    vg = matmul(vh, dv)
    inner = expand_dims(s, -1) * (f * (vg - _h(vg)))
    rest = matmul(u * inv_s, _h(dv - matmul(v, vg)))                   # U S^-1 dV^H (I - V V^H)
    return (matmul(matmul(u, inner), vh) + rest,)


def _cholesky(node, g):
    """L = cholesky(a) (Murray, 2016): P = sym(L^-H Phi(L^H G) L^-1), Phi the lower triangle with its
    diagonal halved; upper=True: U = L^H, G^H on L, and a's upper triangle read."""
    (a,) = node.args
    (upper,) = node.attrs.params
    factor, gl = (_h(node), _h(g)) if upper else (node, g)
    li = inv(factor)
    m = matmul(_h(factor), gl)
    phi = tril(m, -1) + 0.5 * _diagonal_matrix(m)
    s = matmul(matmul(_h(li), phi), li)
    p = 0.5 * (s + _h(s))
    return (_read_triangle(p, not upper),)


def _singular_values(node, g):
    """s = svdvals(a), or svd's S (distinct singular values): dA = U diag(g) Vh, the reduced factors."""
    (a,) = node.args
    hermitian = node.attrs.params[-1]
    u, _, vh = svd(a, full_matrices=False, hermitian=hermitian)
    return (matmul(u * expand_dims(g, -2), vh),)


_RULES = {"inv": _inv, "solve": _solve, "det": _det, "slogdet": _slogdet, "eigvalsh": _eigenvalues,
          "cholesky": _cholesky, "svdvals": _singular_values}


@gradient_rule("linalg", takes_complex=True)
def linalg_gradient(node, g):
    spec = node.attrs
    rule = _RULES.get(spec.fn)
    if spec.fn == "eigh":
        rule = _eigenvalues if spec.index == 0 else _eigenvectors
    elif spec.fn == "svd":
        rule = _singular_values if spec.index == 1 else _singular_vectors
    if rule is None:
        raise NotImplementedError(f"lt.grad: no gradient rule for linalg.{spec.fn}; the gradients lazytensor has for "
                                  f"linalg are those of inv, solve, det, slogdet, cholesky, eigh, eigvalsh, svd and "
                                  f"svdvals")
    if spec.fn in ("svd", "svdvals") and spec.params[-1]:
        # hermitian=True decomposes what eigh reads, the lower triangle: the gradient of that.
        (p,) = rule(node, g)
        return (_read_triangle(0.5 * (p + _h(p)), lower=True),)
    return rule(node, g)

