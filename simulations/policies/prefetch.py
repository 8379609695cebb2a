"""``prefetch``: a compiled kernel's request to bring an array element into the caches ahead of its use (an LLVM
intrinsic); moved verbatim from :mod:`simulations.policies.kernels`, whose :func:`counterfactual_step` calls it."""

from __future__ import annotations

from llvmlite import ir
from numba import types
from numba.core import cgutils
from numba.extending import intrinsic, overload

__all__ = ["prefetch"]


@intrinsic
def _prefetch(typingctx, a, x):
    """``llvm.prefetch`` (read, keep in all cache levels) of element ``x`` of the C-contiguous array ``a``."""
    if not isinstance(a, types.Array) or not isinstance(x, types.Integer):
        return None

    def codegen(context, builder, signature, args):
        ary = context.make_array(signature.args[0])(context, builder, args[0])
        byte = ir.IntType(8).as_pointer()
        i32 = ir.IntType(32)
        fn = cgutils.get_or_insert_function(builder.module, ir.FunctionType(ir.VoidType(), [byte, i32, i32, i32]),
                                            "llvm.prefetch.p0i8")
        where = builder.bitcast(builder.gep(ary.data, [args[1]]), byte)
        builder.call(fn, [where, ir.Constant(i32, 0), ir.Constant(i32, 3), ir.Constant(i32, 1)])
        return context.get_dummy_value()

    return types.void(a, x), codegen


def prefetch(a, x):
    """Ask the CPU to bring element ``x`` of the C-contiguous array ``a`` (a flat index; no bounds check, none
    needed: a prefetch never faults) into the caches ahead of its use; compiled code only (as plain Python, with
    ``NUMBA_DISABLE_JIT=1``, it does nothing). Changes no number, only when memory is read."""


@overload(prefetch, jit_options={"cache": True})
def _prefetch_overload(a, x):
    def impl(a, x):
        _prefetch(a, x)

    return impl
