"""The project report as typed data: what ``torchwise project`` finds and measures.

These pydantic models are the one schema shared by the command's JSON output, the
HTML report and the MCP server's structured tool results; ``--format json`` is
``ProjectReport.model_dump_json()``. Paths are POSIX paths relative to the
project root. :data:`SCHEMA_VERSION` is bumped on any incompatible change.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field

#: 2: commands have a working directory and what they do, and two more purposes (prepare,
#: run); build plans say whether the build was tried and how it went; notebooks' modules
#: (``notebook`` plans, a ``cell``) and losses (kind ``loss``); every imported library.
SCHEMA_VERSION = 2

TriggerKind = Literal["dependency", "import", "checkpoint", "module"]
Purpose = Literal["train", "test", "evaluate", "export", "profile", "prepare", "run"]
BuildHow = Literal[
    "configured", "default", "factory", "config-class", "needs-arguments", "notebook"
]
BuildStatus = Literal["untried", "built", "failed"]
Status = Literal["pass", "warn", "fail", "skip"]
Verdict = Literal["safe", "warning", "unsafe", "error"]


class Trigger(BaseModel):
    """One piece of evidence that this is a PyTorch project."""

    kind: TriggerKind
    path: str
    line: int | None = None
    detail: str


class Package(BaseModel):
    """One library of the project's stack: declared, installed, imported."""

    name: str
    role: str = Field(description="what it is for ('framework', 'data', ...; 'library' if unknown)")
    declared: str | None = Field(
        default=None, description="the requirement as written, e.g. '>=2.1'"
    )
    declared_in: str | None = None
    installed: str | None = Field(
        default=None, description="version in the environment torchwise runs in"
    )
    imported_by: int = Field(default=0, description="number of project files that import it")
    via: str | None = Field(
        default=None,
        description="the import that needs it when the code never imports it by name, "
        "e.g. 'torch.utils.tensorboard' for tensorboard",
    )


class TorchRuntime(BaseModel):
    """The torch the project asks for and the one (and the devices) this machine has."""

    declared: str | None = None
    declared_in: str | None = None
    installed: str | None = None
    cuda_available: bool | None = None
    cuda_version: str | None = None
    gpus: list[str] = Field(default_factory=list)
    mps_available: bool | None = None
    note: str | None = None


class ProjectCommand(BaseModel):
    """A command the project documents for one purpose, and where it was found."""

    purpose: Purpose
    command: str
    source: str = Field(description="file:line it was found at, e.g. 'Makefile:12'")
    cwd: str = Field(
        default=".", description="the directory to run it from, relative to the project root"
    )
    description: str | None = Field(
        default=None,
        description="what it does, in the project's words (the heading, comment or sentence "
        "that introduces it) or, for a script, the commands it runs",
    )


class Layout(BaseModel):
    """Where things live, as directories and files relative to the root."""

    model_dirs: list[str] = Field(default_factory=list)
    checkpoint_dirs: list[str] = Field(default_factory=list)
    training_scripts: list[str] = Field(default_factory=list)
    config_dirs: list[str] = Field(default_factory=list)
    test_dirs: list[str] = Field(default_factory=list)
    notebooks: list[str] = Field(default_factory=list)


class BuildPlan(BaseModel):
    """Whether and how torchwise can build a module class without help."""

    how: BuildHow
    target: str | None = Field(
        default=None, description="the TARGET for torchwise inspect/doc/doctor"
    )
    build: str | None = Field(
        default=None, description="a constructor expression, e.g. GPT(GPTConfig())"
    )
    inputs: list[str] = Field(default_factory=list, description="input specs, when known")
    inputs_source: Literal["configured", "factory", "inferred", "unknown", "none"] = "unknown"
    required: list[str] = Field(default_factory=list, description="constructor arguments needed")
    reason: str | None = None
    status: BuildStatus = Field(
        default="untried",
        description="untried: a plan read from the code (static knowledge); built: the "
        "audit built and fed it this way; failed: the audit tried and it raised (error)",
    )
    error: str | None = Field(default=None, description="why the build failed, when it did")
    needs: str | None = Field(
        default=None,
        description="what building it needs when it failed or cannot be planned, and how",
    )

    @property
    def buildable(self) -> bool:
        return self.how not in ("needs-arguments", "notebook") and self.status != "failed"


class ModuleClass(BaseModel):
    """An ``nn.Module`` subclass defined in the project."""

    name: str
    path: str
    line: int = Field(description="its line (in a notebook: the line in its cell)")
    cell: int | None = Field(default=None, description="the code cell, for a notebook")
    bases: list[str]
    kind: Literal["module", "lightning", "transformers", "diffusers", "loss"] = "module"
    top_level: bool = Field(description="not used as a part of another module of the project")
    forward_inputs: int | None = Field(
        default=None, description="required inputs of forward, if known"
    )
    build: BuildPlan


class ProjectKnowledge(BaseModel):
    """What an expert learns about a project in the first ten minutes (static, no user code)."""

    schema_version: int = SCHEMA_VERSION
    root: str
    name: str
    is_pytorch: bool
    triggers: list[Trigger] = Field(default_factory=list)
    python: str | None = Field(default=None, description="requires-python, when declared")
    stack: list[Package] = Field(default_factory=list)
    torch: TorchRuntime = Field(default_factory=TorchRuntime)
    layout: Layout = Field(default_factory=Layout)
    commands: list[ProjectCommand] = Field(default_factory=list)
    modules: list[ModuleClass] = Field(default_factory=list)
    checkpoints: list[str] = Field(default_factory=list)
    configured_models: list[str] = Field(default_factory=list)
    python_files: int = 0
    python_lines: int = 0
    notes: list[str] = Field(default_factory=list)


class FindingRow(BaseModel):
    """One review finding."""

    code: str
    rule: str
    family: str
    severity: Literal["error", "warning", "info"]
    path: str
    line: int
    column: int
    message: str
    fix: str | None = Field(default=None, description="the fix's title, when the rule offers one")
    fix_applicability: Literal["safe", "unsafe", "display"] | None = None


class ReviewSummary(BaseModel):
    """``torchwise review`` over the project's code."""

    files: int
    lines: int
    by_severity: dict[str, int]
    by_family: dict[str, dict[str, int]] = Field(description="family -> severity -> count")
    fixable: int
    findings: list[FindingRow]
    truncated: int = Field(
        default=0, description="findings left out of the list (counts include them)"
    )


class CheckpointFinding(BaseModel):
    severity: str
    rule: str
    global_name: str | None = None
    reason: str
    call: str | None = None


class CheckpointEntry(BaseModel):
    """One checkpoint file: the scan verdict and, when safe to read, its contents."""

    path: str
    size_bytes: int
    format: str
    verdict: Verdict
    findings: list[CheckpointFinding] = Field(default_factory=list)
    error: str | None = None
    kind: str | None = Field(
        default=None, description="state_dict, training checkpoint, ... (inspect)"
    )
    tensors: int | None = None
    parameters: int | None = None
    tensor_bytes: int | None = None


class LayerRow(BaseModel):
    name: str
    type: str
    depth: int
    params: int
    flops: int
    output_shapes: list[list[int]]


class ModelMeasure(BaseModel):
    """``torchwise inspect``: measured on the meta device unless ``device`` says otherwise."""

    name: str
    inputs: list[list[int]]
    outputs: list[list[int]]
    output_dtypes: list[str]
    total_params: int
    trainable_params: int
    param_bytes: int
    flops_forward: int
    macs_forward: int
    flops_training: int | None
    peak_activation_bytes: int
    training_memory_bytes: int | None
    device: str
    unsupported_ops: dict[str, int]
    layers: list[LayerRow]
    notes: list[str] = Field(default_factory=list)


class DoctorCheck(BaseModel):
    id: str
    status: Status
    summary: str
    where: list[str] = Field(default_factory=list)
    evidence: dict[str, Any] = Field(default_factory=dict, description="the measured numbers")
    causes: list[str] = Field(default_factory=list)
    fix: str = ""
    seconds: float = 0.0


class DoctorSummary(BaseModel):
    """``torchwise doctor``: health checks from running the model on one batch."""

    target: str
    inputs: list[str]
    loss: str
    ok: bool
    counts: dict[str, int]
    checks: list[DoctorCheck]
    seconds: float
    notes: list[str] = Field(default_factory=list)


class ModelAudit(BaseModel):
    """One module class built, measured and checked (or why not)."""

    name: str
    path: str
    target: str
    inputs: list[str] = Field(default_factory=list)
    inputs_source: str = "unknown"
    command: str = Field(
        default="", description="the torchwise inspect command that measures it again"
    )
    measure: ModelMeasure | None = None
    doctor: DoctorSummary | None = None
    error: str | None = None
    seconds: float = 0.0


class RunSummary(BaseModel):
    """The project's training command, run for a few steps under ``torchwise run``."""

    command: str = Field(description="the command as the project gives it")
    source: str = Field(description="where the command was found, e.g. 'README.md:40'")
    cwd: str = Field(description="the directory it ran in, relative to the root")
    ran: str = Field(default="", description="what ran: steps, passes, how it ended")
    exit_status: int = 0
    findings: list[FindingRow] = Field(default_factory=list)
    notes: list[str] = Field(default_factory=list, description="stand-ins and simulations used")
    seconds: float = 0.0
    error: str | None = Field(default=None, description="why it could not run, when it could not")


Section = Literal["critical", "performance", "practice", "positive", "tests"]


class MergedFinding(BaseModel):
    """One entry of the merged report: review, run, doctor and checkpoint evidence
    about one problem (or one strength), in the reviewer's order."""

    section: Section
    severity: Literal["error", "warning", "info"] | None = None
    title: str
    path: str | None = None
    line: int | None = None
    sources: list[str] = Field(description="what found it: 'review TW150', 'run TWR113', ...")
    evidence: str = Field(default="", description="the measured or observed support")
    confirmed: bool = Field(
        default=False, description="a static finding the run saw happen at the same place"
    )
    execution_only: bool = Field(
        default=False, description="only running the code shows it (no static rule reads it)"
    )


class ProjectReport(BaseModel):
    """``torchwise project``: the knowledge plus every audit it could run."""

    schema_version: int = SCHEMA_VERSION
    torchwise_version: str
    knowledge: ProjectKnowledge
    review: ReviewSummary | None = None
    checkpoints: list[CheckpointEntry] = Field(default_factory=list)
    models: list[ModelAudit] = Field(default_factory=list)
    run: RunSummary | None = None
    merged: list[MergedFinding] = Field(
        default_factory=list,
        description="review, run, doctor and checkpoint findings in one list, deduplicated, "
        "in the reviewer's order: critical, performance, practice, positive, tests",
    )
    timings: dict[str, float] = Field(default_factory=dict, description="seconds per phase")
    notes: list[str] = Field(default_factory=list)


# -- results of the MCP server's other tools ---------------------------------------


class RuleDoc(BaseModel):
    """``torchwise rules CODE``: what a review rule catches, why, and the fix."""

    code: str
    name: str
    family: str
    severity: Literal["error", "warning", "info"]
    default_enabled: bool
    fix: Literal["safe", "unsafe", "display"] | None = None
    summary: str
    doc: str = Field(description="the rule's full documentation (Markdown)")


class FileFix(BaseModel):
    path: str
    fixes: int
    diff: str = Field(description="unified diff of the fixes; nothing is written")


class FixPreview(BaseModel):
    """``torchwise review --diff``: the fixes review would apply, as diffs (never written)."""

    files: list[FileFix]
    fixes: int
    unsafe_included: bool
    remaining: list[FindingRow] = Field(description="findings the fixes leave")


class DocResult(BaseModel):
    """``torchwise doc``: generated docstrings, a diff, or a staleness check."""

    target: str
    mode: Literal["print", "diff", "check", "write"]
    stale: bool | None = Field(default=None, description="check/diff: whether the docs change")
    written: bool = False
    output: str = Field(description="the docstrings (print) or the unified diff")
    messages: list[str] = Field(default_factory=list)


class GeneratedTest(BaseModel):
    """One test of a generated module (or one left out of it), and the evidence why."""

    name: str
    what: str = Field(description="what it proves")
    why: str = Field(description="passed when generated, or why it was left out")


class TestsCheck(BaseModel):
    """One doctor check considered for a generated module: in it or not, and why."""

    id: str
    included: bool
    reason: str
    status: str | None = Field(default=None, description="doctor's verdict when generated")


class TestsResult(BaseModel):
    """``torchwise tests``: a pytest module for a model, every test run once before it
    is kept."""

    __test__ = False  # a result, not a pytest class

    target: str
    path: str = Field(description="where the module lives (workspace-relative when inside)")
    status: str = Field(description="generated, written, or for check: fresh, stale, missing")
    command: str = Field(description="the torchwise tests command that regenerates it")
    text: str = Field(description="the module's source")
    tests: list[GeneratedTest] = Field(default_factory=list)
    left_out: list[GeneratedTest] = Field(default_factory=list)
    checks: list[TestsCheck] = Field(default_factory=list)
    notes: list[str] = Field(default_factory=list)
    warnings: list[str] = Field(default_factory=list)
    diff: str = Field(default="", description="check: how the file on disk differs")


class TensorRow(BaseModel):
    key: str
    dtype: str
    shape: list[int]
    role: str


class CheckpointContents(BaseModel):
    """``torchwise ckpt inspect``: what a checkpoint holds, read without running it."""

    path: str
    format: str
    kind: str
    parameters: int
    buffers: int
    optimizer_elements: int
    tensor_bytes: int
    file_size: int
    tensors: list[TensorRow]
    truncated: int = 0
    optimizers: list[str] = Field(default_factory=list)
    notes: list[str] = Field(default_factory=list)


class CheckpointScan(BaseModel):
    """``torchwise ckpt scan``: one verdict per file, with the evidence."""

    verdict: Verdict
    files: list[CheckpointEntry]
