"""lazytensor: NumPy-like lazy tensors. Operators build expressions; assignment runs each one as a
single fused kernel (numba on the CPU, CUDA C through NVRTC on the GPU).

    import lazytensor as lt
    y[...] = lt.relu((a + b) * c + 5 * d)     # one kernel
"""
from lazytensor.core.tensor import (Tensor, asarray, empty, zeros, ones, full, empty_like, zeros_like,
                               ones_like, full_like, arange)
from lazytensor.core.expr import Expr
from lazytensor.ops.elementwise import (exp, log, log1p, expm1, sqrt, sin, cos, tan, tanh, sigmoid, relu, sign,
                                  floor, ceil, isnan, isfinite, absolute, abs, negative, invert, maximum,
                                  minimum, where, clip, astype)
from lazytensor.assign.evaluate import evaluate
from lazytensor.tools.explain import explain
from lazytensor.tools.profile import profile
from lazytensor.reuse.replay import release_all as release_graphs
from lazytensor.kernels.backend import default_device, cuda_usable
from lazytensor.kernels.cache import CacheWarning
from lazytensor.kernels.cuda.device_memory import DeviceOutOfMemory
# The GPU math switches (TF32, host fallback): lt.config.conv_allow_tf32, matmul_allow_tf32, allow_host.
from lazytensor.kernels.config import config, UnsupportedOnDevice, HostFallbackWarning
from lazytensor.ops.reductions import sum, prod, mean, max, min, any, all, var, std, argmax, argmin
from lazytensor.ops.views import transpose, swapaxes, moveaxis, reshape, ravel, broadcast_to, expand_dims, squeeze
from lazytensor.ops.conv_bn import conv2d, batch_norm, BatchNormSaved
from lazytensor.nn.cbr_block import CBR
from lazytensor import cbr

# Convolution and batch-norm gradients: the backward convolutions as nodes of their own.
from lazytensor.ops.conv_backward import conv2d_backward_data, conv2d_backward_filter
# Matrix products, pooling and losses: heavy nodes planned by plan/heavy/matmul.py and
# plan/heavy/pooling.py; the softmax family is composed from lazy ops.
from lazytensor.ops.matmul import matmul
from lazytensor.ops.pooling import max_pool2d, avg_pool2d
from lazytensor.ops.softmax import logsumexp, log_softmax, softmax, cross_entropy
# Several results at once: lt.assign([(dst, e), ...]); lt.evaluate(e1, e2, ...) is assign/evaluate's
from lazytensor.assign.simultaneous import assign
# Gradients: lt.grad builds the backward as lazy expressions; lt.explain_grad shows them
from lazytensor.autodiff import grad, Gradients
from lazytensor.tools.explain_grad import explain_grad

# The fused CBR backward: stage 1 (drelu + dBN) as nodes of its own.
from lazytensor.ops.cbr_backward import cbr_bn_backward
from lazytensor.reuse.conv_grads import conv_grads
# NumPy's breadth: further ufuncs, ...
from lazytensor.ops.ufuncs import (log2, log10, exp2, isinf, signbit, arcsin, arccos, arctan, sinh, cosh,
                                   arcsinh, arccosh, arctanh, reciprocal, rint, trunc, cbrt, fabs, logical_not,
                                   arctan2, hypot, fmod, copysign, nextafter, logaddexp, logaddexp2, logical_and,
                                   logical_or, logical_xor, left_shift, right_shift, round, around)
from lazytensor.ops.views import flip
from lazytensor.ops.creation import linspace, eye, identity
from lazytensor.ops.joining import concatenate, stack, hstack, vstack
from lazytensor.ops.sorting import sort, argsort
from lazytensor.ops.joining import roll, repeat, tile
from lazytensor.ops.indexing import nonzero, take, take_along_axis
from lazytensor.ops.scans import cumsum, cumprod, cumulative_sum, cumulative_prod
from lazytensor.ops import random
from lazytensor.ops import linalg
from lazytensor.ops import fft
from lazytensor.core.names import (bool_, int8, int16, int32, int64, uint8, uint16, uint32, uint64, float16,
                                   float32, float64, complex64, complex128, newaxis, pi, e, inf, nan)
from lazytensor.core.names import bfloat16     # ml_dtypes' bfloat16, as JAX spells it
# The Array API's functions NumPy also has: products, searching, sets, differences, views.
from lazytensor.ops.products import matrix_transpose, tensordot, vecdot
from lazytensor.ops.searching import count_nonzero, searchsorted
from lazytensor.ops.sets import unique_all, unique_counts, unique_inverse, unique_values
from lazytensor.ops.differences import diff
from lazytensor.ops.broadcasting import broadcast_arrays, meshgrid, unstack
from lazytensor.ops.triangles import tril, triu
# NumPy's functions composed from the nodes above: nan-reductions, order statistics, products, ...
from lazytensor.ops.nan_reductions import (nansum, nanprod, nanmax, nanmin, nanmean, nanvar, nanstd, nanargmax,
                                           nanargmin, nancumsum, nancumprod)
from lazytensor.ops.quantiles import median, nanmedian, quantile, nanquantile, percentile, nanpercentile
from lazytensor.ops.statistics import average, ptp
from lazytensor.ops.closeness import isclose, allclose, array_equal
from lazytensor.ops.like import copy
from lazytensor.ops.splitting import atleast_1d, atleast_2d, atleast_3d, split, array_split
from lazytensor.ops.diagonals import diagonal, trace, diag
from lazytensor.ops.padding import pad
from lazytensor.ops.dots import dot, inner, outer
from lazytensor.ops.einsum import einsum
from lazytensor.ops.complex_parts import real, imag, conj, conjugate, angle
from lazytensor.ops.counting import unique, bincount, argwhere, histogram, isin
from lazytensor.ops.broadcasting import broadcast_shapes

# Modules and optimizers: lt.nn (layers, VGG/ResNet builders), lt.optim (SGD, AdamW).
from lazytensor import nn
from lazytensor.nn import optim

# One training step, planned once: lt.train_step(model, loss_fn, optimizer, amp=False).
from lazytensor.nn.train_step import TrainStep, train_step

# The CBR block is built on the user API above; it is offered as lt.cbr.CBR beside the CBR kernels.
cbr.CBR = CBR

# The CBR backward's conv_grads as an object lt.explain shows.
from lazytensor.reuse.conv_grads import ConvGradsCall

# einops.rearrange/reduce/repeat/einsum on tensors: a backend einops finds once it is imported.
from lazytensor.tools import einops_backend as _einops_backend
_einops_backend.install()

# The user methods and operators of tensors and expressions (t.sum(), a + b, y[...] = e), set on
# their classes now that everything they call is imported.
from lazytensor import array_methods as _array_methods
_array_methods.install()

# Dask arrays of lazytensor chunks: Dask's token of a tensor registers lazytensor with Dask (Dask is
# imported only then, or by the "lazytensor" array backend's entry point). In a process that runs
# dask.distributed already (a worker), tensors join its serialization families now, before the
# first one arrives.
from lazytensor.dask_backend.hooks import tokenize as _dask_tokenize
from lazytensor.dask_backend.serialize import register_where_distributed_is_loaded as _dask_serializers
Tensor.__dask_tokenize__ = Expr.__dask_tokenize__ = _dask_tokenize
_dask_serializers()

__all__ = [
    "Tensor", "Expr", "asarray", "empty", "zeros", "ones", "full", "empty_like", "zeros_like", "ones_like",
    "full_like", "arange", "exp", "log", "log1p", "expm1", "sqrt", "sin", "cos", "tan", "tanh", "sigmoid",
    "relu", "sign", "floor", "ceil", "isnan", "isfinite", "absolute", "abs", "negative", "invert", "maximum",
    "minimum", "where", "clip", "astype", "evaluate", "explain", "profile", "release_graphs", "default_device", "cuda_usable",
    "sum", "prod", "mean", "max", "min", "any", "all", "var", "std", "argmax", "argmin", "transpose", "swapaxes",
    "moveaxis", "reshape", "ravel", "broadcast_to", "expand_dims", "squeeze", "conv2d", "batch_norm",
    "BatchNormSaved", "CBR", "CacheWarning", "DeviceOutOfMemory",
    "config", "UnsupportedOnDevice", "HostFallbackWarning",
    "conv2d_backward_data", "conv2d_backward_filter",
    "matmul", "max_pool2d", "avg_pool2d", "logsumexp", "log_softmax", "softmax", "cross_entropy",
    "assign",
    "grad", "Gradients", "explain_grad",
    "cbr_bn_backward", "conv_grads",
    # NumPy's breadth
    "log2", "log10", "exp2", "isinf", "signbit", "arcsin", "arccos", "arctan", "sinh", "cosh", "arcsinh",
    "arccosh", "arctanh", "reciprocal", "rint", "trunc", "cbrt", "fabs", "logical_not", "arctan2", "hypot",
    "fmod", "copysign", "nextafter", "logaddexp", "logaddexp2", "logical_and", "logical_or", "logical_xor",
    "left_shift", "right_shift", "round", "around", "bool_", "int8", "int16", "int32", "int64", "uint8",
    "uint16", "uint32", "uint64", "float16", "float32", "float64", "newaxis", "pi", "e", "inf", "nan",
    "flip", "linspace", "eye", "identity", "concatenate", "stack", "hstack", "vstack", "sort", "argsort",
    "roll", "repeat", "tile", "nonzero", "take", "take_along_axis", "cumsum", "cumprod", "cumulative_sum",
    "cumulative_prod", "random", "linalg", "fft",
    # complex values
    "complex64", "complex128", "real", "imag", "conj", "conjugate", "angle",
    # modules, optimizers and training
    "nn", "optim", "train_step", "TrainStep",
    # the Array API's functions NumPy also has
    "matrix_transpose", "tensordot", "vecdot", "count_nonzero", "searchsorted", "unique_all", "unique_counts",
    "unique_inverse", "unique_values", "diff", "broadcast_arrays", "meshgrid", "unstack", "tril", "triu",
    # the CBR backward's conv_grads as an object lt.explain shows
    "ConvGradsCall",
    "bfloat16",
    # NumPy's functions composed from the nodes above
    "nansum", "nanprod", "nancumsum", "nancumprod", "nanmax", "nanmin", "nanmean", "nanvar", "nanstd", "nanargmax", "nanargmin", "median",
    "nanmedian", "quantile", "nanquantile", "percentile", "nanpercentile", "average", "ptp", "isclose", "allclose",
    "array_equal", "copy", "atleast_1d", "atleast_2d", "atleast_3d", "split", "array_split", "diagonal", "trace",
    "diag", "pad", "dot", "inner", "outer", "einsum", "unique", "bincount", "argwhere", "histogram", "isin",
    "broadcast_shapes",
]
