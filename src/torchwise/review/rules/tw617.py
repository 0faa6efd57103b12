"""TW617 action-space-unseeded (checkpoints).

The class docstring is its user documentation (`torchwise rules TW617`).
"""

from __future__ import annotations

import ast

from torchwise.findings import Severity
from torchwise.review.engine.context import Context
from torchwise.review.registry import Rule, rule


@rule
class ActionSpaceUnseeded(Rule):
    """## What it does
    Flags `env.action_space.sample()` (and `observation_space.sample()`) in a
    file that seeds its runs (`torch.manual_seed`, `env.reset(seed=...)`, a
    `--seed` option) when nothing in it seeds that space
    (`env.action_space.seed(...)`).

    ## Why is this bad?
    A gym or gymnasium space draws from its own generator: neither
    `env.reset(seed=...)` nor torch's, NumPy's or Python's seed reaches it.
    The random exploration steps (the warm-up of DQN, SAC and TD3, epsilon's
    random actions) differ on every run, so the seeded experiment does not
    repeat, and two runs "with the same seed" fill their replay buffers
    differently.

    ## Example
    ```python
    import gymnasium as gym

    env = gym.make("CartPole-v1")
    state, _ = env.reset(seed=0)
    action = env.action_space.sample()
    ```

    ## Use instead
    ```python
    import gymnasium as gym

    env = gym.make("CartPole-v1")
    state, _ = env.reset(seed=0)
    env.action_space.seed(0)
    action = env.action_space.sample()
    ```
    """

    code = "TW617"
    name = "action-space-unseeded"
    family = "checkpoints"
    severity = Severity.WARNING
    impact = "reproducibility"
    in_test_modules = False
    message = (
        "`{text}` draws from the space's own generator, which this seeded script never seeds "
        "(`env.reset(seed=...)` does not reach it): call `{space}.seed(seed)` once"
    )
    call_methods = frozenset({"sample"})
    needs_text = ("action_space", "observation_space")

    def visit_Call(self, node: ast.Call, ctx: Context) -> None:
        func = node.func
        if not (
            isinstance(func, ast.Attribute)
            and func.attr == "sample"
            and isinstance(func.value, ast.Attribute)
            and func.value.attr in ("action_space", "observation_space")
        ):
            return
        source = ctx.source
        if f"{func.value.attr}.seed(" in source:
            return
        if "seed" not in source:
            return  # a script that does not seed anything: TW604's business
        ctx.report(self, node, text=ctx.text(node), space=ctx.text(func.value))
