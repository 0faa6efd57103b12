"""The documentation of every ``torchwise run`` check, one module per family.

Each check is a class whose docstring is its user documentation (see
:mod:`torchwise.run.catalog`); the Example and Use instead sections are complete
scripts that the test suite runs. The code that detects a check lives in
``run/monitors/``.
"""
