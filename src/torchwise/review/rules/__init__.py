"""Rule families; each module registers its rules with ``@rule``.

Shared helpers for writing rules live in :mod:`torchwise.review.rules._util`.
"""
