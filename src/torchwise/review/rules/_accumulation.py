"""Gradient accumulation (TW150-TW152): a loop that backpropagates every
batch and steps its optimizer every N batches (``if (i + 1) % N == 0:``).

Between two steps the ``.grad`` of each parameter is the sum of N
micro-batches' gradients: the step must see that whole sum, once, and each
micro-batch's share must be 1/N of a batch's for the update to be a batch's.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from torchwise.review.engine import effects as E
from torchwise.review.engine import facts as F

#: ``(i + 1) % accum_steps == 0``: the divisor is the accumulation length.
_MODULO = re.compile(r"%\s*(?P<divisor>[\w.\[\]'\"()]+?)\s*==\s*0\b")
CLIPPERS = frozenset(
    {
        "torch.nn.utils.clip_grad_norm_",
        "torch.nn.utils.clip_grad_value_",
        "torch.nn.utils.clip_grad.clip_grad_norm_",
        "torch.nn.utils.clip_grad.clip_grad_value_",
    }
)


@dataclass(frozen=True)
class Accumulation:
    guard: str  # the condition the step runs under
    divisor: str  # its accumulation length, as written
    steps: tuple[F.CallEvent, ...]
    backwards: tuple[F.CallEvent, ...]  # the backward of every micro-batch

    def every_batch(self, call: F.CallEvent) -> bool:
        """Whether ``call`` runs on every micro-batch of the accumulating path:
        under no ``% N`` test (``if i % N == 0: optimizer.zero_grad()`` at the
        top of a window is the same schedule written the other way), and not
        on a path that cannot run with the step (the `else` of `if
        accumulation_steps > 1:`)."""
        if any(_MODULO.search(test) for test, _ in call.branch):
            return False
        return not F.exclusive(call.branch, self.steps[0].branch)


def accumulation(loop: F.LoopFacts) -> Accumulation | None:
    """The loop's accumulation, if it accumulates: every backward runs on
    every batch and the optimizer steps under a ``% N == 0`` test."""
    for step in loop.calls:
        if not E.is_optimizer_step(step) or step.receiver_kind != F.OPTIMIZER:
            continue
        for test, holds in step.branch:
            match = _MODULO.search(test)
            if not holds or match is None:
                continue
            divisor = match.group("divisor").strip("()")
            if divisor.isdigit() and int(divisor) <= 1:
                continue
            backwards = [
                call
                for call in loop.calls
                if E.learns(call) and not F.exclusive(call.branch, step.branch)
            ]
            every = [call for call in backwards if (test, True) not in call.branch]
            if not every or len(every) != len(backwards):
                return None  # a backward under the test: a schedule (n_critic), not accumulation
            steps = (step, *(c for c in loop.calls if E.is_optimizer_step(c) and c is not step))
            return Accumulation(test, divisor, steps, tuple(every))
    return None
