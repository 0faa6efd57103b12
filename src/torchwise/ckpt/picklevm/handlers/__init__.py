"""One handler per pickle opcode, grouped as pickletools groups them.

The modules are listed, in order, in
:data:`torchwise.ckpt.picklevm.registry.HANDLER_MODULES`; the registry imports
them and collects the functions labelled with ``@opcode``.
"""
