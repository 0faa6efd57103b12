"""The ``run_script`` MCP tool: ``torchwise run`` for an agent that must prove a bug.

It executes a training script of the workspace, as ``torchwise run`` does, and
returns typed findings. Confinement: the script must be a workspace file, and
it runs with the workspace root as its working directory, in a worker process
under the server's time limit (the run itself stops a little earlier, so its
findings still come back). The script's output is returned (its tail), never
written to the MCP stream.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Literal

from mcp.server import MCPServer
from mcp.server.mcpserver import Context
from mcp.types import ToolAnnotations
from pydantic import BaseModel, Field

#: the script's output kept in the result, from its end
OUTPUT_TAIL = 4000
#: seconds the run leaves to the worker, inside the server's time limit, to report
MARGIN = 15.0


class RunFinding(BaseModel):
    """One finding of a run, at the user's file:line."""

    code: str
    name: str
    severity: Literal["error", "warning", "info"]
    path: str
    line: int
    column: int
    message: str
    evidence: dict[str, str] = Field(default_factory=dict)


class RunResult(BaseModel):
    """What ``torchwise run`` found, and how far the script got."""

    script: str
    args: list[str]
    steps: int = Field(description="optimizer steps the script made")
    training_passes: int
    evaluation_passes: int
    exit_status: int | None = Field(description="the script's; None when the budget ended it")
    stopped_by: str = Field(description="why the run was stopped; empty when the script ended")
    as_cuda: bool
    ranks: int = Field(description="ranks under nproc, or processes the script's mp.spawn began")
    findings: list[RunFinding]
    notes: list[str]
    output_tail: str = Field(description="the end of what the script printed")


def run_script_job(
    root: Path,
    script: Path,
    args: list[str],
    steps: int,
    as_cuda: bool | None,
    gpus: int,
    nproc: int,
    timeout: float,
    stand_ins: bool,
    progress: Any,
) -> RunResult:
    """Run ``script`` under the checks (in the worker, whose working directory is
    ``root``); ``as_cuda`` None: as on a GPU when this machine has none and the
    script would use one."""
    from torchwise.run import (
        RunOptions,
        check_target,
        get_check,
        run_script,
        simulates_gpu_by_default,
    )

    progress(0, 1, f"running {script.relative_to(root)}")
    if as_cuda is None:
        as_cuda = simulates_gpu_by_default(check_target(script, None))
    options = RunOptions(
        steps=steps, as_cuda=as_cuda, gpus=gpus if as_cuda else 0, nproc=nproc, timeout=timeout,
        stand_ins=stand_ins, script_output="capture",
    )  # fmt: skip
    report = run_script(script, args, options=options)
    summary = report.summary()
    findings = []
    for finding in report.findings:
        check = get_check(finding.code)
        path = Path(finding.path)
        inside = path.is_absolute() and (path == root or root in path.parents)
        findings.append(
            RunFinding(
                code=finding.code,
                name=check.name if check is not None else "",
                severity=finding.severity.value,
                path=str(path.relative_to(root)) if inside else finding.path,
                line=finding.line,
                column=finding.column,
                message=finding.message,
                evidence=dict(finding.data),
            )
        )
    return RunResult(
        script=str(script.relative_to(root)),
        args=list(args),
        steps=report.steps,
        training_passes=int(str(summary["training_passes"])),
        evaluation_passes=int(str(summary["evaluation_passes"])),
        exit_status=summary["exit_status"],  # type: ignore[arg-type]
        stopped_by=str(summary["stopped_by"]),
        as_cuda=as_cuda,
        ranks=int(str(summary["ranks"])),
        findings=findings,
        notes=list(summary["notes"]),  # type: ignore[call-overload]
        output_tail=report.output[-OUTPUT_TAIL:],
    )


def register(server: MCPServer, state: Any) -> None:
    """Add ``run_script`` to ``server`` (``state`` is the server's ``_Server``)."""
    root: Path = state.workspace.root

    @server.tool(
        annotations=ToolAnnotations(
            read_only_hint=False, destructive_hint=True, open_world_hint=False
        )
    )
    async def run_script(
        ctx: Context,
        script: Annotated[str, Field(description="a training script of the workspace")],
        args: Annotated[list[str], Field(description="the script's own arguments")] = [],  # noqa: B006
        steps: Annotated[
            int, Field(ge=1, le=100, description="optimizer steps per training pass")
        ] = 5,
        as_cuda: Annotated[
            bool | None,
            Field(
                description="simulate a GPU: report what would fail on the GPU node (default: "
                "yes when this machine has no GPU and the script uses CUDA; false: the CPU as is)"
            ),
        ] = None,
        gpus: Annotated[
            int,
            Field(
                ge=0,
                le=8,
                description="with as_cuda: GPUs torch.cuda.device_count() reports (0: one per "
                "rank), for scripts that mp.spawn one process per GPU",
            ),
        ] = 0,
        nproc: Annotated[
            int, Field(ge=1, le=4, description="ranks under torch.distributed.run (gloo)")
        ] = 1,
        stand_ins: Annotated[
            bool,
            Field(
                description="synthetic data for datasets whose files are missing and random "
                "weights for pretrained downloads that fail, each said in the notes (false: "
                "the real ones only)"
            ),
        ] = True,
    ) -> RunResult:
        """Run a training script of the workspace for a few steps per phase under
        torchwise's checks and return the findings (TWR### codes, file:line, evidence):
        gradients that accumulate, evaluation in train mode, unshuffled training data,
        broadcasting losses, device errors a GPU would raise (as_cuda), cross-rank bugs
        (nproc, or ranks the script starts itself with mp.spawn). This EXECUTES the script
        (with the workspace root as working directory): use it to prove a bug before
        claiming one."""
        path = state.paths([script])[0]
        if not path.is_file() or path.suffix != ".py":
            from mcp.server.mcpserver.exceptions import ToolError

            raise ToolError(f"{script!r} is not a Python script of the workspace")
        budget = max(30.0, state.time_limit - MARGIN)
        result: RunResult = await state.run(
            ctx, run_script_job, root, path, list(args), steps, as_cuda, gpus, nproc, budget,
            stand_ins, what=f"running {script}",
        )  # fmt: skip
        return result
