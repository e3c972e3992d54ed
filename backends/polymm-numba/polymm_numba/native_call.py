"""Calling a compiled Numba function by its address, so that it is compiled once.

Numba links every jitted function a kernel calls into that kernel's own module and optimises
and emits it again there. The packed kernel's body (packing, register tiles: most of a cold
start's compile time) would be built once more for every driver that calls it: the serial
driver, the batch driver, the column slabs, split-K. Compiled on its own, with an explicit
signature, and called through its address (:func:`call_native`), it is built once per dtype
and tile, and each driver is a few loops that compile in a fraction of a second (2-core Xeon,
2026-11-28, float32: the batch driver 1.9 s inlined, 0.2 s calling by address; the product's
speed unchanged).

The caller must hand exactly the argument types the function was compiled for: the same
arrays' dtype and dimensions (layout and alignment may differ: Numba's array structure is the
same), integers (cast to int64 here). :func:`address` gives the address of a dispatcher's one
compiled signature. The backend (``CPUBackend._compiled``) keeps each body's dispatcher alive and
binds its address to the drivers: as their last argument, inside split-K's chunk parameters, or
first (``functools.partial``, a call cheaper than a lambda's) for the batched dots, whose calls
take a few microseconds.
"""

from __future__ import annotations

from numba import types
from numba.core import cgutils
from numba.extending import intrinsic

__all__ = ["address", "call_native"]


def address(dispatcher) -> int:
    """The native entry of ``dispatcher``'s one compiled signature (Numba's calling convention)."""
    (cres,) = dispatcher.overloads.values()
    return cres.library.get_pointer_to_function(cres.fndesc.llvm_func_name)


def _native_type(t):
    """The callee's type for an argument of type ``t``: integers as int64, the rest as they are."""
    if isinstance(t, (types.Integer, types.IntegerLiteral)):
        return types.int64
    return t


@intrinsic
def call_native(typingctx, fn, args):
    """``fn(*args)`` where ``fn`` is the int64 address of a Numba-compiled function returning
    nothing (:func:`address`); an exception it raises propagates to the caller."""
    if not isinstance(fn, types.Integer) or not isinstance(args, types.BaseTuple):
        return None
    wanted = tuple(_native_type(t) for t in args.types)

    def codegen(context, builder, signature, llargs):
        fn_address, packed = llargs
        values = [
            context.cast(builder, builder.extract_value(packed, i), args.types[i], wanted[i])
            for i in range(len(wanted))
        ]
        call_conv = context.call_conv
        fnty = call_conv.get_function_type(types.none, wanted)
        callee = builder.inttoptr(fn_address, fnty.as_pointer())
        result = cgutils.alloca_once(builder, call_conv.get_return_type(types.none).pointee)
        builder.store(cgutils.get_null_value(result.type.pointee), result)
        excinfo = cgutils.alloca_once(builder, fnty.args[1].pointee, name="excinfo")
        arguments = list(call_conv._get_arg_packer(wanted).as_arguments(builder, values))
        code = builder.call(callee, [result, excinfo, *arguments])
        status = call_conv._get_return_status(builder, code, builder.load(excinfo))
        with cgutils.if_unlikely(builder, status.is_error):
            call_conv.return_status_propagate(builder, status)
        return context.get_dummy_value()

    return types.void(fn, args), codegen
