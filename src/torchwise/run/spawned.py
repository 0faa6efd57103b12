"""One process started by the script's ``torch.multiprocessing.spawn``:
``python -m torchwise.run.spawned SPEC.pickle INDEX``.

:class:`~torchwise.run.monitors.spawn.SpawnMonitor` writes ``SPEC.pickle`` in the
run's private directory: multiprocessing's preparation data, the run's options
and ``(fn, args)`` pickled as torch's spawn pickles them. This process installs
the monitors as rank ``INDEX`` of the ``nprocs`` processes, then does what the
spawn start method does (``multiprocessing.spawn.prepare``: ``sys.argv``,
``sys.path``, the working directory, the script re-imported as
``__mp_main__``), so the script's module-level imports already see the
patched torch, and calls ``fn(INDEX, *args)``. Its result goes to
``rank<INDEX>.json`` beside the spec.
"""

from __future__ import annotations

import contextlib
import json
import multiprocessing.spawn
import pickle
import sys
from pathlib import Path
from typing import Any

from torchwise.run.child import release_process_group, result_of, run_guarded, stop_on_signal
from torchwise.run.options import RunOptions
from torchwise.run.session import Session, StopRun
from torchwise.run.sites import Site


def main(argv: list[str] | None = None) -> int:
    arguments = sys.argv[1:] if argv is None else argv
    spec_path, index = Path(arguments[0]), int(arguments[1])
    # written by this run's parent in its private directory, holding only builtins
    # (the user's fn and args stay a pickle inside until the script is imported)
    spec: dict[str, Any] = pickle.loads(spec_path.read_bytes())
    options = RunOptions.from_json(spec["options"])
    stop_on_signal("SIGTERM (the run's time limit, or another spawned process failed)")
    session = Session(
        options, workdir=str(spec_path.parent / f"rank{index}"), rank=index, world=spec["world"]
    )
    from torchwise.run.instrument import Instrumentation

    instrumentation = Instrumentation(session)
    instrumentation.install()

    def body() -> None:
        multiprocessing.spawn.prepare(spec["preparation"])
        fn, args = pickle.loads(spec["payload"])
        fn(index, *args)

    import torch

    generator_at_start = torch.get_rng_state()
    status = run_guarded(session, body)
    with contextlib.suppress(StopRun):  # a judge's replay may meet the budget
        instrumentation.finish()
    if not torch.equal(generator_at_start, torch.get_rng_state()):
        _unseeded_draws(session, spec)
    result = {**result_of(session, status), "spawned": spec["call"]}
    (spec_path.parent / f"rank{index}.json").write_text(json.dumps(result), encoding="utf-8")
    release_process_group()
    return status if isinstance(status, int) else 0


def _unseeded_draws(session: Session, spec: dict[str, Any]) -> None:
    """TWR504: this process drew from torch's generator, which the parent seeded
    (before spawning) and this process never did."""
    parent, spawned_at = spec.get("parent_seed"), spec.get("spawn_site")
    if parent is None or spawned_at is None or session.seeded_at is not None:
        return
    seed = Site.from_json(parent)
    session.report(
        "TWR504",
        Site.from_json(spawned_at),
        f"torch.manual_seed at {seed.label} seeds the parent only: the processes "
        "mp.spawn starts here are fresh interpreters whose generators start unseeded, "
        "and they drew from them (initial weights, dropout, randn, shuffles), so each "
        "run differs; seed inside the function they run",
        evidence={"parent seed": seed.label},
    )


if __name__ == "__main__":
    sys.exit(main())
