"""The contract tables: their generator on small packages, their evaluator, and
facts of the real releases that the checked-in tables must hold."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from torchwise.review.contracts import Contracts, describe
from torchwise.review.contracts.guards import UNKNOWN, evaluate, holds, render

sys.path.insert(0, str(Path(__file__).parents[2] / "scripts"))

from contracts.extract import Reader
from contracts.namespace import Namespace
from contracts.sources import SourceFile

PACKAGE = {
    "pkg/__init__.py": """
from .mod import *
from . import sub
from ._native import *
alias = mod.func
_lazy_modules = frozenset({"later"})
def __getattr__(name):
    if name in _lazy_modules:
        import importlib
        return importlib.import_module("." + name, __name__)
    raise AttributeError(name)
for _name in dir(_C._Functions):
    globals()[_name] = getattr(_C._Functions, _name)
""",
    "pkg/_native.py": (
        "__all__ = ['native_public']\ndef native_public(x): ...\ndef _hidden(x): ...\n"
    ),
    "pkg/_C/__init__.pyi": "",
    "pkg/_C/_Functions.pyi": """
from typing import overload
@overload
def add(input, other, *, alpha=1): ...
@overload
def add(input, other, out=None): ...
def _private_op(x): ...
""",
    "pkg/later.py": "x = 1\n",
    "pkg/mod.py": """
import warnings
__all__ = ["func", "Klass", "old", "remove"]
def func(a, b=1, *, c=None):
    return a
class Klass:
    def __init__(self, p=0.5, heads=1, dim=8):
        if not 0 <= p <= 1:
            raise ValueError(f"probability must be in [0, 1], got {p}")
        self.head_dim = dim // heads
        assert self.head_dim * heads == dim, "dim must be divisible by heads"
        if p > 0 and heads == 1:
            warnings.warn("p does nothing with one head")
        self.setup()
    def setup(self):
        raise NotImplementedError
def old(x):
    warnings.warn("old is deprecated, use func", FutureWarning)
    return x
def early(x, flag=False):
    if flag:
        return x
    if x < 0:
        raise ValueError("negative")
def remove(module, name="weight"):
    for key, hook in module.hooks.items():
        if hook.name == name:
            return module
    raise ValueError(f"{name} not found in {module}")
""",
    "pkg/sub.py": """
from pkg.mod import Klass
class Child(Klass):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
    def setup(self):
        pass
class Wrapper:
    def __init__(self, width):
        self.inner = Klass(0.1, width)
class Opaque:
    def __init__(self, width):
        options = dict(dim=4)
        self.inner = Klass(0.1, width, **options)
""",
}


@pytest.fixture(scope="module")
def namespace() -> Namespace:
    files = []
    for path, text in PACKAGE.items():
        stub = path.endswith(".pyi")
        parts = path[: -4 if stub else -3].split("/")
        package = parts[-1] == "__init__"
        if package:
            parts = parts[:-1]
        files.append(SourceFile(".".join(parts), package, stub, text))
    return Namespace(files)


def test_names_resolve_through_star_imports_aliases_and_dir_loops(namespace: Namespace) -> None:
    assert namespace.resolve("pkg.func").key == "pkg.mod.func"  # type: ignore[union-attr]
    assert namespace.resolve("pkg.alias").key == "pkg.mod.func"  # type: ignore[union-attr]
    assert namespace.resolve("pkg.native_public").key == "pkg._native.native_public"  # type: ignore[union-attr]
    assert namespace.resolve("pkg._hidden") is None  # not in the exporter's __all__
    assert namespace.resolve("pkg.add").key == "pkg._C._Functions.add"  # type: ignore[union-attr]
    assert namespace.resolve("pkg._private_op") is not None  # copied by the dir() loop
    assert namespace.resolve("pkg.later") is not None  # answered by __getattr__
    assert namespace.resolve("pkg.missing") is None
    assert not namespace.modules["pkg"].open  # its __getattr__ names what it answers


def test_signatures_follow_forwarders_and_keep_overloads(namespace: Namespace) -> None:
    reader = Reader(namespace)
    child = reader.contract(namespace.resolve("pkg.sub.Child"))  # type: ignore[arg-type]
    assert [name for name, _, _ in child.signatures[0]] == ["p", "heads", "dim"]
    add = reader.contract(namespace.resolve("pkg.add"))  # type: ignore[arg-type]
    assert len(add.signatures) == 2


def test_guards_are_read_in_order_with_the_arguments_put_in(namespace: Namespace) -> None:
    reader = Reader(namespace)
    klass = reader.contract(namespace.resolve("pkg.Klass"))  # type: ignore[arg-type]
    by_message = {"".join(p for p in g["message"] if isinstance(p, str)): g for g in klass.guards}
    probability = by_message["probability must be in [0, 1], got "]
    assert holds(probability["when"], {"p": 1.5})
    assert not holds(probability["when"], {"p": 0.5})
    divisible = by_message["dim must be divisible by heads"]
    assert holds(divisible["when"], {"p": 0.5, "heads": 3, "dim": 8})
    assert not holds(divisible["when"], {"p": 0.5, "heads": 2, "dim": 8})
    warning = by_message["p does nothing with one head"]
    assert warning["warns"] == "UserWarning" and not warning["deprecation"]
    # The base's abstract `setup` is overridden by the class being built: no guard from it.
    assert not any(g["raises"] == "NotImplementedError" for g in klass.guards)
    wrapper = reader.contract(namespace.resolve("pkg.sub.Wrapper"))  # type: ignore[arg-type]
    inner = [g for g in wrapper.guards if "divisible" in str(g["message"])]
    assert inner and holds(inner[0]["when"], {"width": 3})  # Klass(0.1, width) with dim=8
    opaque = reader.contract(namespace.resolve("pkg.sub.Opaque"))  # type: ignore[arg-type]
    hidden = [g for g in opaque.guards if "divisible" in str(g["message"])]
    assert (
        not hidden or evaluate(hidden[0]["when"], {"width": 3}) is UNKNOWN
    )  # `**options` may set dim


def test_a_check_behind_an_early_return_is_conditional(namespace: Namespace) -> None:
    reader = Reader(namespace)
    early = reader.contract(namespace.resolve("pkg.mod.early"))  # type: ignore[arg-type]
    (guard,) = early.guards
    assert holds(guard["when"], {"x": -1, "flag": False})
    assert not holds(guard["when"], {"x": -1, "flag": True})


def test_a_raise_after_a_loop_that_may_return_is_not_on_every_call(namespace: Namespace) -> None:
    reader = Reader(namespace)
    remove = reader.contract(namespace.resolve("pkg.mod.remove"))  # type: ignore[arg-type]
    assert not [g for g in remove.guards if g["when"] == ["const", True]]


def test_a_warning_on_every_call_is_a_deprecation(namespace: Namespace) -> None:
    reader = Reader(namespace)
    old = reader.contract(namespace.resolve("pkg.old"))  # type: ignore[arg-type]
    assert old.deprecations == [
        {"message": "old is deprecated, use func", "category": "FutureWarning"}
    ]


def test_evaluation_is_three_valued() -> None:
    condition = [
        "and",
        [
            ["cmp", [">"], [["param", "p"], ["const", 0]]],
            ["cmp", ["=="], [["param", "n"], ["const", 1]]],
        ],
    ]
    assert holds(condition, {"p": 0.5, "n": 1})
    assert evaluate(condition, {"p": 0.5}) is UNKNOWN
    assert evaluate(condition, {"p": 0.0}) is False  # decided without n
    assert not holds(["call", "isinstance", [["param", "x"], ["types", ["Optimizer"]]]], {"x": 3})
    assert (
        holds(["call", "isinstance", [["param", "x"], ["types", ["torch.Tensor"]]]], {"x": 3})
        is False
    )
    assert evaluate(["bin", "/", ["const", 1], ["param", "x"]], {"x": 0}) is UNKNOWN  # never raises
    assert render(["got ", ["param", "p"], " and ", ["param", "q"]], {"p": 2}) == "got 2 and …"


def test_describe_groups_releases_into_runs() -> None:
    releases = ("1.8", "1.9", "2.0", "2.1", "2.2")
    assert describe(releases, 0b11011) == "1.8-1.9, 2.1-2.2"


# -- facts of the real releases, read from the checked-in tables ----------------
@pytest.fixture(scope="module")
def tables() -> Contracts:
    found = Contracts()
    assert found.available, "the contract tables are missing: run scripts/gen_contracts.py"
    return found


def test_tables_know_torch_removals_and_additions(tables: Contracts) -> None:
    releases = tables.releases("torch")
    six = tables.status("torch._six")
    assert six is not None and describe(releases, six.missing).startswith("2.0")
    compiled = tables.status("torch.compile")
    assert compiled is not None and describe(releases, compiled.present).startswith("2.0")
    assert tables.status("numpy.zeros") is None  # not a library the tables cover


def test_tables_know_when_a_keyword_left(tables: Contracts) -> None:
    api = tables.api("torch.optim.lr_scheduler.ReduceLROnPlateau")
    assert api is not None
    releases = tables.releases("torch")
    accepted = 0
    for mask, key in api.targets:
        definition = tables.definition(key)
        assert definition is not None
        for signatures_mask, overloads in definition.signatures:
            if any(signature.accepts_keyword("verbose") for signature in overloads):
                accepted |= signatures_mask & mask
    assert describe(releases, accepted) == "1.8-2.6"


def test_companion_releases_name_the_torch_they_were_built_for(tables: Contracts) -> None:
    vision = tables.releases("torchvision")
    built_for = tables.torch_releases("torchvision")
    assert vision and len(built_for) == len(vision)
    assert dict(zip(vision, built_for, strict=True)).get("0.21") == "2.6"
