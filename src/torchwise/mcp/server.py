"""``torchwise mcp``: torchwise's capabilities as an MCP server (official SDK, 2.x).

Tools return typed, structured results (the pydantic models of
:mod:`torchwise.project.schema`), so an agent reads measured numbers, not prose.
Resources serve the rule documentation and the project knowledge; prompts give
each agent role its instructions (:mod:`torchwise.agents.roles`).

Safety, because a language model chooses the arguments:

- every path and model target is confined to the workspace root given at start
  (:mod:`torchwise.mcp.workspace`); symbolic links are resolved first;
- nothing is written unless a tool's explicit argument says so (only
  ``document_model`` and ``write_tests`` with ``write=true`` write, and only a
  workspace file);
- every call runs in a worker process with a time limit and is killed at the
  limit, so a hanging forward or a crashing extension cannot take the server
  down; long tools report progress between steps, and a call stopped at the
  limit says which step was running;
- arguments that do not fit a tool's schema are answered in one line per
  argument (``depth: Input should be less than or equal to 8 (got 99)``), without
  pydantic's error-page links.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any, Literal

import anyio
from mcp.server import MCPServer
from mcp.server.mcpserver import Context
from mcp.server.mcpserver.exceptions import ToolError, UnexpectedToolError
from mcp.types import ToolAnnotations
from pydantic import Field, ValidationError

from torchwise import __version__
from torchwise.errors import TorchwiseError
from torchwise.isolation import Job, finish
from torchwise.mcp import jobs
from torchwise.mcp.workspace import Workspace
from torchwise.project.schema import (
    CheckpointContents,
    CheckpointScan,
    DocResult,
    DoctorSummary,
    FixPreview,
    ModelMeasure,
    ProjectKnowledge,
    ProjectReport,
    ReviewSummary,
    RuleDoc,
    TestsResult,
)
from torchwise.project.workers import WORKER_PRELOAD

DEFAULT_TIME_LIMIT = 300.0
READ_ONLY = ToolAnnotations(read_only_hint=True, destructive_hint=False, open_world_hint=False)

Target = Annotated[
    str,
    Field(
        description="the model: path/to/model.py:Name (a class, instance or factory), a "
        "name configured in the workspace's [tool.torchwise.models], or zoo:NAME"
    ),
]
Inputs = Annotated[
    list[str],
    Field(
        description="one input spec per forward argument, e.g. 'f32[batch=8,3,32,32]' or "
        "'ids=i64[batch=2,seq=128]<50257'; empty: the configured or factory inputs"
    ),
]
InitKwargs = Annotated[
    dict[str, Any] | None, Field(description="constructor keyword arguments, as a JSON object")
]

INSTRUCTIONS = """\
torchwise measures PyTorch code and models so that you do not have to guess. Start with
`project_knowledge` (stack, torch, layout, commands, models and how to build them). Use
`review` for bugs in code (TW### findings with file:line), `inspect_model` for shapes,
parameters, FLOPs and memory, `diagnose_model` for health checks from running the model,
`document_model` for measured docstrings, `run_script` to run a training script for a
few steps and prove a bug by what it does, and `scan_checkpoint` before loading any
checkpoint. Paths are relative to the workspace root; nothing is written unless a tool's
`write` argument is true."""


class _Server:
    """The tools' shared state: the workspace and the time limit per call."""

    def __init__(self, workspace: Workspace, time_limit: float) -> None:
        self.workspace = workspace
        self.time_limit = time_limit

    async def run(
        self, ctx: Context | None, function: Callable[..., Any], *args: Any, what: str
    ) -> Any:
        """Run ``function(*args, progress)`` in a worker; progress goes to the client."""
        job = await anyio.to_thread.run_sync(
            Job, function, args, self.workspace.root, WORKER_PRELOAD
        )
        doing = ""  # the job's last progress message: what it was doing if it is stopped
        try:
            with anyio.fail_after(self.time_limit):
                while True:
                    for message in job.messages(0):
                        if message[0] == "progress":
                            doing = message[3] or doing
                            if ctx is not None:
                                await ctx.report_progress(
                                    message[1], message[2], message[3] or None
                                )
                        elif message[0] != "partial":
                            return finish(message)
                    await anyio.sleep(0.05)
        except TimeoutError:
            raise ToolError(stopped_message(what, self.time_limit, doing)) from None
        except TorchwiseError as exc:
            raise ToolError(str(exc)) from None
        finally:
            await anyio.to_thread.run_sync(job.kill)

    def paths(self, values: list[str]) -> list[Path]:
        try:
            return [self.workspace.path(value) for value in values or ["."]]
        except TorchwiseError as exc:
            raise ToolError(str(exc)) from None

    def new_path(self, value: str) -> Path:
        """A workspace path that need not exist yet (a file a tool may write)."""
        try:
            return self.workspace.path(value, must_exist=False)
        except TorchwiseError as exc:
            raise ToolError(str(exc)) from None

    def model(self, target: str) -> tuple[str, Path | None]:
        try:
            resolved = self.workspace.model(target)
        except TorchwiseError as exc:
            raise ToolError(str(exc)) from None
        return resolved.target, resolved.config_start


def stopped_message(what: str, time_limit: float, doing: str) -> str:
    """What a call stopped at its time limit was doing (its last progress step)."""
    during = f" during {doing}" if doing else " before it reported any progress"
    return (
        f"{what} took longer than the time limit of {time_limit:g}s and was stopped{during}; "
        "the server's --time-limit sets it"
    )


def argument_errors(tool: str, error: ValidationError) -> str:
    """One line per argument that does not fit ``tool``'s schema, without pydantic's links."""
    problems = []
    for item in error.errors(include_url=False):
        where = ".".join(str(part) for part in item["loc"]) or "arguments"
        problem = f"{where}: {item['msg']}"
        if item["type"] != "missing":
            given = repr(item.get("input"))
            problem += f" (got {given if len(given) <= 80 else given[:77] + '...'})"
        problems.append(problem)
    return f"{tool}: invalid arguments: " + "; ".join(problems)


class _TorchwiseServer(MCPServer):
    """The SDK's server, with argument errors said plainly (:func:`argument_errors`)."""

    async def call_tool(
        self, name: str, arguments: dict[str, Any], context: Context[Any, Any] | None = None
    ) -> Any:
        try:
            return await super().call_tool(name, arguments, context)
        except ToolError as exc:
            cause = exc.__cause__
            if isinstance(cause, ValidationError) and not isinstance(exc, UnexpectedToolError):
                raise ToolError(argument_errors(name, cause)) from cause
            raise


def build_server(
    root: str | Path = ".",
    *,
    time_limit: float = DEFAULT_TIME_LIMIT,
    log_level: Literal["DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"] = "WARNING",
) -> MCPServer:
    """The MCP server for the workspace at ``root``; ``time_limit`` seconds per tool call;
    the SDK's own log records (on stderr) from ``log_level`` up."""
    workspace = Workspace.at(root)
    state = _Server(workspace, time_limit)
    server = _TorchwiseServer(
        name="torchwise",
        title="torchwise: PyTorch expert tools",
        instructions=INSTRUCTIONS,
        version=__version__,
        log_level=log_level,
    )
    _register_tools(server, state)
    _register_resources(server, state)
    _register_prompts(server)
    return server


def _register_tools(server: MCPServer, state: _Server) -> None:
    root = state.workspace.root

    @server.tool(annotations=READ_ONLY)
    async def project_knowledge(ctx: Context) -> ProjectKnowledge:
        """The project's stack, declared and installed torch, CUDA/MPS, model, checkpoint,
        training and config dirs, its train/test/export/profile commands, and every
        nn.Module class with how torchwise can build it. Runs none of the project's code."""
        result: ProjectKnowledge = await state.run(
            ctx, jobs.project_knowledge, root, what="reading the project"
        )
        return result

    @server.tool(
        annotations=ToolAnnotations(
            read_only_hint=False, destructive_hint=True, open_world_hint=False
        )
    )
    async def audit_project(
        ctx: Context,
        run: Annotated[
            bool,
            Field(
                description="run the project's training command for a few steps under "
                "torchwise run (EXECUTES the project's code; stand-ins for missing data, "
                "weights and GPUs)"
            ),
        ] = True,
        doctor: Annotated[
            str, Field(description="health checks per model: quick, full, off, or check ids")
        ] = "quick",
        max_models: Annotated[int, Field(ge=0, le=16)] = 4,
    ) -> ProjectReport:
        """The whole audit in one report: review, the training command run, each model
        built and doctored, each checkpoint scanned, merged into `merged`: one deduplicated
        list in the reviewer's order (critical, performance, practice, positive, tests),
        each entry with what found it, whether running the code confirmed a static
        finding, and whether only running the code shows it. Builds models and runs the
        training command: this EXECUTES the project's code."""
        budget = max(60.0, state.time_limit - 30.0)
        result: ProjectReport = await state.run(
            ctx, jobs.audit_project, root, run, doctor, max_models, budget, what="auditing"
        )
        return result

    @server.tool(annotations=READ_ONLY)
    async def review(
        ctx: Context,
        paths: Annotated[
            list[str], Field(description="files or directories; default: the workspace")
        ] = [],  # noqa: B006
        select: Annotated[
            list[str] | None, Field(description="rule codes or prefixes to enable only")
        ] = None,
        ignore: Annotated[list[str], Field(description="rule codes or prefixes to disable")] = [],  # noqa: B006
        max_findings: Annotated[int, Field(ge=1, le=5000)] = 300,
    ) -> ReviewSummary:
        """Static review of PyTorch code: TW### findings (training loops, modules, numerics,
        security, performance, deprecated APIs) with file:line, severity and fix titles.
        Never imports the code."""
        checked = state.paths(paths)
        result: ReviewSummary = await state.run(
            ctx, jobs.review, root, checked, select, ignore, max_findings, what="review"
        )
        return result

    @server.tool(annotations=READ_ONLY)
    def explain_rule(code: Annotated[str, Field(description="a rule code, e.g. TW101")]) -> RuleDoc:
        """What a review rule catches, why it is a bug, an example, and the fix."""
        from torchwise.project.evidence import rule_doc
        from torchwise.review import get_rule

        info = get_rule(code.strip())
        if info is None:
            raise ToolError(
                f"no rule {code!r}; rule codes look like TW101 (see resource torchwise://rules)"
            )
        return rule_doc(info)

    @server.tool(annotations=READ_ONLY)
    async def fix_preview(
        ctx: Context,
        paths: Annotated[
            list[str], Field(description="files or directories; default: the workspace")
        ] = [],  # noqa: B006
        unsafe: Annotated[
            bool, Field(description="also the fixes that need a human glance")
        ] = False,
    ) -> FixPreview:
        """The autofixes review would apply, as unified diffs. Writes nothing."""
        checked = state.paths(paths)
        result: FixPreview = await state.run(
            ctx, jobs.fix_preview, root, checked, unsafe, what="fix preview"
        )
        return result

    @server.tool(annotations=READ_ONLY)
    async def inspect_model(
        ctx: Context,
        target: Target,
        inputs: Inputs = [],  # noqa: B006
        init_kwargs: InitKwargs = None,
        device: Annotated[
            Literal["meta", "cpu"], Field(description="meta: no compute, no memory")
        ] = "meta",
        depth: Annotated[int, Field(ge=1, le=8, description="layer rows down to this depth")] = 2,
    ) -> ModelMeasure:
        """Measured facts of a model: per-layer output shapes, parameters, forward and
        training FLOPs, activation and training memory. Imports the model's file."""
        model, config = state.model(target)
        result: ModelMeasure = await state.run(
            ctx,
            jobs.inspect_model,
            model,
            inputs,
            init_kwargs,
            config,
            device,
            depth,
            what=f"inspect {target}",
        )
        return result

    @server.tool(annotations=READ_ONLY)
    async def diagnose_model(
        ctx: Context,
        target: Target,
        inputs: Inputs = [],  # noqa: B006
        init_kwargs: InitKwargs = None,
        checks: Annotated[
            list[str] | None, Field(description="doctor check ids; default: all")
        ] = None,
        causal_dim: Annotated[
            int | None, Field(description="sequence dim for the causal-leak check")
        ] = None,
        loss: Annotated[str, Field(description="auto, ce, mse, bce")] = "auto",
    ) -> DoctorSummary:
        """Health checks by running the model on one batch: gradient flow, samples or future
        positions leaking, dropout left on in eval, loss at init, overfitting one batch,
        dead units, NaN/inf, determinism, bf16 drift, export. Each with evidence and a fix."""
        model, config = state.model(target)
        result: DoctorSummary = await state.run(
            ctx, jobs.diagnose_model, model, inputs, init_kwargs, config, checks, causal_dim, loss,
            what=f"doctor on {target}",
        )  # fmt: skip
        return result

    @server.tool(
        annotations=ToolAnnotations(
            read_only_hint=False, destructive_hint=False, open_world_hint=False
        )
    )
    async def document_model(
        ctx: Context,
        target: Target,
        inputs: Inputs = [],  # noqa: B006
        init_kwargs: InitKwargs = None,
        mode: Annotated[
            Literal["print", "diff", "check"],
            Field(description="print the docstrings, diff against the source, or check staleness"),
        ] = "diff",
        write: Annotated[bool, Field(description="update the source file's docstrings")] = False,
    ) -> DocResult:
        """Measured Google-style docstrings for a model class: symbolic shapes, parameters,
        complexity, train/eval differences and an executed example. Writes the class's
        file only with write=true (and only a workspace file)."""
        model, config = state.model(target)
        result: DocResult = await state.run(
            ctx, jobs.document_model, root, model, inputs, init_kwargs, config,
            "write" if write else mode, what=f"documenting {target}",
        )  # fmt: skip
        return result

    @server.tool(
        annotations=ToolAnnotations(
            read_only_hint=False, destructive_hint=False, open_world_hint=False
        )
    )
    async def write_tests(
        ctx: Context,
        target: Target,
        inputs: Inputs = [],  # noqa: B006
        init_kwargs: InitKwargs = None,
        checks: Annotated[
            list[str] | None, Field(description="doctor check ids to consider; default: all")
        ] = None,
        output: Annotated[
            str | None,
            Field(description="the test file's workspace path, for write or check"),
        ] = None,
        check: Annotated[
            bool, Field(description="compare the file at output with a fresh generation")
        ] = False,
        write: Annotated[bool, Field(description="write the module to output")] = False,
        force: Annotated[bool, Field(description="with write: replace an existing file")] = False,
    ) -> TestsResult:
        """A pytest module for a model, as `torchwise tests` writes it: the shape contract
        with symbolic dims, the doctor checks that apply, a state_dict round trip, eval
        determinism, dtype/device moves; each test is run once before it is kept, and
        each left out says why. Returns the text; writes only with write=true, to output
        (a workspace path), never over an existing file unless force=true."""
        if (write or check) and not output:
            raise ToolError("write and check need output: a workspace path like tests/test_net.py")
        if write and check:
            raise ToolError("write and check exclude each other: choose one")
        model, config = state.model(target)
        destination = state.new_path(output) if output and (write or check) else None
        result: TestsResult = await state.run(
            ctx, jobs.write_tests, root, model, inputs, init_kwargs, config, checks, destination,
            "write" if write else "check" if check else "generate", force,
            what=f"writing tests for {target}",
        )  # fmt: skip
        return result

    @server.tool(annotations=READ_ONLY)
    async def scan_checkpoint(
        ctx: Context, path: Annotated[str, Field(description="a checkpoint file or directory")]
    ) -> CheckpointScan:
        """Is this checkpoint safe to load? An allowlist verdict for every global its pickles
        reference, with evidence. Never executes the pickle."""
        checked = state.paths([path])[0]
        result: CheckpointScan = await state.run(
            ctx, jobs.scan_checkpoint, root, checked, what="scan"
        )
        return result

    @server.tool(annotations=READ_ONLY)
    async def inspect_checkpoint(
        ctx: Context,
        path: Annotated[str, Field(description="a checkpoint file")],
        max_tensors: Annotated[int, Field(ge=1, le=20000)] = 500,
    ) -> CheckpointContents:
        """Tensors (key, dtype, shape, role), totals and optimizer state of a checkpoint,
        read from its structure without executing it."""
        checked = state.paths([path])[0]
        result: CheckpointContents = await state.run(
            ctx, jobs.inspect_checkpoint, root, checked, max_tensors, what="checkpoint inspect"
        )
        return result

    from torchwise.mcp import run_tool

    run_tool.register(server, state)  # run_script: torchwise run, confined to the workspace


def _register_resources(server: MCPServer, state: _Server) -> None:
    @server.resource("torchwise://rules", mime_type="text/markdown")
    def rules_index() -> str:
        """Every review rule: code, name, severity and what it catches."""
        from torchwise.review import all_rules

        lines = [
            "# torchwise review rules",
            "",
            "| code | name | severity | catches |",
            "|---|---|---|---|",
        ]
        for info in all_rules().values():
            lines.append(f"| {info.code} | {info.name} | {info.severity.value} | {info.summary} |")
        return "\n".join(lines) + "\n"

    @server.resource("torchwise://rules/{code}", mime_type="text/markdown")
    def rule_doc(code: str) -> str:
        """One rule's documentation: what it does, why, example, fix."""
        from torchwise.review import get_rule

        info = get_rule(code)
        if info is None:
            raise ValueError(f"no rule {code!r}")
        return f"# {info.code} {info.name}\n\n{info.doc}\n"

    @server.resource("torchwise://project/knowledge", mime_type="application/json")
    async def knowledge_json() -> str:
        """The project knowledge (as the project_knowledge tool returns it)."""
        knowledge = await _knowledge(state)
        return knowledge.model_dump_json(indent=2)

    @server.resource("torchwise://project/knowledge.md", mime_type="text/markdown")
    async def knowledge_markdown() -> str:
        """The project knowledge as Markdown (what agent definitions embed)."""
        from torchwise.project import knowledge_markdown as render

        return render(await _knowledge(state))


async def _knowledge(state: _Server) -> ProjectKnowledge:
    try:
        result: ProjectKnowledge = await state.run(
            None, jobs.project_knowledge, state.workspace.root, what="reading the project"
        )
    except ToolError as exc:
        raise ValueError(str(exc)) from None
    return result


def _register_prompts(server: MCPServer) -> None:
    from torchwise.agents.roles import ROLES, Role

    def prompt_for(role: Role) -> Callable[[str], str]:
        def prompt(task: str = "") -> str:
            request = f"\n\n## The task\n\n{task.strip()}\n" if task.strip() else ""
            return role.instructions() + request

        prompt.__doc__ = role.description
        return prompt

    for role in ROLES:
        server.prompt(name=role.name, title=role.title, description=role.description)(
            prompt_for(role)
        )
