"""The monitors of one run, installed together and undone together.

Which monitors run follows the options: the budget (DataLoader passes, step
counting) always; the checks unless ``checks=False``; the simulated GPU with
``as_cuda``; the distributed records in a process that is one rank of several.
Every patch goes through the session's :class:`~torchwise.run.session.Patches`,
so :meth:`Instrumentation.uninstall` leaves torch as it found it.
"""

from __future__ import annotations

from typing import Any, Protocol

import torch
from torch.optim.optimizer import register_optimizer_step_post_hook

from torchwise.run.monitors.loader import LoaderMonitor
from torchwise.run.monitors.spawn import SpawnMonitor
from torchwise.run.monitors.warnings_monitor import WarningsMonitor
from torchwise.run.session import Session
from torchwise.run.sites import user_site


class Monitor(Protocol):
    def install(self) -> None: ...


class _Budget:
    """Counting without checking: steps and backwards, for a plain run."""

    def __init__(self, session: Session) -> None:
        self.session = session

    def install(self) -> None:
        session = self.session
        original = torch.autograd.backward

        def backward(*args: Any, **kwargs: Any) -> Any:
            session.record_backward(user_site())
            return original(*args, **kwargs)

        session.patches.setattr(torch.autograd, "backward", backward)
        session.patches.handle(
            register_optimizer_step_post_hook(lambda opt, a, k: session.record_step(id(opt)))
        )


class _Eager:
    """``torch.compile`` returns what it is given: the monitors need eager execution."""

    def __init__(self, session: Session) -> None:
        self.session = session

    def install(self) -> None:
        session = self.session

        def compile(model: Any = None, **kwargs: Any) -> Any:
            session.note("torch.compile is left out: the checks run the model eagerly")
            if model is None:  # used as @torch.compile(mode=...)
                return lambda function: function
            return model

        session.patches.setattr(torch, "compile", compile)


class Instrumentation:
    """Builds, installs, finishes and removes the monitors of a session."""

    def __init__(self, session: Session) -> None:
        self.session = session
        options = session.options
        loaders = LoaderMonitor(session, record=options.checks)
        self.monitors: list[Monitor] = [_Eager(session), loaders]
        self.judges: list[Any] = []
        self.monitors.append(SpawnMonitor(session))
        if options.stand_ins:
            from torchwise.run.standins import StandIns

            self.monitors.append(StandIns(session))
        if options.checks:
            self.monitors.append(WarningsMonitor(session))
        if options.as_cuda:
            from torchwise.run.monitors.devices import DeviceMonitor

            self.monitors.insert(0, DeviceMonitor(session))  # torch.cuda first
        if not options.checks:
            self.monitors.append(_Budget(session))
            if session.world > 1:  # gloo ranks are the environment, not a check
                from torchwise.run.monitors.distributed import GlooRanks

                self.monitors.append(GlooRanks(session))
            return
        from torchwise.run.monitors.amp import AmpMonitor
        from torchwise.run.monitors.autograd import AutogradMonitor
        from torchwise.run.monitors.data import DataMonitor
        from torchwise.run.monitors.evaluation import EvaluationJudge
        from torchwise.run.monitors.modules import ModuleMonitor
        from torchwise.run.monitors.optim import OptimizerMonitor
        from torchwise.run.monitors.repro import ReproMonitor

        modules = ModuleMonitor(session)
        optimizers = OptimizerMonitor(session, modules)
        data = DataMonitor(session, loaders, modules)
        self.monitors += [
            modules,
            optimizers,
            AutogradMonitor(session, modules),
            AmpMonitor(session, optimizers),
            data,
            ReproMonitor(session, modules, loaders),
        ]
        self.judges = [optimizers, EvaluationJudge(session, modules), data]
        if session.world > 1:
            from torchwise.run.monitors.distributed import DistributedMonitor

            self.monitors.append(DistributedMonitor(session, modules, optimizers))
        self.judges += [m for m in self.monitors if hasattr(m, "finish") and m not in self.judges]

    def install(self) -> None:
        for monitor in self.monitors:
            monitor.install()

    def finish(self) -> None:
        """Judge what was recorded (after the script ended, before uninstalling)."""
        for judge in self.judges:
            judge.finish()

    def uninstall(self) -> None:
        self.session.patches.undo()
