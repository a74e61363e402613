"""Every VM opcode's handler; importing this package registers them all (``handlers.HANDLERS``)."""

from engine.runtime.vm.ops import arith, control, memory  # noqa: F401
