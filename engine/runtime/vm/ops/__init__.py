"""Every VM opcode's handler; importing this package registers them all (``handlers.HANDLERS``)."""

from engine.runtime.vm.ops import arith, buffers, constants, control, global_access, lists, select  # noqa: F401
