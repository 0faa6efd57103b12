"""Which doctor checks the test file runs, with which options, and why.

A check goes into the file when it applies to the model and passes on it now,
run exactly as the file will run it (a fresh ``build_model()``, ``make_inputs()``,
the same options); the file then fails when a later change breaks what it
measured. A check that fails or warns now is left out, and the user is told:
a test file that fails the day it is written tests nothing. Options follow the
model: ``causal_dim`` when its output at position t ignores later positions
(measured, or asked for with ``--causal``), ``batch_dim`` for time-first inputs,
the user's loss, and an ``overfit-batch`` budget in steps from the steps it
needed, so no verdict depends on the clock. Only the public doctor API is used
(``check``, ``CHECK_IDS``, ``Options``).
"""

from __future__ import annotations

import dataclasses
import inspect
import time
from typing import TYPE_CHECKING, Any

from torchwise.errors import TorchwiseError
from torchwise.testgen.contract import leaf_specs
from torchwise.testgen.result import CheckChoice

if TYPE_CHECKING:
    from torchwise.doctor import CheckResult
    from torchwise.target import ResolvedTarget
    from torchwise.testgen.generate import Request, _Found
    from torchwise.testgen.render import Plan
    from torchwise.testgen.session import Session

#: Checks left out unless asked for by name, and why (short: it is also a comment in the file).
NOT_BY_DEFAULT = {
    "eval-determinism": "test_eval_is_deterministic covers it",
    "amp-drift": "autocast numerics differ between machines",
    "exportable": "a deployment choice; opt in with --checks exportable",
}
#: Symbol names that mark a sequence dim, where a causal model must not look ahead.
SEQUENCE_NAMES = ("seq", "length", "time", "token", "step")
#: Class-name endings of causal language models (a leak there deserves a warning).
CAUSAL_CLASSES = ("ForCausalLM", "LMHeadModel", "GPT")
#: Options of doctor versions that also stop a check after some seconds, per check.
#: A test verdict must not depend on the machine's load: they are set out of reach.
TIME_BUDGETS = {"overfit-batch": "overfit_budget_s", "exportable": "export_budget_s"}
NO_TIME_LIMIT = 86_400.0  # a day


def choose(
    session: Session, plan: Plan, rt: ResolvedTarget, request: Request, found: _Found
) -> list[CheckChoice]:
    """Run the candidate checks as the file would; set ``plan.checks``, ``plan.left_out`` and
    ``plan.doctor_options``; return every check with the reason it is in or out."""
    from torchwise.doctor import CHECK_IDS

    candidates = _candidates(request, CHECK_IDS)
    runner = _Runner(session, plan, found)
    choices: dict[str, CheckChoice] = {}
    options: dict[str, Any] = {}
    if request.loss != "auto":
        options["loss"] = request.loss
    if rt.batch_dim:
        if _doctor_accepts("batch_dim"):
            options["batch_dim"] = rt.batch_dim
        elif "batch-independence" in candidates:
            candidates.remove("batch-independence")
            choices["batch-independence"] = CheckChoice(
                "batch-independence",
                False,
                f"this torchwise's doctor assumes the batch is dim 0, not {rt.batch_dim}",
            )
    for check_id, option in TIME_BUDGETS.items():
        if check_id in candidates and _doctor_accepts(option):
            options[option] = NO_TIME_LIMIT
    if "causal-leak" in candidates:
        candidates.remove("causal-leak")
        choices["causal-leak"] = _causal(runner, plan, rt, request, options)
    if "overfit-batch" in candidates:
        candidates.remove("overfit-batch")
        choices["overfit-batch"] = _overfit(runner, options)
    for check_id in candidates:
        if check_id in NOT_BY_DEFAULT and request.checks is None:
            choices[check_id] = CheckChoice(check_id, False, NOT_BY_DEFAULT[check_id])
        else:
            choices[check_id] = runner.judge(check_id, options)
    ordered = [choices[c] for c in CHECK_IDS if c in choices]
    plan.checks = [c.id for c in ordered if c.included]
    plan.left_out = [(c.id, _short(c)) for c in ordered if not c.included]
    plan.doctor_options = {k: options[k] for k in sorted(options)}
    if "overfit-batch" not in plan.checks:
        plan.doctor_options.pop("overfit_steps", None)
    for check_id, option in TIME_BUDGETS.items():
        if check_id not in plan.checks:
            plan.doctor_options.pop(option, None)
    return ordered


def _candidates(request: Request, check_ids: tuple[str, ...]) -> list[str]:
    if request.checks is None:
        return list(check_ids)
    unknown = [c for c in request.checks if c not in check_ids]
    if unknown:
        raise TorchwiseError(
            f"unknown check id(s): {', '.join(unknown)}", hint="valid ids: " + ", ".join(check_ids)
        )
    wanted = set(request.checks) | ({"causal-leak"} if request.causal_dim is not None else set())
    return [c for c in check_ids if c in wanted]


def _doctor_accepts(option: str) -> bool:
    """Whether the installed doctor takes ``option`` (its ``Options`` fields, or ``check``'s
    keywords in versions before ``Options``)."""
    import torchwise.doctor as doctor

    options = getattr(doctor, "Options", None)
    if options is not None and dataclasses.is_dataclass(options):
        return option in {f.name for f in dataclasses.fields(options)}
    return option in inspect.signature(doctor.check).parameters


class _Runner:
    """Runs one check on a fresh model and batch from the generated helpers."""

    def __init__(self, session: Session, plan: Plan, found: _Found) -> None:
        self.build = session.get(plan.names.build_model)
        self.make = session.get(plan.names.make_inputs)
        self.title = plan.title
        self.found = found
        self.seconds = 0.0
        #: the evidence of the last check judged
        self.evidence: dict[str, Any] = {}

    def run(self, check_id: str, options: dict[str, Any]) -> CheckResult | str:
        from torchwise.doctor import check

        args, kwargs = self.make()
        start = time.perf_counter()
        try:
            report = check(self.build(), args, [check_id], kwargs=kwargs, **options)
        except TorchwiseError as exc:
            return exc.message
        except Exception as exc:  # a check that breaks (a doctor bug) leaves only itself out
            return f"{type(exc).__name__}: {exc}"
        finally:
            self.seconds = time.perf_counter() - start
        return report[check_id]

    def judge(self, check_id: str, options: dict[str, Any]) -> CheckChoice:
        """In the file when it passes now; otherwise out, with doctor's words for why."""
        result = self.run(check_id, options)
        if isinstance(result, str):
            self.evidence = {}
            return CheckChoice(check_id, False, f"doctor could not run it: {result}")
        self.evidence = dict(result.evidence)
        status = result.status.value
        if status == "pass":
            self.found.seconds += self.seconds
            return CheckChoice(check_id, True, f"passed when generated: {result.summary}", status)
        if status == "skip":
            return CheckChoice(check_id, False, f"does not apply: {result.summary}", status)
        self.found.warnings.append(
            f"doctor's {check_id} {'fails' if status == 'fail' else 'warns'} on {self.title} as "
            f"it is ({result.summary}); it is left out of the tests until that is fixed"
        )
        return CheckChoice(check_id, False, f"{status} when generated: {result.summary}", status)


def _causal(
    runner: _Runner, plan: Plan, rt: ResolvedTarget, request: Request, options: dict[str, Any]
) -> CheckChoice:
    dim = request.causal_dim if request.causal_dim is not None else _sequence_dim(plan, rt)
    if dim is None:
        return CheckChoice(
            "causal-leak", False, "no sequence input (pass --causal DIM for a causal model)"
        )
    choice = runner.judge("causal-leak", {**options, "causal_dim": dim})
    if choice.included:
        options["causal_dim"] = dim
        reason = f"causal along dim {dim}: {choice.reason}"
        return dataclasses.replace(choice, reason=reason)
    if request.causal_dim is not None or choice.status not in ("fail", "warn"):
        return choice
    # Measured, not asked for: a model that looks ahead is simply not causal. Take back
    # the warning judge() gave, unless the class says it is a causal language model.
    runner.found.warnings.pop()
    if type(rt.model).__name__.endswith(CAUSAL_CLASSES):
        runner.found.warnings.append(
            f"{plan.title} looks like a causal language model, but its output at position t "
            f"depends on later positions along dim {dim}; causal-leak is left out (pass "
            f"--causal {dim} to see doctor's diagnosis)"
        )
    return CheckChoice(
        "causal-leak",
        False,
        f"not a causal model: the output at position t depends on later "
        f"positions along dim {dim} (pass --causal {dim} if it should not)",
        choice.status,
    )


def _sequence_dim(plan: Plan, rt: ResolvedTarget) -> int | None:
    """The input dim of a sequence symbol (``seq_len``), token inputs first."""
    symbols = {s.var: s for s in plan.contract.symbols if not s.is_batch}
    leaves = list(zip(leaf_specs(rt.input_specs), plan.contract.input_dims, strict=False))
    leaves.sort(key=lambda pair: pair[0].dtype not in ("i64", "i32"))
    for _, dims in leaves:
        for index, dim in enumerate(dims):
            symbol = symbols.get(dim)
            if symbol is not None and symbol.label.lower().startswith(SEQUENCE_NAMES):
                return index
    return None


def _overfit(runner: _Runner, options: dict[str, Any]) -> CheckChoice:
    """Run with doctor's default budget; the file's budget is twice the steps it took
    (the run is seeded, so it takes as many again; the margin covers other machines)."""
    choice = runner.judge("overfit-batch", options)
    steps = runner.evidence.get("steps")
    if choice.included and isinstance(steps, int):
        options["overfit_steps"] = max(2 * steps, steps + 10)
    return choice


def _short(choice: CheckChoice) -> str:
    """The reason in a few words, for the comment in the file (stable between runs)."""
    if choice.id in NOT_BY_DEFAULT and choice.status is None:
        return NOT_BY_DEFAULT[choice.id]
    if choice.reason.startswith("not a causal model"):
        return "not a causal model"
    if choice.reason.startswith("no sequence input"):
        return "no sequence input"
    if choice.status == "skip":
        return "does not apply"
    if choice.status in ("fail", "warn"):
        return f"{'failed' if choice.status == 'fail' else 'warned'} when generated"
    return "doctor could not run it" if choice.status is None else choice.status
