"""The heavy ops: for each, the builders that make its steps, in the order they are tried.

A builder is build(node, backend, cut, out) -> (steps, replacement), or None to decline (the next
builder of the op is tried; the last never declines). `cut(a)` returns operand `a` with its own
heavy parts already planned; `replacement` is what the node becomes in the expression above it: a
Tensor holding its result, or an elementwise expression over such tensors that fuses into the next
kernel. `out` is the destination array when the node is the root of the plan and is one of
ROOT_WRITERS, else None.
"""
from __future__ import annotations

from lazytensor.plan.conv.cbr import build_batch_norm, build_conv2d, inference_graph_plan, relu_mask_plan
from lazytensor.plan.conv.cbr_backward import build_drelu, build_dx, build_sums
from lazytensor.plan.conv.conv_backward import build_dgrad, build_wgrad
from lazytensor.plan.conv.forward_saved import build_forward_saved
from lazytensor.plan.heavy.collectives import build_all_reduce
from lazytensor.plan.heavy.concatenate import build_concatenate
from lazytensor.plan.heavy.index_write import build_index_write, build_row_op
from lazytensor.plan.heavy.fft import build_fft
from lazytensor.plan.heavy.linalg import build_linalg
from lazytensor.plan.heavy.mask_gather import build_mask_expand, build_mask_gather
from lazytensor.plan.heavy.materialize import build_materialize
from lazytensor.plan.heavy.matmul import build_bias_gradient, build_matmul, build_transposed_matmul
from lazytensor.plan.heavy.pooling import build_pool, build_pool_backward
from lazytensor.plan.heavy.reduce import build_reduce
from lazytensor.plan.heavy.region_write import build_region_write
from lazytensor.plan.heavy.scans import build_scan
from lazytensor.plan.heavy.scatter import build_scatter
from lazytensor.plan.heavy.segments import build_segment_broadcast, build_segment_sums

HEAVY = {
    "reduce": (build_bias_gradient, build_reduce),
    "materialize": (build_transposed_matmul, build_materialize),
    "matmul": (build_matmul,),
    "max_pool2d": (build_pool,),
    "avg_pool2d": (build_pool,),
    "max_pool2d_backward": (build_pool_backward,),
    "avg_pool2d_backward": (build_pool_backward,),
    "scan": (build_scan,),
    "concatenate": (build_concatenate,),
    "index_write": (build_index_write,),
    "row_gather": (build_row_op,),
    "row_scatter_add": (build_row_op,),
    "mask_gather": (build_mask_gather,),
    "mask_expand": (build_mask_expand,),
    "scatter": (build_scatter,),
    "conv2d": (build_conv2d,),
    "batch_norm": (build_batch_norm,),
    "conv2d_backward_data": (build_dgrad,),
    "conv2d_backward_filter": (build_wgrad,),
    "cbr_dbn_sums": (build_sums,),
    "cbr_dbn_dx": (build_dx,),
    "cbr_drelu": (build_drelu,),
    "forward_saved": (build_forward_saved,),
    "linalg": (build_linalg,),
    "fft": (build_fft,),
    "all_reduce": (build_all_reduce,),
    "region_write": (build_region_write,),
    "segment_sums": (build_segment_sums,),
    "segment_broadcast": (build_segment_broadcast,),
}

# The heavy ops whose step can write the plan's destination directly.
ROOT_WRITERS = frozenset({
    "reduce", "matmul", "max_pool2d", "avg_pool2d", "max_pool2d_backward", "avg_pool2d_backward", "scan",
    "concatenate", "index_write", "row_gather", "row_scatter_add", "mask_gather", "mask_expand", "scatter",
    "conv2d", "conv2d_backward_data", "conv2d_backward_filter", "cbr_dbn_sums", "cbr_dbn_dx", "cbr_drelu",
    "linalg", "fft", "segment_sums", "segment_broadcast",
})

# Whole-plan patterns, tried on the root first, in order: (name, match(root, out, backend, cutter) ->
# steps or None), `cutter` the planner's (lazytensor.plan.planner.cutter).
PATTERNS = (
    ("cbr inference: one cuDNN graph", inference_graph_plan),
    ("cbr training: apply + relu + mask in one kernel", relu_mask_plan),
)
