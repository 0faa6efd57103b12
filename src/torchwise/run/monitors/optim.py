"""Optimizer steps and the gradients they use (TWR101-TWR104, TWR112-TWR114).

Every optimizer step goes through torch's global step hooks. At each step the
monitor notes, for every parameter, which gradient tensor the step consumed
(its identity and version counter). Two hooks per parameter then watch each
``backward``: one before the new gradient is added to ``.grad`` and one after.
A backward that adds to the very gradient an earlier step consumed, unchanged
since (not set to None, not zeroed), *carries* that gradient into the next step;
when that next step runs, the parameter's gradient mixes two steps: TWR101.
Gradient accumulation (several backwards, then one step, then ``zero_grad``)
never adds to a consumed gradient, and a GAN's generator backward that adds to
the discriminator's consumed gradients is harmless as long as the discriminator
zeroes them before its own next step, which is the only time it counts.

The same hooks say which gradients a backward computed since the last step;
``zero_grad`` (of an optimizer or a module) marks those it clears. A step whose
parameters' new gradients were all cleared applies nothing (TWR112). The
backwards since the last step are also kept with the DataLoader batch they ran
in and whether their loss was divided or multiplied last: a step after backwards
over two or more batches of one pass, none of them scaled, sums the batches'
gradients (TWR113).

At the first step, each model's parameters are fingerprinted (version counter and
first elements). A ``load_state_dict`` into a model an optimizer has stepped, of
the live weights of another model whose fingerprint has not moved since, resets
what training did to weights that never change (TWR114: a target network synced
the wrong way, or an optimizer built on the target network).

At the end: parameters an optimizer holds that never got a gradient (TWR102,
with a replay that tells a gradient cut by ``.detach()`` from an output nobody
uses), parameters that get gradients but no optimizer holds (TWR103, an error
when no parameter any optimizer holds gets one: the optimizer was built on
another network), and frozen parameters a step changed anyway (TWR104).
"""

from __future__ import annotations

import contextlib
import weakref
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch
from torch.optim.optimizer import (
    Optimizer,
    register_optimizer_step_post_hook,
    register_optimizer_step_pre_hook,
)

from torchwise.findings import Severity
from torchwise.run.monitors.modules import ModuleMonitor
from torchwise.run.monitors.pulls import SEARCH_STEPS, WATCHED_STEPS, PullWatch
from torchwise.run.monitors.replay import influences_output
from torchwise.run.session import Session
from torchwise.run.sites import Site, user_site

#: steps during which frozen parameters are compared before and after the step
FROZEN_STEPS = 3
SHOWN = 4
#: a loss's last operation that scales it (divided by the accumulation count, weighted)
SCALING_NODES = frozenset({"DivBackward0", "DivBackward1", "MulBackward0", "MulBackward1"})
#: libraries whose models may get pretrained weights without load_state_dict
PRETRAINED_LIBRARIES = frozenset(
    {"transformers", "timm", "torchvision", "diffusers", "open_clip", "peft", "torchaudio"}
)
#: elements of each parameter kept to tell whether it changed after the first step
FINGERPRINT_ELEMENTS = 16


@dataclass
class ParamState:
    """What the monitor knows about one parameter's gradient."""

    #: (id, version) of the gradient the last step consumed
    stepped: tuple[int, int] | None = None
    #: (id, version) of the gradient right after the last backward added to it
    after: tuple[int, int] | None = None
    #: the backward that added to a consumed gradient (TWR101), until the next step
    carry: Site | None = None
    got_grad: bool = False
    #: a backward added to the gradient since the last step of an optimizer holding it
    fresh: bool = False
    #: the ``zero_grad`` that cleared that new gradient before any step used it (TWR112)
    cleared: Site | None = None


@dataclass(frozen=True)
class BackwardSeen:
    """A backward since the last optimizer step: the batch it ran in, its loss's scaling."""

    batch: tuple[int, int] | None  # (pass number, batch number) when inside a DataLoader pass
    scaled: bool
    site: Site | None


def _state_of(grad: torch.Tensor | None) -> tuple[int, int] | None:
    return None if grad is None else (id(grad), grad._version)


class OptimizerMonitor:
    """Step hooks, per-parameter gradient hooks, and the end-of-run parameter checks."""

    def __init__(self, session: Session, modules: ModuleMonitor) -> None:
        self.session = session
        self.modules = modules
        self.states: dict[int, ParamState] = {}
        self.params: dict[int, weakref.ref[torch.Tensor]] = {}
        #: strong references: the script's objects die with its namespace, before judging
        self.optimizers: dict[int, Optimizer] = {}
        self.optimizer_sites: dict[int, Site | None] = {}
        self._frozen: list[tuple[torch.Tensor, torch.Tensor]] = []
        #: modules assigned to an attribute after an optimizer existed: id -> line
        self.assigned: dict[int, Site | None] = {}
        self.backwards_since_step: list[BackwardSeen] = []
        #: id(parameter) -> (version, first elements) at the first optimizer step (TWR114)
        self.fingerprints: dict[int, tuple[int, torch.Tensor]] = {}
        #: ids of parameters a load_state_dict wrote (pretrained, resumed), for TWR103
        self.loaded: set[int] = set()
        self.pulls = PullWatch(self._report_pull)

    def install(self) -> None:
        patches = self.session.patches
        patches.handle(register_optimizer_step_pre_hook(self._before_step))
        patches.handle(register_optimizer_step_post_hook(self._after_step))
        original_init = Optimizer.__init__
        monitor = self

        def init(optimizer: Optimizer, *args: Any, **kwargs: Any) -> None:
            original_init(optimizer, *args, **kwargs)
            monitor.optimizer_sites.setdefault(id(optimizer), user_site())
            monitor.optimizers.setdefault(id(optimizer), optimizer)

        patches.setattr(Optimizer, "__init__", init)
        original_setattr = torch.nn.Module.__setattr__

        def assign(module: torch.nn.Module, name: str, value: Any) -> None:
            original_setattr(module, name, value)
            if monitor.optimizers and isinstance(value, torch.nn.Module):
                monitor.assigned[id(value)] = user_site()

        patches.setattr(torch.nn.Module, "__setattr__", assign)
        self._watch_zero_grad(Optimizer, lambda optimizer: monitor.optimizer_params(optimizer))
        self._watch_zero_grad(torch.nn.Module, lambda module: module.parameters())
        self.session.listen("backward", self._backward)
        original_load = torch.nn.Module.load_state_dict

        def load_state_dict(module: torch.nn.Module, state_dict: Any, *a: Any, **k: Any) -> Any:
            if monitor.fingerprints:
                # tensors without storage (fake, sparse): the load itself decides
                with contextlib.suppress(RuntimeError, TypeError, ValueError):
                    monitor._check_overwrite(module, state_dict)
            result = original_load(module, state_dict, *a, **k)
            monitor.loaded.update(id(p) for p in module.parameters())
            return result

        patches.setattr(torch.nn.Module, "load_state_dict", load_state_dict)

    def _watch_zero_grad(self, owner: type, params_of: Any) -> None:
        """Wrap ``owner.zero_grad`` to mark the new gradients it clears, at its line."""
        original = owner.zero_grad  # type: ignore[attr-defined]
        states = self.states

        def zero_grad(this: Any, *args: Any, **kwargs: Any) -> Any:
            result = original(this, *args, **kwargs)
            site: Site | None = None
            for param in params_of(this):
                state = states.get(id(param))
                if state is not None and state.fresh:
                    state.cleared = site = site or user_site()
            return result

        self.session.patches.setattr(owner, "zero_grad", zero_grad)

    def _backward(self, losses: list[torch.Tensor]) -> None:
        running = self.session.current_pass()
        batch = (running.number, running.batches) if running is not None else None
        scaled = any(
            loss.grad_fn is not None and loss.grad_fn.name() in SCALING_NODES for loss in losses
        )
        self.backwards_since_step.append(BackwardSeen(batch, scaled, self.session.backward_site))

    # parameters ------------------------------------------------------------------
    def _watch(self, param: torch.Tensor) -> ParamState:
        key = id(param)
        state = self.states.get(key)
        if state is not None:
            return state
        state = self.states[key] = ParamState()
        self.params[key] = weakref.ref(param)
        if not param.requires_grad or not param.is_leaf:
            return state
        session = self.session

        def before(grad: torch.Tensor) -> None:
            current = _state_of(param.grad)
            if current is not None and current == state.stepped:
                state.carry = session.backward_site
            elif current is None or current != state.after:
                state.carry = None  # reset since (zero_grad, set to None, a new tensor)

        def after(tensor: torch.Tensor) -> None:
            state.after = _state_of(tensor.grad)
            state.got_grad = True
            state.fresh = True
            state.cleared = None

        session.patches.handle(param.register_hook(before))  # type: ignore[no-untyped-call]
        session.patches.handle(
            param.register_post_accumulate_grad_hook(after)  # type: ignore[no-untyped-call]
        )
        return state

    def known_optimizers(self) -> list[Optimizer]:
        return list(self.optimizers.values())

    def optimizer_params(self, optimizer: Optimizer) -> list[torch.Tensor]:
        return [p for group in optimizer.param_groups for p in group["params"]]

    # step hooks ------------------------------------------------------------------
    def _before_step(self, optimizer: Optimizer, args: Any, kwargs: Any) -> None:
        session = self.session
        self.optimizers.setdefault(id(optimizer), optimizer)
        session.emit("step_pre", optimizer)
        if not self.fingerprints:
            self._fingerprint_models()
        if not self.pulls.done and self.session.steps <= WATCHED_STEPS + SEARCH_STEPS:
            self.pulls.before_step(self._untrained(), self._param_label)
        carried: list[torch.Tensor] = []
        site: Site | None = None
        for param in self.optimizer_params(optimizer):
            state = self._watch(param)
            if param.grad is not None and param.requires_grad:
                state.got_grad = True
            if state.carry is not None:
                carried.append(param)
                site = site or state.carry
                state.carry = None
        if carried:
            self._report_carry(optimizer, carried, site)
        self._check_cleared(optimizer)
        self._check_accumulation(optimizer)
        if session.optimizer_steps.get(id(optimizer), 0) < FROZEN_STEPS:
            self._frozen = [
                (p, p.detach().clone()) for p in self.optimizer_params(optimizer)
                if not p.requires_grad
            ]  # fmt: skip

    def _after_step(self, optimizer: Optimizer, args: Any, kwargs: Any) -> None:
        for param in self.optimizer_params(optimizer):
            state = self._watch(param)
            state.stepped = _state_of(param.grad)
            state.fresh = False
            state.cleared = None
        self.backwards_since_step = []
        self.pulls.after_step(self.optimizer_params(optimizer), self.session.steps + 1)
        if self._frozen:
            changed = [p for p, before in self._frozen if not torch.equal(p.detach(), before)]
            self._frozen = []
            if changed:
                self._report_frozen(optimizer, changed)
        self.session.emit("step_post", optimizer)
        self.session.record_step(id(optimizer))  # may end the run: last

    def _check_cleared(self, optimizer: Optimizer) -> None:
        """TWR112: every gradient a backward computed for this step was cleared before it."""
        states = [self.states[id(p)] for p in self.optimizer_params(optimizer)]
        fresh = [state for state in states if state.fresh]
        if not fresh or any(state.cleared is None for state in fresh):
            return
        step = self.session.optimizer_steps.get(id(optimizer), 0) + 1
        self.session.report(
            "TWR112",
            fresh[0].cleared,
            f"zero_grad() clears the gradients of the backward before step {step} of "
            f"{type(optimizer).__name__} uses them: the step applies nothing",
            evidence={
                "backward": self.session.backward_site.label
                if self.session.backward_site is not None
                else "?",
                "parameters cleared": len(fresh),
            },
        )

    def _check_accumulation(self, optimizer: Optimizer) -> None:
        """TWR113: backwards over several batches of one pass, no loss divided or scaled."""
        seen = self.backwards_since_step
        batches = {b.batch for b in seen}
        if None in batches or len({batch[0] for batch in batches if batch}) != 1:
            return
        if len(batches) < 2 or any(b.scaled for b in seen):
            return
        self.session.report(
            "TWR113",
            seen[0].site,
            f"step {self.session.optimizer_steps.get(id(optimizer), 0) + 1} of "
            f"{type(optimizer).__name__} applies the summed gradients of {len(batches)} "
            f"batches whose losses were not divided: the effective learning rate is "
            f"{len(batches)}x the one set",
            evidence={"backwards": len(seen), "batches": len(batches)},
        )

    def _fingerprint_models(self) -> None:
        for root in self.modules.root_modules():
            for param in root.parameters():
                if param.layout == torch.strided and not param.is_meta:
                    flat = param.detach().reshape(-1)[:FINGERPRINT_ELEMENTS]
                    self.fingerprints[id(param)] = (param._version, flat.clone())

    def _unchanged(self, param: torch.Tensor) -> bool:
        seen = self.fingerprints.get(id(param))
        if seen is None:
            return False
        version, values = seen
        flat = param.detach().reshape(-1)[:FINGERPRINT_ELEMENTS]
        return param._version == version and torch.equal(flat, values)

    def _check_overwrite(self, module: torch.nn.Module, state_dict: Any) -> None:
        """TWR114: ``module``, which an optimizer stepped, gets the live weights of a model
        that has not changed since the first step."""
        if not hasattr(state_dict, "values"):
            return
        stepped = {id(p) for p in self._optimized().values()}
        own = list(module.parameters())
        if not own or not any(id(p) in stepped for p in own):
            return
        pointers = {
            v.data_ptr() for v in state_dict.values()
            if isinstance(v, torch.Tensor) and v.is_floating_point()
        }  # fmt: skip
        own_ids = {id(p) for p in own}
        for source in self.modules.root_modules():
            params = list(source.parameters())
            if (
                source is module or not params or any(id(p) in own_ids for p in params)
                or any(p.data_ptr() not in pointers for p in params)
            ):  # fmt: skip
                continue
            if any(id(p) in stepped for p in params) or not all(map(self._unchanged, params)):
                return
            optimizer = next(
                (o for o in self.known_optimizers()
                 if self.session.optimizer_steps.get(id(o))
                 and any(id(p) in own_ids for p in self.optimizer_params(o))),
                None,
            )  # fmt: skip
            name = type(optimizer).__name__ if optimizer is not None else "the optimizer"
            self.session.report(
                "TWR114",
                user_site(),
                f"load_state_dict overwrites {self._called_label(module)}, which {name} "
                f"trains, with the weights of {self._called_label(source)}, which have not "
                "changed since training began: every such copy undoes the training "
                "(a target network synced the wrong way, or the optimizer built on it)",
                evidence={"optimizer steps so far": self.session.steps},
            )
            return

    def _untrained(self) -> list[torch.Tensor]:
        """The floating parameters that no optimizer holds and nothing has changed since
        the first step (a meta-learner's slow weights, which change, do not count)."""
        held = {id(p) for o in self.known_optimizers() for p in self.optimizer_params(o)}
        return [
            p for root in self.modules.root_modules() for p in root.parameters()
            if id(p) not in held and p.is_floating_point() and self._unchanged(p)
        ]  # fmt: skip

    def _param_label(self, param: torch.Tensor) -> str:
        """The model that holds ``param``: its class and the line that calls it."""
        for root in self.modules.root_modules():
            if any(p is param for p in root.parameters()):
                return self._called_label(root)
        return f"a parameter {tuple(param.shape)}"

    def _report_pull(self, site: Site | None, message: str, evidence: dict[str, object]) -> None:
        fallback = next(iter(self.optimizer_sites.values()), None)
        if site is None:
            evidence["line"] = "not seen (the update was not repeated while it was watched)"
        self.session.report("TWR114", site or fallback, message, evidence=evidence)

    def _names(self, params: Sequence[torch.Tensor]) -> list[str]:
        owners = self.modules.parameter_owners()
        return [owners.get(id(p), (f"parameter {tuple(p.shape)}", 0))[0] for p in params]

    def _report_carry(
        self, optimizer: Optimizer, carried: list[torch.Tensor], site: Site | None
    ) -> None:
        step = self.session.optimizer_steps.get(id(optimizer), 0) + 1
        names = self._names(carried)
        total = len(self.optimizer_params(optimizer))
        self.session.report(
            "TWR101",
            site,
            f"gradients accumulate across optimizer steps: this backward adds to the "
            f"gradients that step {step - 1} of {type(optimizer).__name__} already used, "
            f"so step {step} applies both (no zero_grad between step and backward)",
            evidence={
                "parameters": f"{len(carried)} of {total}: {', '.join(names[:SHOWN])}"
                + (", ..." if len(names) > SHOWN else ""),
                "optimizer": _label(
                    type(optimizer).__name__, self.optimizer_sites.get(id(optimizer))
                ),
            },
        )

    def _report_frozen(self, optimizer: Optimizer, changed: list[torch.Tensor]) -> None:
        names = self._names(changed)
        self.session.report(
            "TWR104",
            user_site(),
            f"optimizer.step() changed {len(changed)} parameter(s) with requires_grad=False: "
            "they still hold a gradient (or momentum) from before they were frozen",
            evidence={
                "parameters": ", ".join(names[:SHOWN]) + (", ..." if len(names) > SHOWN else "")
            },
        )

    # end of run ------------------------------------------------------------------
    def finish(self) -> None:
        self.pulls.close()
        if self.session.steps < 2:
            return
        self._gradless()
        self._unoptimized()
        self._frozen_batchnorm()

    def _replacement_site(self, params: Sequence[torch.Tensor]) -> Site | None:
        """The line that assigned the module holding ``params`` (or one of its parents)."""
        owners = self.modules.parameter_owners()
        for root in self.modules.root_modules():
            by_name = dict(root.named_modules())
            for param in params:
                name = owners.get(id(param), ("", 0))[0]
                parts = name.split(".")[:-1]
                for depth in range(len(parts), 0, -1):
                    module = by_name.get(".".join(parts[:depth]))
                    if module is not None and self.assigned.get(id(module)) is not None:
                        return self.assigned[id(module)]
        return None

    def _frozen_batchnorm(self) -> None:
        """TWR111: frozen batch norm that trains in training mode (its statistics move)."""
        for key, root in self.modules.roots.items():
            trained = [c for c in self.modules.calls if c.module_id == key and c.used]
            active = {name for c in trained for name in (c.train_layers or ())}
            for name, layer in root.named_modules():
                if name not in active or not isinstance(
                    layer, torch.nn.modules.batchnorm._BatchNorm
                ):
                    continue
                params = list(layer.parameters(recurse=False))
                if not params or any(p.requires_grad for p in params):
                    continue
                run = self.modules.runs.get(id(layer))
                self.session.report(
                    "TWR111",
                    run.site if run is not None else None,
                    f"`{name}` ({type(layer).__name__}) is frozen (requires_grad=False) but "
                    "runs in training mode: its running statistics still change at every step",
                    evidence={"momentum": layer.momentum},
                )

    def _optimized(self) -> dict[int, torch.Tensor]:
        found: dict[int, torch.Tensor] = {}
        for optimizer in self.known_optimizers():
            if self.session.optimizer_steps.get(id(optimizer)):
                for param in self.optimizer_params(optimizer):
                    found[id(param)] = param
        return found

    def _gradless(self) -> None:
        owners = self.modules.parameter_owners()
        optimized = self._optimized()
        gradless = {
            key for key, p in optimized.items()
            if p.requires_grad and not self.states.get(key, ParamState()).got_grad
            and key in owners
        }  # fmt: skip
        if not gradless:
            return
        for module, names in _topmost_groups(self.modules, gradless):
            run = self.modules.runs.get(id(module))
            evidence: dict[str, object] = {
                "parameters": f"{len(names)}: {', '.join(names[:SHOWN])}"
                + (", ..." if len(names) > SHOWN else "")
            }
            label = self.modules.module_names().get(id(module), type(module).__name__)
            trained_too = any(
                self.states.get(id(p), ParamState()).got_grad for p in module.parameters()
            )
            if trained_too:  # the module's other parameters get gradients: these are unused
                severity = Severity.INFO
                why = (
                    "its other parameters do get gradients, so these are not used by its "
                    "forward (or their use is detached)"
                )
            elif run is None:
                severity, why = Severity.INFO, "its forward never ran"
            elif not run.grad:
                severity, why = Severity.INFO, "it only ran under torch.no_grad()"
            elif influences_output(self.session, self.modules.last_forward, module):
                severity = Severity.WARNING
                why = (
                    "its output reaches the model's output, but the gradient is cut on the way "
                    "(a .detach(), .data or a no_grad block)"
                )
            else:
                severity, why = Severity.INFO, "its output is not used by the loss"
            self.session.report(
                "TWR102",
                (run.site if run is not None else None) or self._first_optimizer_site(),
                f"`{label}` ({type(module).__name__}) never gets a gradient in "
                f"{self.session.steps} steps although the optimizer holds its "
                f"parameters: {why}",
                severity=severity,
                evidence=evidence,
            )

    def _first_optimizer_site(self) -> Site | None:
        return next((site for site in self.optimizer_sites.values() if site is not None), None)

    def _unoptimized(self) -> None:
        optimized = self._optimized()
        owners = self.modules.parameter_owners()
        trained = [
            module for module in self.modules.root_modules()
            if any(c.used and c.module_id == id(module) for c in self.modules.calls)
        ]  # fmt: skip
        missing = [
            p for root in trained for p in root.parameters()
            if p.requires_grad and p.grad is not None and id(p) not in optimized
        ]  # fmt: skip
        if not missing or not optimized:
            return
        stale = [p for key, p in optimized.items() if key not in owners]
        site = next(iter(self.optimizer_sites.values()), None)
        names = self._names(missing)
        evidence = {"not optimized": f"{len(missing)}: {', '.join(names[:SHOWN])}"}
        if stale:
            replaced = self._replacement_site(missing)
            if replaced is not None:
                evidence["optimizer"] = f"built at {site.label}" if site is not None else "?"
            self.session.report(
                "TWR103",
                replaced or site,
                f"the optimizer holds {len(stale)} parameter(s) the model no longer has, and "
                f"{len(missing)} of the model's parameters get gradients but are in no "
                "optimizer: a layer was replaced after the optimizer was built",
                severity=Severity.ERROR,
                evidence=evidence,
            )
            return
        missing_ids = {id(p) for p in missing}
        names_by_id = self.modules.module_names()
        if not any(self.states.get(key, ParamState()).got_grad for key in optimized):
            self._wrong_network(missing_ids, set(optimized), site)
            return
        first_optimized = min(
            (
                run.order for key, run in self.modules.runs.items()
                if any(id(p) in optimized for p in _module_params(self.modules, key))
            ),
            default=None,
        )  # fmt: skip
        for module, group in _topmost_groups(self.modules, missing_ids):
            own = list(module.parameters(recurse=False))
            partial = any(id(p) in optimized for p in own)
            run = self.modules.runs.get(id(module))
            downstream = (
                run is not None and first_optimized is not None and run.order > first_optimized
            )
            label = names_by_id.get(id(module), type(module).__name__)
            random = self._never_loaded(module)
            if partial:
                why = f"{len(group)} of its parameters (the others are optimized)"
            elif downstream:
                why = "it, although it runs after layers that are optimized"
            elif random:
                why = (
                    "it, and nothing loaded its weights: it stays at its random initialisation "
                    "while the layers after it train on its output"
                )
            else:
                why = "it (set requires_grad_(False) if it is meant to stay frozen)"
            self.session.report(
                "TWR103",
                site,
                f"`{label}` gets gradients at every step but no optimizer updates {why}",
                severity=Severity.WARNING if partial or downstream or random else Severity.INFO,
                evidence={"parameters": ", ".join(group[:SHOWN])},
            )

    def _never_loaded(self, module: torch.nn.Module) -> bool:
        """No load_state_dict wrote its weights, and it is no library's model (whose
        pretrained loaders may write weights another way): a frozen layer that is random."""
        if any(id(p) in self.loaded for p in module.parameters()):
            return False
        owners = [module, *self.modules.root_modules()]
        return not any(
            type(owner).__module__.split(".")[0] in PRETRAINED_LIBRARIES for owner in owners
        )

    def _called_label(self, module: torch.nn.Module) -> str:
        """A module's name in its model, or for a model, its class and the line calling it."""
        if id(module) not in self.modules.roots:
            return self.modules.module_names().get(id(module), type(module).__name__)
        run = self.modules.runs.get(id(module))
        where = f" called at line {run.site.line}" if run is not None and run.site else ""
        return f"the {type(module).__name__}{where}"

    def _wrong_network(self, trained: set[int], held: set[int], site: Site | None) -> None:
        """TWR103 as an error: what trains is in no optimizer, and nothing the optimizers
        hold ever gets a gradient, so no step changes anything that trains."""
        held_labels = [self._called_label(m) for m, _ in _topmost_groups(self.modules, held)]
        for module, group in _topmost_groups(self.modules, trained):
            label = self._called_label(module)
            self.session.report(
                "TWR103",
                site,
                f"{label} gets gradients at every step but no optimizer updates it, and "
                f"what the optimizer holds ({', '.join(held_labels[:SHOWN]) or 'its parameters'}) "
                "never gets a gradient: the optimizer was built on another network",
                severity=Severity.ERROR,
                evidence={"parameters": ", ".join(group[:SHOWN])},
            )


def _module_params(modules: ModuleMonitor, key: int) -> list[torch.Tensor]:
    for root in modules.root_modules():
        for module in root.modules():
            if id(module) == key:
                return list(module.parameters(recurse=False))
    return []


def _label(what: str, site: Site | None) -> str:
    return f"{what} built at {site.label}" if site is not None else what


def _topmost_groups(modules: ModuleMonitor, selected: set[int]) -> list[tuple[Any, list[str]]]:
    """The largest modules all of whose parameters are ``selected``, with their names."""
    groups: list[tuple[Any, list[str]]] = []
    taken: set[int] = set()
    for root in modules.root_modules():
        for prefix, module in root.named_modules():
            # frozen parameters (a fixed positional table) do not make a group partial
            params = [(n, p) for n, p in module.named_parameters() if p.requires_grad]
            keys = {id(p) for _, p in params}
            if not keys or not keys <= selected or keys <= taken:
                continue
            taken |= keys
            groups.append((module, [f"{prefix}.{n}" if prefix else n for n, _ in params]))
    leftover = selected - taken
    if leftover:  # parameters held by a module that is not wholly selected
        owners = modules.parameter_owners()
        by_module: dict[int, list[str]] = {}
        for key in leftover:
            name, owner = owners.get(key, ("?", 0))
            by_module.setdefault(owner, []).append(name)
        names = {id(m): m for root in modules.root_modules() for m in root.modules()}
        groups += [(names[o], n) for o, n in by_module.items() if o in names]
    return groups
