"""The three cuDNN frontend graphs of the CBR path, built and planned for one conv shape.

Design: docs/design/cbr.md, section "cbr/cudnn_graphs.py".
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum

from .conv_key import ConvKey
from .cudnn_dtypes import data_types, excluded_notes, graph_refusal
from .cudnn_errors import CudnnGraphRejected
from .cudnn_handle import import_cuda_modules


class GraphKind(str, Enum):
    CONV_GENSTATS = "conv_genstats"
    CONV = "conv"
    CONV_SCALE_BIAS_RELU = "conv_scale_bias_relu"
    CONV_DGRAD = "conv_dgrad"
    CONV_WGRAD = "conv_wgrad"
    DBN_RELU = "dbn_relu"


# The buffers each graph reads or writes, by role; a launch passes one device pointer per role.
GRAPH_ROLES = {
    GraphKind.CONV_GENSTATS: ("x", "w", "y", "sum", "sum_sq"),
    GraphKind.CONV: ("x", "w", "y"),
    GraphKind.CONV_SCALE_BIAS_RELU: ("x", "w", "eq_scale", "eq_bias", "y"),
    GraphKind.CONV_DGRAD: ("dy", "w", "dx"),
    GraphKind.CONV_WGRAD: ("x", "dy", "dw"),
    GraphKind.DBN_RELU: ("dy", "mask", "y", "gamma", "mean", "inv_var", "dx", "dgamma", "dbeta"),
}


def nchw_dims_nhwc_strides(n: int, c: int, h: int, w: int) -> tuple[list[int], list[int]]:
    """cuDNN's description of a dense channels-last (N, H, W, C) tensor."""
    return [n, c, h, w], [h * w * c, 1, w * c, c]


@dataclass
class ConvGraph:
    """A validated, planned cuDNN graph and the uid of each of its buffers."""

    kind: GraphKind
    key: ConvKey
    graph: object  # cudnn.pygraph
    uids: dict[str, int]
    handle: object
    roles: tuple[str, ...] = field(init=False)
    uid_order: tuple[int, ...] = field(init=False)
    # Launch forms, fastest first: "native" hands the frontend's lowered C++ graph a uid -> pointer
    # map and the backend plan index in one call (about 8 us of host time on the H200, against 25
    # for the ordered form and more for the mapping form, which walks the variant pack in Python).
    # It uses the frontend's internal names, so any surprise there falls back to the public forms;
    # explain (CompiledConvGraph.describe) says which form runs.
    native_refusal: str | None = field(init=False, default=None)
    _native: dict = field(init=False, default_factory=dict)   # plan index -> (lowered graph, backend index, handle) or None
    _native_ran: set = field(init=False, default_factory=set)
    ordered_launch: bool = field(init=False, default=True)
    ordered_launch_refusal: str | None = field(init=False, default=None)
    _ordered_launch_ran: bool = field(init=False, default=False)

    def __post_init__(self):
        self.roles = GRAPH_ROLES[self.kind]
        self.uid_order = tuple(self.uids[role] for role in self.roles)

    @property
    def plan_count(self) -> int:
        return self.graph.get_execution_plan_count()

    def plan_name(self, index: int) -> str:
        return self.graph.get_plan_name_at_index(index)

    def build_plan(self, index: int) -> int:
        """Build plan `index` (kept alongside any other built plan); returns its workspace size in bytes."""
        self.graph.build_plan_at_index(index)
        return int(self.graph.get_workspace_size_plan_at_index(index))

    def operand_pointers(self, pointers: dict[str, int]) -> list[int]:
        """Device pointers in role order, from role -> device pointer."""
        try:
            return [pointers[role] for role in self.roles]
        except KeyError as e:
            raise ValueError(f"the {self.kind.value} graph needs buffers {self.roles}; missing {e}") from None

    def launch_form(self, index: int) -> str:
        if self._native.get(index):
            return "native (lowered graph, backend plan index)"
        why = f" (native refused: {self.native_refusal})" if self.native_refusal else ""
        if self.ordered_launch:
            return "ordered variant pack" + why
        return f"mapping variant pack (ordered refused: {self.ordered_launch_refusal})" + why

    def launch(self, index: int, operands: list[int], workspace_ptr: int) -> None:
        """Enqueue plan `index` (already built) on the handle's stream; never waits for the GPU."""
        native = self._native.get(index, False)
        if native is False:
            native = self._native[index] = self._native_launcher(index)
        if native is not None:
            lowered, backend_index, handle = native
            try:
                lowered._execute_plan_at_index(dict(zip(self.uid_order, operands)), workspace_ptr, backend_index,
                                               handle, None, None, None)
            except TypeError as e:      # the internal call's signature changed: the public forms from now on
                if index in self._native_ran:
                    raise
                self._native[index] = None
                self.native_refusal = f"{type(e).__name__}: {e}"
            else:
                self._native_ran.add(index)
                return
        workspace = workspace_ptr or None
        if self.ordered_launch:
            try:
                self.graph.execute_plan_at_index(operands, workspace, index=index, handle=self.handle, tensor_uids=self.uid_order)
                self._ordered_launch_ran = True
                return
            except (TypeError, ValueError, RuntimeError, NotImplementedError) as e:
                if self._ordered_launch_ran:  # the form works: this is a real failure
                    raise
                self.ordered_launch = False
                self.ordered_launch_refusal = f"{type(e).__name__}: {e}"
        self.graph.execute_plan_at_index(dict(zip(self.uid_order, operands)), workspace, index=index, handle=self.handle)

    def _native_launcher(self, index: int):
        """(lowered graph, backend plan index, backend handle) for plan `index`, or None (reason kept)."""
        g = self.graph
        try:
            from cudnn._handle import to_backend_handle
            if g._engine_for(g._plans[index]) is not None:
                raise LookupError("the plan is one of the frontend's Python engines")
            backend_index = g._materialize_backend_plan(index).cpp_index
            lowered = g._lowered_graph
            if backend_index is None or lowered is None or not hasattr(lowered, "_execute_plan_at_index"):
                raise LookupError("no lowered graph or backend plan index for this plan")
            return lowered, backend_index, to_backend_handle(self.handle)
        except Exception as e:  # noqa: BLE001  (internal names of the frontend: any change means no native form)
            self.native_refusal = f"{type(e).__name__}: {e}"
            return None


def _types(cudnn, kind: GraphKind, key: ConvKey) -> tuple:
    """(io, accumulation, float32) cudnn.data_type values of the `kind` graph for key.dtype, or
    CudnnGraphRejected where that graph is not built in that dtype (cudnn_dtypes.GRAPH_DTYPES)."""
    why = graph_refusal(kind.value, key.dtype)
    if why is not None:
        raise CudnnGraphRejected(kind.value, key, why)
    io, acc = data_types(cudnn, key.dtype)
    return io, acc, cudnn.data_type.FLOAT


def _plan(cudnn, g, key: ConvKey) -> None:
    """Validate, lower and list the plans of `g`; engines the key's math excludes (TF32 tensor cores
    for a strict float32 conv, down-converting ones for float32 and float64) are barred by their
    numerical notes, so they neither build nor get timed (cudnn_plans skips a barred index)."""
    g.validate()
    g.build_operation_graph()
    g.create_execution_plans([cudnn.heur_mode.A, cudnn.heur_mode.FALLBACK])
    notes = excluded_notes(cudnn, key.dtype, key.tf32)
    if notes:
        g.deselect_numeric_notes(notes)
    g.check_support()


def build_conv_graph(kind: GraphKind, key: ConvKey, handle) -> ConvGraph:
    """Describe, validate and plan the `kind` graph for `key`; CudnnGraphRejected if cuDNN will not."""
    kind = GraphKind(kind)
    if kind in (GraphKind.CONV_DGRAD, GraphKind.CONV_WGRAD):
        return build_conv_backward_graph(kind, key, handle)
    if kind is GraphKind.DBN_RELU:
        return build_dbn_graph(key, handle)
    _, cudnn = import_cuda_modules()
    io, acc, f32 = _types(cudnn, kind, key)
    n, p, q, k = key.out_shape
    try:
        g = cudnn.pygraph(
            name=f"lazytensor_{kind.value}",
            io_data_type=io,
            intermediate_data_type=acc,
            compute_data_type=acc,
            handle=handle,
        )
        x_dims, x_strides = nchw_dims_nhwc_strides(key.n, key.c, key.h, key.w)
        w_dims, w_strides = nchw_dims_nhwc_strides(key.k, key.c, key.r, key.s)
        y_dims, y_strides = nchw_dims_nhwc_strides(n, k, p, q)
        vec_dims, vec_strides = nchw_dims_nhwc_strides(1, k, 1, 1)
        x = g.tensor(name="x", dim=x_dims, stride=x_strides, data_type=io)
        w = g.tensor(name="w", dim=w_dims, stride=w_strides, data_type=io)
        conv = g.conv_fprop(
            image=x,
            weight=w,
            padding=list(key.padding),
            stride=list(key.stride),
            dilation=list(key.dilation),
            compute_data_type=acc,
            name="conv",
        )
        tensors = {"x": x, "w": w}
        if kind is GraphKind.CONV_SCALE_BIAS_RELU:
            scale = g.tensor(name="eq_scale", dim=vec_dims, stride=vec_strides, data_type=f32)
            bias = g.tensor(name="eq_bias", dim=vec_dims, stride=vec_strides, data_type=f32)
            scaled = g.mul(a=conv, b=scale, compute_data_type=f32, name="scale")
            shifted = g.add(a=scaled, b=bias, compute_data_type=f32, name="shift")
            y = g.relu(input=shifted, compute_data_type=f32, name="relu")
            tensors.update(eq_scale=scale, eq_bias=bias)
        else:
            y = conv
        y.set_output(True).set_data_type(io).set_dim(y_dims).set_stride(y_strides)
        tensors["y"] = y
        if kind is GraphKind.CONV_GENSTATS:
            total, total_sq = g.genstats(input=y, name="genstats")
            for t in (total, total_sq):
                t.set_output(True).set_data_type(f32).set_dim(vec_dims).set_stride(vec_strides)
            tensors.update(sum=total, sum_sq=total_sq)

        _plan(cudnn, g, key)
    except cudnn.cudnnGraphNotSupportedError as e:
        raise CudnnGraphRejected(kind.value, key, str(e).strip() or type(e).__name__) from e
    except (RuntimeError, ValueError) as e:
        # The binding reports a descriptor cuDNN cannot represent as RuntimeError; the frontend's
        # own checks raise ValueError. Either way there is no graph, and the caller falls back.
        raise CudnnGraphRejected(kind.value, key, f"{type(e).__name__}: {str(e).strip()}") from e
    uids = {role: int(tensors[role].get_uid()) for role in GRAPH_ROLES[kind]}
    return ConvGraph(kind, key, g, uids, handle)


def build_conv_backward_graph(kind: GraphKind, key: ConvKey, handle) -> ConvGraph:
    """The conv_dgrad (dy, w -> dx) or conv_wgrad (x, dy -> dw) graph for `key`, the forward conv's
    shapes. cuDNN cannot infer a backward output's dims (several inputs give one output size under
    a stride), so they are set here. dx and dw are written in the operands' dtype, like x and the
    weights: a float32 dw of float16 operands gets one slow plan only on cuDNN 9.19 (the accumulation
    is float32 either way)."""
    _, cudnn = import_cuda_modules()
    io, acc, f32 = _types(cudnn, kind, key)
    n, p, q, k = key.out_shape
    try:
        g = cudnn.pygraph(
            name=f"lazytensor_{kind.value}",
            io_data_type=io,
            intermediate_data_type=acc,
            compute_data_type=acc,
            handle=handle,
        )
        x_dims, x_strides = nchw_dims_nhwc_strides(key.n, key.c, key.h, key.w)
        w_dims, w_strides = nchw_dims_nhwc_strides(key.k, key.c, key.r, key.s)
        y_dims, y_strides = nchw_dims_nhwc_strides(n, k, p, q)
        conv = dict(padding=list(key.padding), stride=list(key.stride), dilation=list(key.dilation),
                    compute_data_type=acc)
        dy = g.tensor(name="dy", dim=y_dims, stride=y_strides, data_type=io)
        if kind is GraphKind.CONV_DGRAD:
            w = g.tensor(name="w", dim=w_dims, stride=w_strides, data_type=io)
            dx = g.conv_dgrad(loss=dy, filter=w, name="dgrad", **conv)
            dx.set_output(True).set_data_type(io).set_dim(x_dims).set_stride(x_strides)
            tensors = {"dy": dy, "w": w, "dx": dx}
        else:
            x = g.tensor(name="x", dim=x_dims, stride=x_strides, data_type=io)
            dw = g.conv_wgrad(image=x, loss=dy, name="wgrad", **conv)
            dw.set_output(True).set_data_type(io).set_dim(w_dims).set_stride(w_strides)
            tensors = {"x": x, "dy": dy, "dw": dw}
        _plan(cudnn, g, key)
    except cudnn.cudnnGraphNotSupportedError as e:
        raise CudnnGraphRejected(kind.value, key, str(e).strip() or type(e).__name__) from e
    except (RuntimeError, ValueError) as e:     # as build_conv_graph: no graph, the caller falls back
        raise CudnnGraphRejected(kind.value, key, f"{type(e).__name__}: {str(e).strip()}") from e
    uids = {role: int(tensors[role].get_uid()) for role in GRAPH_ROLES[kind]}
    return ConvGraph(kind, key, g, uids, handle)


def build_dbn_graph(key: ConvKey, handle) -> ConvGraph:
    """The dbn_relu graph over key.out_shape; CudnnGraphRejected if cuDNN will not take it."""
    kind = GraphKind.DBN_RELU
    _, cudnn = import_cuda_modules()
    half, acc, f32 = _types(cudnn, kind, key)
    n, p, q, k = key.out_shape
    try:
        g = cudnn.pygraph(name="lazytensor_dbn_relu", io_data_type=half, intermediate_data_type=acc,
                          compute_data_type=acc, handle=handle)
        y_dims, y_strides = nchw_dims_nhwc_strides(n, k, p, q)
        vec_dims, vec_strides = nchw_dims_nhwc_strides(1, k, 1, 1)
        dy = g.tensor(name="dy", dim=y_dims, stride=y_strides, data_type=half)
        mask = g.tensor(name="mask", dim=y_dims, stride=y_strides, data_type=cudnn.data_type.BOOLEAN)
        y = g.tensor(name="y", dim=y_dims, stride=y_strides, data_type=half)
        gamma, mean, inv_var = (g.tensor(name=name, dim=vec_dims, stride=vec_strides, data_type=f32)
                                for name in ("gamma", "mean", "inv_var"))
        dym = g.scale(input=dy, scale=mask, compute_data_type=acc, name="drelu")
        dx, dgamma, dbeta = g.batchnorm_backward(grad=dym, input=y, scale=gamma, mean=mean, inv_variance=inv_var,
                                                 name="dbn")
        dx.set_output(True).set_data_type(half).set_dim(y_dims).set_stride(y_strides)
        for t in (dgamma, dbeta):
            t.set_output(True).set_data_type(f32).set_dim(vec_dims).set_stride(vec_strides)
        _plan(cudnn, g, key)
    except cudnn.cudnnGraphNotSupportedError as e:
        raise CudnnGraphRejected(kind.value, key, str(e).strip() or type(e).__name__) from e
    except (RuntimeError, ValueError, TypeError, AttributeError) as e:   # as build_conv_graph: the caller falls back
        raise CudnnGraphRejected(kind.value, key, f"{type(e).__name__}: {str(e).strip()}") from e
    tensors = {"dy": dy, "mask": mask, "y": y, "gamma": gamma, "mean": mean, "inv_var": inv_var,
               "dx": dx, "dgamma": dgamma, "dbeta": dbeta}
    uids = {role: int(tensors[role].get_uid()) for role in GRAPH_ROLES[kind]}
    return ConvGraph(kind, key, g, uids, handle)
