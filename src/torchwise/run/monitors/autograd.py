"""Every ``backward``: counted, its loss checked, its graph tagged (TWR109, TWR110).

``torch.autograd.backward`` (which ``loss.backward()`` calls) is wrapped:

- the call is counted on the session with the user's line, which the gradient
  hooks of the optimizer monitor report;
- the loss is checked for NaN and inf; the first non-finite loss is diagnosed
  (parameters already non-finite, a batch with NaNs, or the first operation that
  produced one, found by replaying the forward) and reported once (TWR110);
- the loss's autograd node is tagged with the step number. After each of the
  first optimizer steps, and at the end of each evaluation pass, the tensors the
  user's frames hold (locals, lists and dicts of them, ``self``'s attributes) are
  followed into their graphs: one that reaches the tagged losses of two steps, or
  the outputs of two evaluation batches, keeps those graphs alive (TWR109).
"""

from __future__ import annotations

import os
import re
from collections import deque
from collections.abc import Iterator
from types import FrameType
from typing import Any

import torch

from torchwise.run.monitors.loader import tensors_in
from torchwise.run.monitors.modules import ModuleMonitor
from torchwise.run.monitors.replay import first_nonfinite_op
from torchwise.run.needs import IN_PLACE_ERROR
from torchwise.run.session import Pass, Session
from torchwise.run.sites import (
    Site,
    assignment_line,
    frame_site,
    is_user_file,
    user_frames,
    user_site,
)

STEP_TAG = "torchwise_step"
CALL_TAG = "torchwise_call"
#: optimizer steps after which the user's frames are searched for kept graphs
SCANNED_STEPS = 6
#: graph nodes followed per tensor
NODE_BUDGET = 512


class AutogradMonitor:
    """Wraps ``torch.autograd.backward``; looks for graphs kept across steps."""

    def __init__(self, session: Session, modules: ModuleMonitor) -> None:
        self.session = session
        self.modules = modules
        self.nonfinite_seen = False
        self._reported: set[tuple[str, str]] = set()

    def install(self) -> None:
        session = self.session
        original = torch.autograd.backward
        monitor = self

        def backward(*args: Any, **kwargs: Any) -> Any:
            tensors = args[0] if args else kwargs.get("tensors")
            if not session.replaying:
                monitor.before_backward(tensors)
            try:
                return original(*args, **kwargs)
            except RuntimeError as error:
                if IN_PLACE_ERROR in str(error) and torch.is_anomaly_enabled():
                    monitor.locate_in_place(tensors, str(error))
                raise

        session.patches.setattr(torch.autograd, "backward", backward)
        session.listen("step_post", self._after_step)
        session.listen("pass_end", self._after_pass)

    def before_backward(self, tensors: Any) -> None:
        session = self.session
        site = user_site()
        session.record_backward(site)
        losses = list(tensors_in(tensors, limit=4))
        session.emit("backward", losses)
        for loss in losses:
            node = loss.grad_fn
            if node is not None:
                node.metadata[STEP_TAG] = session.steps  # type: ignore[index]
        if not self.nonfinite_seen:
            for loss in losses:
                if loss.is_floating_point() and not bool(torch.isfinite(loss.detach()).all()):
                    self.nonfinite_seen = True
                    self._diagnose(loss, site)
                    break

    def locate_in_place(self, tensors: Any, message: str) -> None:
        """Under anomaly detection, the user's line that made the tensor a later in-place
        operation changed: autograd keeps each node's forward traceback in its metadata."""
        match = re.search(r"which is output \d+ of (\w+)", message)
        if match is None:
            return
        wanted = f"{match.group(1)}Backward"
        for loss in tensors_in(tensors, limit=4):
            for node in _nodes(loss.grad_fn):
                if not node.name().startswith(wanted) or not _saved_was_changed(node):
                    continue
                trace = node.metadata.get("traceback_") if hasattr(node, "metadata") else None
                site = _last_user_frame(trace) if trace else None
                if site is not None:
                    self.session.facts["in_place_saved_at"] = site.to_json()
                    return

    # TWR110 ----------------------------------------------------------------------
    def _diagnose(self, loss: torch.Tensor, site: Site | None) -> None:
        session = self.session
        value = float(loss.detach().reshape(-1)[0]) if loss.numel() else float("nan")
        evidence: dict[str, object] = {"loss": value, "step": session.steps + 1}
        forward = self.modules.last_forward
        if forward is not None and any(
            not bool(torch.isfinite(p.detach()).all())
            for p in forward[0].parameters() if p.is_floating_point()
        ):  # fmt: skip
            evidence["cause"] = (
                "the parameters are already non-finite (an earlier step made them so)"
            )
            where = site
        elif forward is not None and _any_nonfinite((forward[1], forward[2])):
            evidence["cause"] = "the batch the model got contains NaN or inf"
            where = site
        else:
            found = first_nonfinite_op(session, forward)
            if found is not None and found[1] is not None:
                operation, where, _ = found
                evidence["first non-finite op"] = operation
            else:
                if loss.grad_fn is not None:
                    evidence["loss computed by"] = loss.grad_fn.name()
                where = _loss_line(loss) or site
                evidence["cause"] = "the model's output is finite: the loss computation is not"
        session.report(
            "TWR110",
            where,
            f"the loss is {value} at step {session.steps + 1}: what trains after it is NaN",
            evidence=evidence,
        )

    # TWR109 ----------------------------------------------------------------------
    def _after_step(self, optimizer: Any) -> None:
        if 1 <= self.session.steps < SCANNED_STEPS:
            self._scan(STEP_TAG, "steps", None)

    def _after_pass(self, ended: Pass) -> None:
        if ended.training or ended.batches < 2:
            return
        unused = {
            c.number for c in self.modules.calls if c.pass_number == ended.number and not c.used
        }
        if len(unused) >= 2:
            self._scan(CALL_TAG, "evaluation batches", unused)

    def _scan(self, tag: str, what: str, only: set[int] | None) -> None:
        """Report a variable whose graphs reach two tagged nodes (of ``only``, if given)."""
        for frame in user_frames(limit=4):
            for name, value in _held(frame):
                tags: set[int] = set()
                for tensor in tensors_in(value, limit=64):
                    if tensor.grad_fn is not None and not isinstance(tensor, torch.nn.Parameter):
                        tags |= _tags(tensor.grad_fn, tag)
                if only is not None:
                    tags &= only
                if len(tags) >= 2:
                    self._report_kept(frame, name, len(tags), what)

    def _report_kept(self, frame: FrameType, name: str, count: int, what: str) -> None:
        key = (f"{frame.f_code.co_filename}:{frame.f_code.co_firstlineno}", name)
        if key in self._reported:
            return
        self._reported.add(key)
        here = frame_site(frame)
        line = assignment_line(frame.f_code, name, before=10**9) or here.line
        site = Site(here.path, line, function=here.function)
        self.session.report(
            "TWR109",
            site,
            f"`{name}` keeps the autograd graphs of {count} {what} alive (it holds tensors "
            "that require grad): memory grows at every iteration",
            evidence={
                "graphs held": count,
                "fix": f"accumulate `{name}` with .item() or .detach()",
            },
        )


def _nodes(root: Any, limit: int = 100_000) -> Iterator[Any]:
    """The autograd nodes under ``root`` (a bounded walk)."""
    seen: set[int] = set()
    pending = [root] if root is not None else []
    while pending and len(seen) < limit:
        node = pending.pop()
        if id(node) in seen:
            continue
        seen.add(id(node))
        yield node
        pending.extend(nxt for nxt, _ in node.next_functions if nxt is not None)


def _saved_was_changed(node: Any) -> bool:
    """Whether a tensor ``node`` saved for backward was changed in place since: reading it
    back raises torch's in-place error (several nodes of one kind may be in the graph)."""
    for name in dir(node):
        if not name.startswith("_saved_"):
            continue
        try:
            getattr(node, name)
        except RuntimeError as error:
            if IN_PLACE_ERROR in str(error):
                return True
        except Exception:  # an attribute that cannot be read says nothing
            continue
    return False


def _last_user_frame(trace: Any) -> Site | None:
    """The innermost user frame of a formatted traceback (a string or a list of lines)."""
    text = "".join(trace) if isinstance(trace, list) else str(trace)
    found: Site | None = None
    for path, line in re.findall(r'File "([^"]+)", line (\d+)', text):
        if is_user_file(path):
            found = Site(os.path.abspath(path), int(line))
    return found


def _any_nonfinite(value: Any) -> bool:
    return any(
        t.is_floating_point() and t.numel() and not bool(torch.isfinite(t).all())
        for t in tensors_in(value, limit=16)
    )


def _tags(node: Any, tag: str) -> set[int]:
    """The tag values found in the graph under ``node`` (a bounded walk)."""
    found: set[int] = set()
    seen: set[int] = set()
    queue = deque([node])
    while queue and len(seen) < NODE_BUDGET:
        current = queue.popleft()
        if id(current) in seen:
            continue
        seen.add(id(current))
        value = current.metadata.get(tag) if hasattr(current, "metadata") else None
        if isinstance(value, int):
            found.add(value)
            continue  # what lies below a tagged node belongs to that step
        queue.extend(nxt for nxt, _ in current.next_functions if nxt is not None)
    return found


def _held(frame: FrameType) -> Iterator[tuple[str, Any]]:
    """(name, value) of what a frame holds: locals, and ``self``'s attributes."""
    for name, value in list(frame.f_locals.items()):
        if name == "self" and hasattr(value, "__dict__") and not isinstance(value, torch.nn.Module):
            for attribute, held in list(vars(value).items()):
                yield f"self.{attribute}", held
        elif isinstance(value, (torch.Tensor, list, tuple, dict)):
            yield name, value


def _loss_line(loss: torch.Tensor) -> Site | None:
    """Where the variable holding ``loss`` was assigned, in the frame that called backward."""
    for frame in user_frames(limit=2):
        for name, value in frame.f_locals.items():
            if value is loss:
                here = frame_site(frame)
                line = assignment_line(frame.f_code, name, before=here.line + 1)
                return Site(here.path, line or here.line, function=here.function)
    return None
