"""Streaming (non-temporal) stores for generated numba kernels: `kernel_stream` (kernels/cpu/render_numba.py)
computes a block of results into small buffers on the stack (lt_block_buffer), then copies each buffer
to its destination with these stores (lt_stream_copy).

Design: docs/design/cpu-transcendentals.md, section "kernels/cpu/numba_stream.py".
"""
from __future__ import annotations

import platform

from llvmlite import ir
from numba import types
from numba.core import cgutils
from numba.extending import intrinsic
from numba.np.arrayobj import populate_array

VECTOR_BYTES = 32       # one AVX store; the destination offsets the launcher picks are multiples of it


@intrinsic
def lt_stream_copy(typingctx, dst, start, src):
    """dst[start:start + src.size] = src with streaming 32-byte stores. dst's element `start` must lie
    on a 32-byte boundary and src's size in bytes be a multiple of 32 (the launcher's guarantee)."""
    if not (isinstance(dst, types.Array) and isinstance(src, types.Array) and dst.dtype == src.dtype
            and isinstance(start, types.Integer)):
        return None

    def codegen(context, builder, sig, args):
        dst_t, _, src_t = sig.args
        dst_a = context.make_array(dst_t)(context, builder, args[0])
        src_a = context.make_array(src_t)(context, builder, args[2])
        start_v = context.cast(builder, args[1], sig.args[1], types.intp)
        itemsize = context.get_abi_sizeof(context.get_data_type(dst_t.dtype))
        nbytes = builder.mul(src_a.nitems, ir.Constant(src_a.nitems.type, itemsize))
        byte_ptr = ir.IntType(8).as_pointer()
        vector_ptr = ir.VectorType(ir.IntType(32), VECTOR_BYTES // 4).as_pointer()
        to = builder.bitcast(builder.gep(dst_a.data, [start_v], inbounds=True), byte_ptr)
        frm = builder.bitcast(src_a.data, byte_ptr)
        nontemporal = builder.module.add_metadata([ir.Constant(ir.IntType(32), 1)])
        zero, step = ir.Constant(nbytes.type, 0), ir.Constant(nbytes.type, VECTOR_BYTES)
        with cgutils.for_range_slice(builder, zero, nbytes, step) as (offset, _):
            value = builder.load(builder.bitcast(builder.gep(frm, [offset]), vector_ptr), align=itemsize)
            store = builder.store(value, builder.bitcast(builder.gep(to, [offset]), vector_ptr), align=VECTOR_BYTES)
            store.set_metadata("nontemporal", nontemporal)
        return context.get_dummy_value()
    return types.none(dst, start, src), codegen


@intrinsic
def lt_block_buffer(typingctx, like, size):
    """A C-contiguous array of `size` (a literal) elements of like's dtype in the calling function's stack
    frame, 32-byte aligned; each call site has its own, and the same one on every execution."""
    if not (isinstance(like, types.Array) and isinstance(size, types.IntegerLiteral)):
        return None
    count = size.literal_value
    array_t = types.Array(like.dtype, 1, "C")

    def codegen(context, builder, sig, args):
        element = context.get_data_type(like.dtype)
        with builder.goto_entry_block():
            data = builder.alloca(element, size=ir.Constant(ir.IntType(64), count))
            data.align = VECTOR_BYTES
        intp = context.get_value_type(types.intp)
        itemsize = ir.Constant(intp, context.get_abi_sizeof(element))
        array = context.make_array(array_t)(context, builder)
        populate_array(array, data=data, shape=[ir.Constant(intp, count)], strides=[itemsize],
                       itemsize=itemsize, meminfo=None)
        return array._getvalue()
    return array_t(like, size), codegen


@intrinsic
def lt_store_fence(typingctx):
    """Order this thread's streaming stores before its later stores: sfence on x86, as glibc's memcpy
    ends its streaming loop (LLVM's seq_cst fence is a locked instruction there), else a seq_cst fence."""
    def codegen(context, builder, sig, args):
        if platform.machine() in ("x86_64", "AMD64"):
            sfence = cgutils.get_or_insert_function(builder.module, ir.FunctionType(ir.VoidType(), []),
                                                    "llvm.x86.sse.sfence")
            builder.call(sfence, [])
        else:
            builder.fence("seq_cst")
        return context.get_dummy_value()
    return types.none(), codegen
