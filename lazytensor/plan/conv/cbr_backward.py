"""Planning the fused CBR backward, stage 1 (lazytensor.ops.cbr_backward): drelu + dBN as one
reduction kernel and one elementwise kernel, both lazytensor's own, on the CPU and on CUDA alike.

Design: docs/design/cbr-backward.md, section "lazytensor/plan/conv/cbr_backward.py".
"""
from __future__ import annotations

import math

import numpy as np

from lazytensor.core import tensor as _tensor
from lazytensor.core.expr import apply
from lazytensor.kernels.program import Reduction
from lazytensor.core.memory import may_overlap
from lazytensor.plan.conv.operands import contiguous
from lazytensor.plan.elementwise import copy_step
from lazytensor.plan.lower import lower
from lazytensor.plan.steps import FusedElementwise, FusedReduction, Learned, Step, first_refusal

_F32 = np.dtype(np.float32)
_F64 = np.dtype(np.float64)
_U8 = np.dtype(np.uint8)


class _Grid:
    """The iteration space of the stage-1 kernels over an (..., K) activation and how each operand
    is read in it: NHWC arrays, per-channel vectors and the mask bits."""

    def __init__(self, backend, shape, device, mask, bits, steps, lanes=False):
        # lanes: one more axis of length 1 at the end, over which the sums' two lanes broadcast
        # (every operand is reshaped so; reshaping the expressions instead would copy their subtrees)
        self.device, self.tail = device, (1,) if lanes else ()
        self.origin: dict = {}          # id(view) -> (the array it reshapes, the view's shape)
        self.made: dict = {}            # (id(array), shape) -> (array, the operand made of it)
        self.m, self.k = math.prod(shape[:-1]), shape[-1]
        self.bit = None
        if mask is None:
            self.shape = (self.m, self.k)
        elif self.k % 8 == 0:
            self.shape = (self.m, self.k // 8, 8)
            byte = self.view(mask, (self.m, self.k // 8, 1) + self.tail)
            self.bit = apply("not_equal", apply("bitwise_and", byte, self.view(bits, (8,) + self.tail)), 0)
        else:
            self.shape = (self.m, self.k)
            self.bit = self._unpacked(backend, mask, bits, steps)

    def t(self, a):
        return _tensor.Tensor(a, self.device)

    def view(self, a, shape):
        """`a` reshaped to `shape`, as an operand; the view is remembered so that a step can hold `a`
        itself (see GridElementwise)."""
        hit = self.made.get((id(a), tuple(shape)))
        if hit is not None:             # one operand per array: a kernel reads it once
            return hit[1]
        v = a.reshape(shape)
        self.origin[id(v)] = (a, tuple(shape))
        t = self.t(v)
        self.made[(id(a), tuple(shape))] = (a, t)      # `a` kept alive: its id is not reused meanwhile
        return t

    def bases(self, arrays):
        """(array, shape) per kernel operand: what each operand reshapes."""
        return [self.origin.get(id(v), (v, tuple(v.shape))) for v in arrays]

    def nhwc(self, a):
        """An (..., K) array as an operand over the grid."""
        return self.view(a, self.shape + self.tail)

    def channel(self, a):
        """A (K,) vector (or a strided column) as an operand over the grid."""
        return self.view(a, self.shape[1:] + self.tail)

    def _unpacked(self, backend, mask, bits, steps):
        nbytes = mask.shape[0]
        unpacked = backend.empty((nbytes, 8), _U8)
        bit = apply("not_equal", apply("bitwise_and", self.view(mask, (nbytes, 1)), self.t(bits)), 0)
        program, inputs, scalars = lower(bit.astype(_U8), _U8)
        steps.append(GridElementwise(backend, program, (unpacked, unpacked.shape), self.bases(inputs), scalars,
                                      note=f"ReLU mask unpacked to a byte per element: K = {self.k} is not a "
                                           "multiple of 8, so mask bytes straddle rows of channels"))
        flat = unpacked.reshape(nbytes * 8)[: self.m * self.k].reshape((self.m, self.k) + self.tail)
        return apply("not_equal", self.view(flat, flat.shape), 0)

    def masked(self, dy):
        """dY' = dY where the forward's ReLU passed, else 0 (where, not a product: an inf in dY
        behind a closed ReLU gives 0, as relu's own gradient)."""
        return dy if self.bit is None else apply("where", self.bit, dy, 0)


class _OnGridViews(Step):
    """A step over reshaped views of its arrays (the grid above), made on its first run: it holds
    the arrays themselves, which a plan recipe rebinds to each call's own (a view of a plan's input
    or destination it could not rebind, and the plan would be made on every call)."""
    __slots__ = ()

    def _views(self):
        if self.out is None:
            (out, shape), inputs = self.bases
            self.out = out.reshape(shape)
            self.inputs = [a.reshape(s) for a, s in inputs]

    def run(self):
        self._views()
        super().run()

    def capture_refusal(self):
        self._views()
        return super().capture_refusal()

    def describe(self, source: bool = True) -> str:
        self._views()
        return super().describe(source)


class GridElementwise(_OnGridViews, FusedElementwise):
    """A FusedElementwise over reshaped views of its arrays."""
    __slots__ = ("bases",)
    per_arrays = ("bound", "inputs", "out")

    def __init__(self, backend, program, out_base, input_bases, scalars, note=""):
        super().__init__(backend, program, None, None, scalars, note)
        self.bases = (out_base, tuple(input_bases))


class GridReduction(_OnGridViews, FusedReduction):
    """A FusedReduction over reshaped views of its arrays, as GridElementwise."""
    __slots__ = ("bases",)
    per_arrays = ("inputs", "out")

    def __init__(self, backend, program, spec, out_base, input_bases, scalars, note=""):
        (out, shape), input_bases = out_base, tuple(input_bases)
        super().__init__(backend, program, spec, out.reshape(shape), [a.reshape(s) for a, s in input_bases],
                         scalars, note)
        self.bases = (out_base, input_bases)
        self.out = self.inputs = None


def _operands(node, backend, cut, steps):
    return [contiguous(cut(a), backend, steps, cut).data for a in node.args]


def _split(node, arrays):
    """(dy, conv_out, mean, inv_var, rest, mask, bits) of a stage-1 node's operands."""
    if node.attrs.relu:
        *head, mask, bits = arrays
    else:
        head, mask, bits = arrays, None, None
    return head[0], head[1], head[2], head[3], head[4:], mask, bits


def _result(node, backend, out, operands):
    """The plan's destination where the step may write it (dense, sharing no memory with what the
    step reads), else a temporary."""
    dense = (out is not None and out.flags.c_contiguous and not any(may_overlap(out, a) for a in operands))
    return out if dense else backend.empty(tuple(node.shape), node.dtype)


def _finish(node, backend, out, result, steps):
    if out is not None and result is not out:
        steps.append(copy_step(backend, result, out, "copy into the strided destination"))
    return steps, _tensor.Tensor(result, node.device)


def _compute_dtype(conv_out):
    return _F64 if conv_out.dtype == _F64 else _F32


def _x_hat(grid, conv_out, mean, inv_var, compute):
    return ((grid.nhwc(conv_out).astype(compute) - grid.channel(mean).astype(compute))
            * grid.channel(inv_var).astype(compute))


def _sums_step(backend, device, dy, conv_out, mean, inv_var, lanes, mask, bits, result, steps):
    grid = _Grid(backend, conv_out.shape, device, mask, bits, steps, lanes=True)
    compute = _compute_dtype(conv_out)
    dy_masked = grid.masked(grid.nhwc(dy).astype(compute))
    x_hat = _x_hat(grid, conv_out, mean, inv_var, compute)
    # lanes (..., 2): lane 0 dY', lane 1 dY' * x_hat; reduced over the rows in one kernel
    value = apply("where", grid.t(lanes), dy_masked * x_hat, dy_masked)
    spec = Reduction("sum", (0,), grid.shape + (2,), _F64, _F32)
    program, inputs, scalars = lower(value, compute)
    steps.append(GridReduction(backend, program, spec, (result, spec.out_shape), grid.bases(inputs), scalars,
                                note="dBN sums: per channel sum(dY') and sum(dY' * x_hat), dY' = dY * ReLU mask, "
                                     "in one read of dY, the mask bits and the conv output"))


def _vector_refusal(backend, activations, arrays, channels=()) -> str | None:
    """Why the vectorized CUDA kernels (lazytensor.plan.conv.dbn_cuda) do not run over `activations`
    (a node or an array: its dtype and shape) and `arrays` (the NHWC arrays they would touch), or None."""
    if not backend.cuda_kernels:
        return f"the {backend.name} backend"
    from lazytensor.plan.conv.dbn_cuda import vector_refusal
    return vector_refusal(activations.dtype, tuple(activations.shape), arrays, channels)


def _add_note(step, text):
    step.note = f"{step.note}\n  note: {text}" if step.note else text


def _generic(backend, steps, refusal):
    """The generic kernels' last step says, on CUDA, why the vectorized ones did not run."""
    if backend.cuda_kernels:
        _add_note(steps[-1], f"generic dBN kernels: {refusal}")


def build_sums(node, backend, cut, out):
    steps: list = []
    arrays = _operands(node, backend, cut, steps)
    dy, conv_out, mean, inv_var, (lanes,), mask, bits = _split(node, arrays)
    result = _result(node, backend, out, arrays)
    refusal = _vector_refusal(backend, conv_out, (dy, conv_out), (mean, inv_var))
    if refusal is None:
        from lazytensor.plan.conv.dbn_cuda import DbnSumsStep
        steps.append(DbnSumsStep(backend, dy, conv_out, mask, mean, inv_var, result))
        if mask is not None:        # a d(skip) node of this plan may have this pass write it (build_drelu)
            cut.evaluated[_SKIP_WRITER, id(node)] = (node, steps[-1])
    else:
        _sums_step(backend, node.device, dy, conv_out, mean, inv_var, lanes, mask, bits, result, steps)
        _generic(backend, steps, refusal)
    return _finish(node, backend, out, result, steps)


def _dx_step(backend, node, dy, conv_out, mean, inv_var, gamma, sums, mask, bits, result, steps):
    grid = _Grid(backend, conv_out.shape, node.device, mask, bits, steps)
    compute = _compute_dtype(conv_out)
    dy_masked = grid.masked(grid.nhwc(dy).astype(compute))
    x_hat = _x_hat(grid, conv_out, mean, inv_var, compute)
    per_value = 1.0 / node.attrs.count
    dbeta, dgamma = (grid.channel(sums[:, j]).astype(compute) for j in (0, 1))
    scale = grid.channel(gamma).astype(compute) * grid.channel(inv_var).astype(compute)
    d_conv = scale * (dy_masked - dbeta * per_value - x_hat * (dgamma * per_value))
    program, inputs, scalars = lower(d_conv.astype(node.dtype), node.dtype)
    steps.append(GridElementwise(backend, program, (result, grid.shape), grid.bases(inputs), scalars,
                                 note="dBN: d(conv_out) from dY, the ReLU mask bits, the conv output and the "
                                       "dBN sums in one kernel"))


def _cudnn_dbn_refusal(node) -> str | None:
    """Why the cuDNN dbn_relu graph cannot take this node, or None."""
    if not node.attrs.relu:
        return "no ReLU mask (the batch_norm form)"
    from lazytensor.cbr.cudnn_dtypes import graph_refusal
    why = graph_refusal("dbn_relu", node.dtype)
    if why is not None:
        return why
    if len(node.shape) != 4 or node.shape[-1] % 8:
        return "cuDNN takes NHWC activations with a multiple of 8 channels"
    from lazytensor.cbr.cudnn_support import cudnn_unavailable_reason
    return cudnn_unavailable_reason()


def build_dx(node, backend, cut, out):
    """d(conv_out) reading the dBN sums node's result: the sums are planned once (cut is memoized),
    whether this node, dgamma or dbeta asks first. On CUDA, where cuDNN may take the shape, the
    own kernel and the cuDNN graph are chosen between by measurement."""
    sums_n = node.args[5]
    for a in node.args:
        if a is not sums_n:
            cut(a)
    before = len(cut.steps)
    cut(sums_n)
    sums_steps = cut.steps[before:]        # the sums' own steps, where this node planned them
    steps: list = []
    arrays = _operands(node, backend, cut, steps)
    dy, conv_out, mean, inv_var, (gamma, sums), mask, bits = _split(node, arrays)
    result = _result(node, backend, out, arrays)
    own: list = []
    refusal = _vector_refusal(backend, node, (dy, conv_out, result), (mean, inv_var, gamma))
    if refusal is None:
        from lazytensor.plan.conv.dbn_cuda import DbnDxStep
        own.append(DbnDxStep(backend, dy, conv_out, mask, mean, inv_var, gamma, sums, result, node.attrs.count))
    else:
        _dx_step(backend, node, dy, conv_out, mean, inv_var, gamma, sums, mask, bits, result, own)
        _generic(backend, own, refusal)
    if backend.cudnn and _cudnn_dbn_refusal(node) is None:
        own = _chosen(node, backend, (dy, mask, conv_out, gamma, mean, inv_var), result, sums_steps, own)
    return _finish(node, backend, out, result, steps + own)


def _chosen(node, backend, graph_inputs, result, sums_steps, own):
    """On CUDA: the own kernels or the cuDNN graph, whichever measured faster for the shape (the own
    kernels timed with the sums steps this node planned). The sums stay planned either way: dgamma
    and dbeta read them."""
    from lazytensor.plan.conv.dbn_choice import CUDNN, choose_dbn
    graph = DbnGraphStep(backend, graph_inputs, result, own)

    def graph_once():
        if graph.built.value is None:
            graph.launch_graph()        # raises CudnnGraphRejected: then the own kernels are chosen
        else:
            graph.run()
    conv_out = graph_inputs[2]
    device_id = getattr(conv_out.device, "id", 0)      # (a NumPy array under a stand-in backend: "cpu")
    choice, why = choose_dbn(conv_out.shape, device_id, lambda: [s.run() for s in (*sums_steps, *own)], graph_once)
    if choice == CUDNN:
        graph.note = f"stage 1: {choice} ({why})"
        return [graph]
    _add_note(own[-1], f"stage 1: {choice} ({why})")
    return own


class DbnGraphStep(Step):
    """drelu + dBN as one cuDNN graph (cbr/cudnn_dbn.py): d(conv_out) into `out`, dgamma and dbeta
    into scratch rows (their own nodes compute them where asked for); the own kernels where cuDNN
    rejects the graph for the shape (remembered, and shown by explain)."""
    __slots__ = ("backend", "inputs", "out", "scratch", "fallback", "note", "built")
    writes = ("out", "scratch")
    rejected: dict = {}     # (shape, dtype name) -> cuDNN's reason

    def __init__(self, backend, inputs, out, fallback, note=""):
        self.backend, self.inputs, self.out, self.fallback, self.note = backend, tuple(inputs), out, fallback, note
        self.scratch = backend.empty((2, out.shape[-1]), _F32)
        self.built = Learned()

    def run(self):
        graph = self.built.value
        if graph is not None:
            graph.relaunch([a.data.ptr for a in (*self.inputs, self.out, *self.scratch)])
            return
        if self._key() not in self.rejected:
            from lazytensor.cbr.cudnn_errors import CudnnGraphRejected
            try:
                self.launch_graph()
                return
            except CudnnGraphRejected:
                pass
        for step in self.fallback:
            step.run()

    def launch_graph(self):
        """The graph's first launch (built, planned and kept); CudnnGraphRejected when cuDNN will not."""
        from lazytensor.cbr import cudnn_dbn
        from lazytensor.cbr.cudnn_errors import CudnnGraphRejected
        shape = tuple(self.out.shape)
        dy, mask, y, gamma, mean, inv_var = self.inputs
        try:
            cudnn_dbn.dbn_relu(dy, mask, y, gamma, mean, inv_var, dx=self.out, dgamma=self.scratch[0],
                               dbeta=self.scratch[1])
        except CudnnGraphRejected as e:
            self.rejected[self._key()] = e.reason
            raise
        self.built.value = cudnn_dbn.compiled_dbn_graph_for(shape, getattr(self.out.device, "id", 0),
                                                            dtype=self.out.dtype)

    def capture_refusal(self):
        return first_refusal(self.fallback) if self._key() in self.rejected else None

    def _key(self):
        return (tuple(self.out.shape), self.out.dtype.name)

    def describe(self, source: bool = True) -> str:
        reason = self.rejected.get(self._key())
        if reason is not None:
            return (f"CBR backward stage 1 on cuda: cuDNN rejected the dbn_relu graph ({reason}); own kernels:\n"
                    + "\n".join("    " + s.describe(source) for s in self.fallback))
        text = (f"CBR backward stage 1 on cuda: one cuDNN graph dY * mask (BOOLEAN, bit-packed) -> batchnorm_backward "
                f"-> d(conv_out) {self.out.shape} {self.out.dtype}, dgamma, dbeta")
        if source and self.built.value is not None:
            text += "\n  plan: " + self.built.value.describe()
        if self.note:
            text += f"\n  note: {self.note}"
        return text


_SKIP_WRITER = "the sums step that may write d(skip)"    # with id(sums node): a key of the cut's `evaluated`


def build_drelu(node, backend, cut, out):
    """d(skip) = dY': written by the vectorized sums pass of this plan where its node is an operand
    (the sums are planned for dgamma, dbeta and d(conv_out) anyway: one write instead of a pass
    reading dY and the mask again), else one kernel of its own."""
    steps: list = []
    arrays = [contiguous(cut(a), backend, steps, cut, shared=False).data for a in node.args[:3]]
    dy, mask, bits = arrays
    result = _result(node, backend, out, arrays)
    refusal = _vector_refusal(backend, node, (dy, result))
    if refusal is None:
        if len(node.args) > 3:
            sums = node.args[3]
            cut(sums)
            found = cut.evaluated.get((_SKIP_WRITER, id(sums)))
            if found is not None and found[1].skip is None:
                found[1].skip = result
                return _finish(node, backend, out, result, steps)
        from lazytensor.plan.conv.dbn_cuda import DreluStep
        steps.append(DreluStep(backend, dy, mask, result))
        return _finish(node, backend, out, result, steps)
    grid = _Grid(backend, dy.shape, node.device, mask, bits, steps)
    program, inputs, scalars = lower(grid.masked(grid.nhwc(dy)), node.dtype)
    steps.append(GridElementwise(backend, program, (result, grid.shape), grid.bases(inputs), scalars,
                                 note="d(skip) = dY * ReLU mask, reading the mask bits"))
    _generic(backend, steps, refusal)
    return _finish(node, backend, out, result, steps)
