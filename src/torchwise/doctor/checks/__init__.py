"""One module per doctor check, each a :class:`~torchwise.doctor.checks.base.Check`.

The registry (:mod:`torchwise.doctor.registry`) lists them with their public ids.
"""
