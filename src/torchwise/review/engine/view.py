"""The project as one file sees it: the questions the engine and the rules may
ask about code outside the file being walked.

The engine defines the questions; the project index answers them (see
:class:`torchwise.review.index.view.IndexView`). This base class answers
"unknown" to every one, which is what a rule must hear when a file is walked
with no project around it: rules stay quiet on what they cannot see.
"""

from __future__ import annotations

import ast
from typing import TYPE_CHECKING

from torchwise.review.index.records import TorchRange

if TYPE_CHECKING:
    from torchwise.review.engine.context import Context
    from torchwise.review.engine.facts import FunctionFacts, Value
    from torchwise.review.index.records import (
        ArgFact,
        CallSite,
        ClassModel,
        FunctionFact,
        LoadFact,
        SaveFact,
    )


class ProjectView:
    """What is known of the rest of the project, from the file at ``path``."""

    path: str = ""

    # -- classes and calls -----------------------------------------------------------
    def klass(self, written: str | None) -> ClassModel | None:
        """The project class a name written in this file resolves to."""
        return None

    def is_module_class(self, ctx: Context, written: str) -> bool:
        return False

    def placement(self, class_id: str) -> tuple[str, int] | None:
        """(file, line) where the project moves a model of this class, or a
        model it is part of, to the device; None when it never does."""
        return None

    def value_of_call(self, ctx: Context, call: ast.Call) -> Value | None:
        """A call to a project class (an instance) or function (what it returns)."""
        return None

    def output_activation(
        self, ctx: Context, model: Value
    ) -> tuple[str | None, tuple[str | None, int] | None]:
        """The activation a model's output ends in, and where it is applied."""
        if model.activation is not None:
            line = getattr(model.node, "lineno", None)
            return model.activation, None if line is None else (None, line)
        return None, None

    def returns(self, written: str | None) -> list[tuple[ArgFact, tuple[str | None, int] | None]]:
        """What each element of a project model's ``forward`` return value holds."""
        return []

    def star_names(self, written: str) -> dict[str, str] | None:
        """What ``from <written> import *`` binds, when it is a project module."""
        return None

    def call_target(self, ctx: Context, call: ast.Call) -> str | None:
        """The project function ``call`` runs, if it resolves."""
        return None

    def parameter_values(self, function: FunctionFacts) -> dict[str, Value]:
        """What the project's call sites pass to each parameter, when they agree."""
        return {}

    # -- functions -------------------------------------------------------------------
    def effects(self, target: str | None) -> frozenset[str]:
        """What calling the function does, through every project function it calls."""
        return frozenset()

    def path_effects(self, target: str, flag: str, polarity: bool) -> frozenset[str]:
        """The effects on the path where the function's parameter ``flag`` is ``polarity``."""
        return frozenset()

    def function(self, target: str | None) -> FunctionFact | None:
        return None

    def trains_over(self, target: str | None, param: str) -> bool:
        """Whether the function trains over its parameter ``param``."""
        return False

    def callers(self, target: str | None) -> list[CallSite]:
        return []

    def own(self, qualname: str) -> str:
        """The id of a function or class defined in this file."""
        return f"{self.path}::{qualname}"

    # -- project-wide facts ----------------------------------------------------------
    @property
    def torch_range(self) -> TorchRange:
        """The torch versions the project declares it runs on."""
        return TorchRange()

    def saves(self) -> list[tuple[str, SaveFact]]:
        """Every ``torch.save`` of the project, with the file it is in."""
        return []

    def loads(self) -> list[tuple[str, LoadFact]]:
        """Every ``torch.load`` of the project, with the file it is in."""
        return []

    def pickles_with(self) -> frozenset[str]:
        """The libraries the project writes pickle files with (``pickle.dump``)."""
        return frozenset()

    def process_group_optional(self) -> str | None:
        """Where the project starts its process group on some paths only
        (``path:line``), when it does: it also runs without one."""
        return None

    def written_for(self) -> frozenset[str]:
        """What the project's code shows of the library versions it is written
        for ("gym>=0.26"), from every file."""
        return frozenset()

    def importers_fall_back_to_cpu(self) -> bool:
        """Whether a file that imports this one runs without CUDA (tests for
        it, and calls ``.cuda()`` on no branch itself)."""
        return False

    def import_seeds(self) -> frozenset[str]:
        """The seeding effects of the top-level code of the project files this
        one imports (it runs at import)."""
        return frozenset()

    def importers_written_for(self) -> frozenset[str]:
        """The same, from the files that import this one directly."""
        return frozenset()


#: The view of a file walked with no project around it.
NO_PROJECT = ProjectView()
