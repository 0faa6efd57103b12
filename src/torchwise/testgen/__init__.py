"""``torchwise tests``: a pytest module for a user's model, from measurements of it.

The file states the model's shape contract with symbolic dims (measured by
:mod:`torchwise.doc`), eval determinism, a state_dict round trip through
``torch.load(weights_only=True)``, float64/bfloat16 and CUDA/MPS moves, and the
:mod:`torchwise.doctor` checks that apply, with budgets in steps. Every test is
run once before it is written: what passes is kept, what does not is left out
with the reason. Read top to bottom:

- :mod:`~torchwise.testgen.style`: the project's test style and layout;
- :mod:`~torchwise.testgen.contract`: the doc's symbolic shapes as Python;
- :mod:`~torchwise.testgen.inputs_code`: the generated ``make_inputs``;
- :mod:`~torchwise.testgen.layout` and :mod:`~torchwise.testgen.render`: the text;
- :mod:`~torchwise.testgen.session`: importing the generated module as pytest would;
- :mod:`~torchwise.testgen.outputs`: forward's output tensors and their contract;
- :mod:`~torchwise.testgen.checks`: which doctor checks, with which options;
- :mod:`~torchwise.testgen.generate`: the steps, in order;
- :mod:`~torchwise.testgen.api`: :func:`write_tests`, writing and ``check``.

Public API::

    from torchwise.testgen import write_tests
    result = write_tests("model.py:Net", inputs=["f32[batch=8,3,32,32]"])
    result.text, result.tests, result.checks
"""

from torchwise.testgen.api import write_tests
from torchwise.testgen.result import CheckChoice, GeneratedTests, TestInfo

__all__ = ["CheckChoice", "GeneratedTests", "TestInfo", "write_tests"]
