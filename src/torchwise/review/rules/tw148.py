"""TW148 gym-step-api (training).

The class docstring is its user documentation (`torchwise rules TW148`).
"""

from __future__ import annotations

import ast
from typing import Any, TypeVar

from torchwise.findings import Severity
from torchwise.review.engine import facts as F
from torchwise.review.engine import gym
from torchwise.review.engine.context import Context
from torchwise.review.engine.dispatch import subtree
from torchwise.review.engine.syntax import name_uses
from torchwise.review.registry import Rule, rule

_T = TypeVar("_T", bound=tuple[Any, ...])
#: Calls that keep a transition for later learning (a replay buffer, a rollout).
_STORES = {"push", "add", "append", "store", "insert", "store_transition", "remember", "extend"}


@rule
class GymStepApi(Rule):
    """## What it does
    For an environment made by `gym.make` or `gymnasium.make` (or wrapped by
    their wrappers), flags code written for the pre-0.26 API and code that
    loses the difference between the end of an episode and a time limit:

    - `obs, reward, done, info = env.step(a)` (four values), `obs =
      env.reset()` (one value) and `env.seed(n)`, which fail or misbehave on current gym and
      gymnasium (`step` returns five values, `reset` returns `(obs, info)`).
      An error where the environment is gymnasium's or the project uses the
      new API elsewhere (a five-value `step`, a pair from `reset`); code using
      `gym` with the old API throughout is written for gym < 0.26 and gets a
      hint;
    - `obs, reward, terminated, _, _ = env.step(a)`: the time-limit flag is
      dropped, so episodes end only when the task ends;
    - `done = terminated or truncated` stored with a transition (a replay
      buffer's `push`/`add`/`append`): a time limit becomes a terminal state.

    ## Why is this bad?
    The four-value unpacking raises `ValueError: too many values to unpack`,
    and the one-value `reset` hands a tuple to the policy. Dropping
    `truncated` makes CartPole's 500-step limit never end an episode (the
    environment keeps stepping past its end). Storing a truncation as
    terminal stops the value target from bootstrapping at states that are
    not terminal at all (Pardo et al., "Time limits in reinforcement
    learning"): the value function learns that the world ends at step 500.

    ## Example
    ```python
    import gymnasium as gym

    env = gym.make("CartPole-v1")
    state, _ = env.reset()
    state, reward, terminated, _, _ = env.step(env.action_space.sample())
    ```

    ## Use instead
    ```python
    import gymnasium as gym

    env = gym.make("CartPole-v1")
    state, _ = env.reset()
    state, reward, terminated, truncated, _ = env.step(env.action_space.sample())
    episode_over = terminated or truncated
    ```
    """

    code = "TW148"
    name = "gym-step-api"
    family = "training"
    severity = Severity.ERROR
    impact = "results"
    message = "{problem}"
    needs_text = ("gym",)

    def __init__(self) -> None:
        self.done_flags: list[tuple[ast.AST, str]] = []  # (node, name) of `done = a or b`
        #: (node, terminated, truncated) of five-value unpackings, judged at the end
        #: of their function (is `truncated` read later?).
        self.unpacked: list[tuple[ast.AST, str, str]] = []
        #: Old-API lines (node, library, problem), judged at the end of the module.
        self.old_api: list[tuple[ast.AST, str, str]] = []
        self.file_marks: set[str] = set()

    def visit_Assign(self, node: ast.Assign, ctx: Context) -> None:
        if len(node.targets) != 1:
            return
        target, value = node.targets[0], node.value
        if _merges_truncation(value, ctx) and isinstance(target, ast.Name):
            self.done_flags.append((node, target.id))
            return
        call = gym.env_call(node, ctx)
        if call is None:
            return
        mark = gym.written_for(node, ctx)
        if mark is not None:
            self.file_marks.add(mark)
        library, method, count = call
        if method == "reset" and count == 1:
            self.old_api.append(
                (
                    node,
                    library,
                    "`reset()` returns `(obs, info)` on gym >= 0.26 and gymnasium: "
                    "unpack it (`obs, info = env.reset()`)",
                )
            )
        elif method == "step" and count == 4:
            self.old_api.append(
                (
                    node,
                    library,
                    "`step()` returns five values on gym >= 0.26 and gymnasium "
                    "(`obs, reward, terminated, truncated, info`): this raises ValueError",
                )
            )
        elif method == "step" and count == 5:
            self._dropped_truncation(node, target, ctx)

    def visit_Call(self, node: ast.Call, ctx: Context) -> None:
        func = node.func
        if not isinstance(func, ast.Attribute) or func.attr != "seed":
            return
        library = gym.env_library(func.value, ctx)
        if library is not None:
            problem = (
                "`env.seed()` was removed in gym 0.26 and gymnasium (AttributeError): "
                "seed with `env.reset(seed=...)`"
            )
            self.old_api.append((node, library, problem))

    def _dropped_truncation(self, node: ast.Assign, target: ast.expr, ctx: Context) -> None:
        assert isinstance(target, (ast.Tuple, ast.List))
        terminated, truncated = target.elts[2], target.elts[3]
        if not isinstance(truncated, ast.Name) or not isinstance(terminated, ast.Name):
            return
        self.unpacked.append((node, terminated.id, truncated.id))

    def leave_function(self, function: F.FunctionFacts, ctx: Context) -> None:
        self._judge(function.node, function.calls, ctx)

    def leave_module(self, module: F.ModuleFacts, ctx: Context) -> None:
        self._judge(module.node, module.calls, ctx)
        new_api = gym.NEW_API in self.file_marks or gym.NEW_API in ctx.project.written_for()
        for node, library, problem in self.old_api:
            if library == "gymnasium" or new_api:
                ctx.report(self, node, problem=problem)
            else:
                ctx.report(
                    self,
                    node,
                    severity=Severity.INFO,
                    problem=f"{problem}; the project uses the old API throughout, so it "
                    "is written for gym < 0.26: pin it (`gym<0.26`) or move to gymnasium",
                )

    def _judge(self, scope: ast.AST, calls: list[F.CallEvent], ctx: Context) -> None:
        unpacked, self.unpacked = _split(self.unpacked, scope)
        done_flags, self.done_flags = _split(self.done_flags, scope)
        if not unpacked and not done_flags:
            return
        uses = name_uses(scope)
        for node, terminated, truncated in unpacked:
            line = getattr(node, "lineno", 0)
            start = _outermost_loop_start(scope, node) or line
            # read after the step, or anywhere in its loop (`while not (terminated or truncated)`)
            later = [at for at, _, store in uses.get(truncated, []) if not store and at >= start]
            if truncated != "_" and later:
                continue  # read: kept
            if terminated == "_":
                continue  # neither flag is read: the loop ends some other way (a step count)
            if _bounded_otherwise(scope, node, terminated):
                continue  # `for t in range(200)`, `while not done and t < 200`: a limit of its own
            loop = _episode_loop(scope, node, terminated)
            where = "" if loop is None else f" (the loop at line {loop})"
            ctx.report(
                self,
                node,
                severity=Severity.WARNING,
                problem=f"the time-limit flag is dropped: episodes end only when "
                f"`{terminated}`{where}, and a time limit never ends one (read `truncated` too)",
                loop_line=str(loop or line),
            )
        stores = [c for c in calls if c.method in _STORES]
        for node, name in done_flags:
            line = getattr(node, "lineno", 0)
            for call in stores:
                at = call.line
                passed = [
                    ctx.dotted(arg) for arg in subtree(call.node) if isinstance(arg, ast.Name)
                ]
                if at > line and name in passed:
                    ctx.report(
                        self,
                        node,
                        severity=Severity.WARNING,
                        problem=f"`{name}` also counts a time limit (`truncated`), and line "
                        f"{at} stores it with the transition: a truncated episode becomes "
                        "terminal and the value target stops bootstrapping; store `terminated`",
                    )
                    break


def _bounded_otherwise(scope: ast.AST, step: ast.AST, terminated: str) -> bool:
    """Whether the episode has a bound besides the termination flag: the
    ``while`` that reads the flag also compares (``while not done and t < 200``),
    or, with no such ``while``, a ``for`` loop around the step counts the steps."""
    line = getattr(step, "lineno", 0)
    loops = [
        node
        for node in subtree(scope)
        if isinstance(node, (ast.For, ast.While)) and node.lineno < line <= (node.end_lineno or 0)
    ]
    episodes = [
        node
        for node in loops
        if isinstance(node, ast.While)
        and terminated in {n.id for n in subtree(node.test) if isinstance(n, ast.Name)}
    ]
    if episodes:
        episode = max(episodes, key=lambda node: node.lineno)
        return any(isinstance(node, ast.Compare) for node in subtree(episode.test))
    return any(isinstance(node, ast.For) for node in loops)


def _episode_loop(scope: ast.AST, step: ast.AST, terminated: str) -> int | None:
    """The line of the innermost ``while`` around ``step`` whose test reads
    ``terminated`` (``while not done:``)."""
    line = getattr(step, "lineno", 0)
    found = None
    for node in subtree(scope):
        if not isinstance(node, ast.While) or not node.lineno < line <= (node.end_lineno or 0):
            continue
        names = {n.id for n in subtree(node.test) if isinstance(n, ast.Name)}
        if terminated in names and (found is None or node.lineno > found):
            found = node.lineno
    return found


def _split(items: list[_T], scope: ast.AST) -> tuple[list[_T], list[_T]]:
    """(the items made in ``scope``, the others)."""
    start, end = getattr(scope, "lineno", 0), getattr(scope, "end_lineno", None)
    inside = [
        item for item in items if end is None or start <= getattr(item[0], "lineno", 0) <= end
    ]
    return inside, [item for item in items if item not in inside]


def _merges_truncation(value: ast.expr, ctx: Context) -> bool:
    """``terminated or truncated`` (or ``|``, ``np.logical_or``) of names that say so."""
    names: list[str] = []
    if isinstance(value, ast.BoolOp) and isinstance(value.op, ast.Or):
        names = [ctx.text(v) for v in value.values]
    elif isinstance(value, ast.BinOp) and isinstance(value.op, ast.BitOr):
        names = [ctx.text(value.left), ctx.text(value.right)]
    elif isinstance(value, ast.Call) and (ctx.call_name(value) or "").endswith("logical_or"):
        names = [ctx.text(arg) for arg in value.args]
    lowered = [name.lower() for name in names]
    return any("trunc" in name for name in lowered) and any("term" in name for name in lowered)


def _outermost_loop_start(scope: ast.AST, node: ast.AST) -> int | None:
    """The first line of the outermost loop around ``node`` in ``scope``: a loop's test
    is read again after each step, so a read there comes after the step too."""
    line = getattr(node, "lineno", 0)
    starts = [
        loop.lineno
        for loop in ast.walk(scope)
        if isinstance(loop, (ast.While, ast.For, ast.AsyncFor))
        and loop.lineno <= line <= (loop.end_lineno or loop.lineno)
    ]
    return min(starts) if starts else None
