"""The project index: facts that cross functions and files, and the engine's
robustness on the code real projects contain (cycles, star imports, huge files,
names that shadow torch). Each case is a minimal reproduction of a miss or a
false alarm seen in real code (issue 12); no third-party code is copied here.
"""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from torchwise.review import ReviewSettings, review_paths, review_source


def project(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))
    return root


def found(
    root: Path, *paths: str, select: tuple[str, ...] | None = None
) -> set[tuple[str, int, str]]:
    settings = ReviewSettings(select=select) if select else ReviewSettings()
    targets = [root / path for path in paths] if paths else [root]
    report = review_paths(targets, settings, jobs=1)
    return {(Path(f.path).relative_to(root).as_posix(), f.line, f.code) for f in report.findings}


def codes(source: str, *select: str) -> list[tuple[int, str]]:
    findings = review_source(textwrap.dedent(source), "t.py", ReviewSettings(select=select))
    return [(f.line, f.code) for f in findings]


MODELS = """\
    import torch
    from torch import nn


    class Plain(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(4, 2)

        def forward(self, x):
            return self.fc(x)


    class Dropped(Plain):
        def __init__(self):
            super().__init__()
            self.drop = nn.Dropout(0.1)


    class Scorer(nn.Module):
        def __init__(self):
            super().__init__()
            self.head = nn.Sequential(nn.Linear(4, 1), nn.Sigmoid())

        def forward(self, x):
            return self.head(x)
    """


# -- evaluation ------------------------------------------------------------------------
def test_evaluation_in_another_file_runs_a_model_with_dropout(tmp_path: Path) -> None:
    root = project(
        tmp_path,
        {
            "models.py": MODELS,
            "engine.py": """\
                import torch

                def test(model, loader):
                    with torch.no_grad():
                        for x in loader:
                            model(x)
                """,
            "train.py": """\
                from engine import test
                from models import Dropped

                test(Dropped(), [])
                """,
        },
    )
    assert ("engine.py", 3, "TW104") in found(root, select=("TW104",))


def test_evaluating_a_model_without_dropout_or_batch_norm_is_fine(tmp_path: Path) -> None:
    root = project(
        tmp_path,
        {
            "models.py": MODELS,
            "engine.py": """\
                import torch

                def evaluate(model, loader):
                    with torch.no_grad():
                        return [model(x) for x in loader]
                """,
            "train.py": """\
                from engine import evaluate
                from models import Plain

                evaluate(Plain(), [])
                """,
        },
    )
    assert found(root, select=("TW104",)) == set()


def test_evaluation_called_after_eval_in_another_file_is_fine(tmp_path: Path) -> None:
    root = project(
        tmp_path,
        {
            "models.py": MODELS,
            "engine.py": """\
                import torch

                def evaluate(model, loader):
                    with torch.no_grad():
                        return [model(x) for x in loader]
                """,
            "train.py": """\
                from engine import evaluate
                from models import Dropped

                model = Dropped()
                model.eval()
                evaluate(model, [])
                """,
        },
    )
    assert found(root, select=("TW104",)) == set()


def test_a_helper_in_another_file_that_sets_eval_mode_counts(tmp_path: Path) -> None:
    root = project(
        tmp_path,
        {
            "engine.py": """\
                def train_one_epoch(model, loader, optimizer):
                    model.train()
                    for x in loader:
                        optimizer.zero_grad()
                        model(x).sum().backward()
                        optimizer.step()

                def evaluate(model, loader):
                    model.eval()
                    return [model(x) for x in loader]
                """,
            "main.py": """\
                from engine import evaluate, train_one_epoch

                for epoch in range(3):
                    train_one_epoch(model, loader, optimizer)
                    evaluate(model, loader)
                """,
        },
    )
    assert not {code for _, _, code in found(root)} & {"TW104", "TW105"}


def test_a_star_imported_helper_named_like_a_builtin_is_followed(tmp_path: Path) -> None:
    """``format(model, loader)`` is the project's own helper when a star import may
    have brought it in: its effect (eval mode) reaches the callers of ``run_epoch``
    (the builtin's calls are left out of the index; a star import keeps them in)."""
    root = project(
        tmp_path,
        {
            "engine.py": """\
                def train_one_epoch(model, loader, optimizer):
                    for x in loader:
                        optimizer.zero_grad()
                        model(x).sum().backward()
                        optimizer.step()

                def format(model, loader):
                    model.eval()
                    return [model(x) for x in loader]
                """,
            "steps.py": """\
                from engine import *

                def run_epoch(model, loader, optimizer):
                    train_one_epoch(model, loader, optimizer)
                    format(model, loader)
                """,
            "main.py": """\
                from steps import run_epoch

                for epoch in range(3):
                    run_epoch(model, loader, optimizer)
                """,
        },
    )
    assert ("main.py", 4, "TW105") in found(root)


# -- losses across files --------------------------------------------------------------
def test_a_sigmoid_head_in_another_file_fed_to_bce_loss(tmp_path: Path) -> None:
    root = project(
        tmp_path,
        {
            "models.py": MODELS,
            "train.py": """\
                from torch import nn
                from models import Scorer

                model = Scorer()
                criterion = nn.BCELoss()
                loss = criterion(model(x), y)
                """,
        },
    )
    assert ("train.py", 6, "TW502") in found(root, "train.py", select=("TW502",))


# -- checkpoints across files ------------------------------------------------------------
def test_a_load_of_what_another_file_saves_whole(tmp_path: Path) -> None:
    root = project(
        tmp_path,
        {
            "train.py": """\
                import argparse
                import torch

                args = argparse.ArgumentParser().parse_args()
                torch.save(model, "model.pt")
                torch.save({"args": args, "weights": model.state_dict()}, "checkpoint.pt")
                """,
            "predict.py": """\
                import torch

                model = torch.load("model.pt")
                checkpoint = torch.load("checkpoint.pt")
                settings = checkpoint["args"]
                weights = torch.load("checkpoint.pt")["weights"]
                """,
        },
    )
    result = found(root, select=("TW416", "TW301"))
    assert ("predict.py", 3, "TW416") in result
    assert ("predict.py", 4, "TW416") in result
    # TW301 never offers weights_only=True for a load that would then fail.
    assert ("predict.py", 3, "TW301") not in result
    assert ("predict.py", 4, "TW301") not in result
    # Reading only "weights" does not help: the unpickler stops at the Namespace
    # anywhere in the file, so that load fails too.
    assert ("predict.py", 6, "TW416") in result
    assert ("predict.py", 6, "TW301") not in result


def test_a_project_pinned_below_2_6_keeps_the_old_default(tmp_path: Path) -> None:
    root = project(
        tmp_path,
        {
            "requirements.txt": "torch==2.1.2\n",
            "predict.py": """\
                import torch

                model = torch.load("model.pt")
                model.eval()
                """,
        },
    )
    assert ("predict.py", 3, "TW416") not in found(root, select=("TW416",))


def test_a_project_declaring_torch_2_6_needs_no_weights_only(tmp_path: Path) -> None:
    root = project(
        tmp_path,
        {
            "pyproject.toml": '[project]\nname = "p"\ndependencies = ["torch>=2.6"]\n',
            "load.py": 'import torch\nstate = torch.load("weights.pt")\n',
        },
    )
    assert found(root, select=("TW301",)) == set()


OLD_GYM_SCRIPT = """\
    import gym

    env = gym.make("Pendulum-v1")
    state = env.reset()
    state, reward, done, info = env.step(env.action_space.sample())
    """


def _severities(root: Path) -> dict[tuple[str, int], str]:
    report = review_paths([root], ReviewSettings(select=("TW148",)), jobs=1)
    return {
        (Path(f.path).relative_to(root).as_posix(), f.line): f.severity.value
        for f in report.findings
    }


def test_gym_code_written_for_the_old_api_throughout_gets_hints(tmp_path: Path) -> None:
    root = project(tmp_path, {"main.py": OLD_GYM_SCRIPT})
    assert _severities(root) == {("main.py", 4): "info", ("main.py", 5): "info"}


def test_old_gym_api_in_a_project_that_uses_the_new_one_elsewhere(tmp_path: Path) -> None:
    new_api = """\
        import gym

        env = gym.make("CartPole-v1")
        state, info = env.reset(seed=0)
        state, reward, terminated, truncated, info = env.step(0)
        over = terminated or truncated
        """
    root = project(tmp_path, {"main.py": OLD_GYM_SCRIPT, "dqn.py": new_api})
    assert _severities(root) == {("main.py", 4): "error", ("main.py", 5): "error"}


def test_resume_that_restores_the_model_but_not_the_optimizer(tmp_path: Path) -> None:
    source = """\
        import torch

        checkpoint = torch.load("ckpt.pt")
        model.load_state_dict(checkpoint["model"])
        start = checkpoint["epoch"]
        for epoch in range(start, 10):
            for x in loader:
                optimizer.zero_grad()
                model(x).sum().backward()
                optimizer.step()
            state = {"model": model.state_dict(), "epoch": epoch}
            torch.save(state, "ckpt.pt")
        """
    assert codes(source, "TW603") == [(3, "TW603")]


# -- training across functions -----------------------------------------------------------
def test_a_loader_passed_to_a_training_function_in_another_file(tmp_path: Path) -> None:
    root = project(
        tmp_path,
        {
            "engine.py": """\
                def train(model, loader, optimizer):
                    for x in loader:
                        optimizer.zero_grad()
                        model(x).sum().backward()
                        optimizer.step()
                """,
            "main.py": """\
                from torch.utils.data import DataLoader
                from engine import train

                loader = DataLoader(dataset, batch_size=8)
                train(model, loader, optimizer)
                """,
        },
    )
    assert ("main.py", 4, "TW115") in found(root, select=("TW115",))


def test_a_training_script_seeded_by_a_helper_in_another_file(tmp_path: Path) -> None:
    files = {
        "utils.py": "import torch\n\ndef init_random(n):\n    torch.manual_seed(n)\n",
        "train.py": """\
            from utils import init_random

            def main():
                init_random(0)
                for x in loader:
                    optimizer.zero_grad()
                    model(x).sum().backward()
                    optimizer.step()

            if __name__ == "__main__":
                main()
            """,
    }
    assert found(project(tmp_path, files), select=("TW604",)) == set()


def test_a_seed_set_when_a_project_module_is_imported_seeds_the_importer(
    tmp_path: Path,
) -> None:
    train = """\
        import numpy as np
        import torch
        from lib.model import Net, train_step

        for x in loader:
            train_step(Net(), x)
        """
    model = """\
        import torch
        {seed}

        class Net(torch.nn.Module):
            pass

        def train_step(model, x):
            optimizer.zero_grad()
            model(x).sum().backward()
            optimizer.step()
        """
    seeded = {
        "train.py": train,
        "lib/__init__.py": "",
        "lib/model.py": model.replace("{seed}", "torch.manual_seed(0)"),
    }
    assert found(project(tmp_path / "seeded", seeded), select=("TW604",)) == set()
    guarded = dict(seeded)
    guarded["lib/model.py"] = model.replace(
        "{seed}", 'if __name__ == "__main__":\n            torch.manual_seed(0)'
    )
    flagged = found(project(tmp_path / "guarded", guarded), select=("TW604",))
    assert {path for path, _, _ in flagged} == {"train.py"}  # a guarded seed runs only as main


def test_a_top_level_training_script_that_never_seeds() -> None:
    source = """\
        import torch

        for x, y in loader:
            optimizer.zero_grad()
            criterion(model(x), y).backward()
            optimizer.step()
        """
    assert codes(source, "TW604") == [(3, "TW604")]


WORKER = """\
    import torch


    def train_worker(rank, model, loader, optimizer):
        {seed}
        for x, y in loader:
            optimizer.zero_grad()
            torch.nn.functional.cross_entropy(model(x), y).backward()
            optimizer.step()
    """


@pytest.mark.parametrize(
    ("launch", "seed", "expected"),
    [
        ("torch.multiprocessing.spawn(train_worker, nprocs=2)", "pass", {("main.py", 6)}),
        ("torch.multiprocessing.spawn(train_worker, nprocs=2)", "torch.manual_seed(rank)", set()),
        ("app.run(train_worker)", "pass", {("main.py", 6)}),
        ("multiprocessing.Process(target=train_worker).start()", "pass", {("main.py", 6)}),
    ],
)
def test_training_in_a_function_another_runs(
    tmp_path: Path, launch: str, seed: str, expected: set[tuple[str, int]]
) -> None:
    """mp.spawn(fn), Process(target=fn) and absl's app.run(fn) run fn: the script trains."""
    main = textwrap.dedent(WORKER).format(seed=seed) + textwrap.dedent(
        f"""\

        if __name__ == "__main__":
            import multiprocessing
            from absl import app
            {launch}
        """
    )
    root = project(tmp_path, {"main.py": main})
    found_here = {(path, line) for path, line, _ in found(root, select=("TW604",))}
    assert found_here == expected


def test_seeding_only_a_data_split_leaves_torch_unseeded(tmp_path: Path) -> None:
    root = project(
        tmp_path,
        {
            "data.py": """\
                import random


                def split(lines):
                    random.seed(1234)
                    random.shuffle(lines)
                    return lines[:10], lines[10:]
                """,
            "train.py": """\
                import torch
                from data import split

                train, test = split(list(range(100)))
                model = torch.nn.Linear(4, 2)
                for x, y in loader:
                    optimizer.zero_grad()
                    criterion(model(x), y).backward()
                    optimizer.step()
                """,
        },
    )
    report = review_paths([root], ReviewSettings(select=("TW604",)), jobs=1)
    [finding] = report.findings
    assert finding.line == 6 and "never torch's" in finding.message


def test_a_launcher_given_the_seed_seeds() -> None:
    source = """\
        import colossalai
        import torch

        colossalai.launch_from_torch(config={}, seed=args.seed)
        for x, y in loader:
            optimizer.zero_grad()
            criterion(model(x), y).backward()
            optimizer.step()
        """
    assert codes(source, "TW604") == []


def test_seeding_torch_but_drawing_from_python_random() -> None:
    source = """\
        import random
        import torch

        torch.manual_seed(1)
        pairs = [random.randint(0, 9) for _ in range(8)]
        for x, y in loader:
            optimizer.zero_grad()
            criterion(model(x), y).backward()
            optimizer.step()
        """
    assert codes(source, "TW604") == [(5, "TW604")]
    assert codes(source.replace("torch.manual_seed(1)", "random.seed(1)"), "TW604") == []


def test_training_through_an_instance_method() -> None:
    source = """\
        class Agent:
            def learn(self, batch):
                self.optimizer.zero_grad()
                self.loss(batch).backward()
                self.optimizer.step()

        agent = Agent()
        for episode in range(10):
            agent.learn(batch)
        """
    assert codes(source, "TW604") == [(9, "TW604")]


# -- the false alarms of the last round ---------------------------------------------------
def test_distributed_autograd_loops_have_no_gradients_to_zero() -> None:
    source = """\
        import torch.distributed.autograd as dist_autograd

        for x, y in loader:
            with dist_autograd.context() as context_id:
                loss = criterion(model(x), y)
                dist_autograd.backward(context_id, [loss])
                optimizer.step(context_id)
        """
    assert codes(source, "TW101") == []


def test_clipping_on_the_branch_without_amp_is_fine() -> None:
    source = """\
        import torch

        def step(model, loss, optimizer, scaler, use_amp):
            if use_amp:
                scaler.scale(loss).backward()
                scaler.unscale_(optimizer)
                torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
                scaler.step(optimizer)
            else:
                loss.backward()
                torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
                optimizer.step()
        """
    assert codes(source, "TW109") == []


# -- engine robustness -----------------------------------------------------------------
def test_a_cycle_of_imports(tmp_path: Path) -> None:
    root = project(
        tmp_path,
        {
            "a.py": "from b import helper\nfrom torch import nn\n\nclass A(nn.Module):\n    pass\n",
            "b.py": "from a import A\n\ndef helper():\n    return A()\n",
            "pkg/__init__.py": "from .x import *\n",
            "pkg/x.py": "from . import y\nfrom .y import *\n",
            "pkg/y.py": "from . import x\nfrom .x import *\n",
        },
    )
    report = review_paths([root], ReviewSettings(), jobs=1)
    assert len(report.files) == 5
    assert not [f for f in report.findings if f.code == "TW000"]


def test_star_imports_bring_torch_and_classes_along(tmp_path: Path) -> None:
    root = project(
        tmp_path,
        {
            "model.py": """\
                import torch
                from torch import nn

                class RNN(nn.Module):
                    def __init__(self):
                        super().__init__()
                        self.drop = nn.Dropout()
                """,
            "predict.py": """\
                from model import *

                rnn = torch.load("rnn.pt")
                rnn.eval()
                """,
        },
    )
    assert ("predict.py", 3, "TW416") in found(root, "predict.py", select=("TW416",))


def test_a_ten_thousand_line_file() -> None:
    body = "".join(
        f"def f{n}(x):\n    return torch.zeros(3).to(x.device) + {n}\n" for n in range(5000)
    )
    source = "import torch\n" + body
    assert len(source.splitlines()) > 10_000
    findings = review_source(source, "big.py", ReviewSettings())
    assert not [f for f in findings if f.code == "TW000"]


@pytest.mark.parametrize(
    "source",
    [
        "import numpy as torch\nx = torch.load('a.npy')\nx.eval()\n",  # another module called torch
        "import torch\n\ndef f(torch):\n    return torch.load('a.pt')\n",  # a parameter
        "import torch\ntorch = Registry()\nm = torch.load('m.pt')\nm.eval()\n",  # reassigned
    ],
)
def test_code_that_shadows_torch_is_not_torch(source: str) -> None:
    findings = review_source(source, "t.py", ReviewSettings(select=("TW301", "TW416")))
    assert findings == []


def test_a_cuda_default_tensor_type_puts_plain_tensors_on_the_gpu() -> None:
    source = """\
        import torch

        if torch.cuda.is_available():
            torch.set_default_tensor_type("torch.cuda.FloatTensor")
        net = torch.nn.Linear(4, 4).cuda()
        scale = torch.Tensor([2.0, 2.0, 2.0, 2.0])
        out = net(torch.ones(1, 4).cuda()) * scale
        """
    assert codes(source, "TW701") == []
    unchanged = source.replace(
        'torch.set_default_tensor_type("torch.cuda.FloatTensor")',
        "torch.set_default_dtype(torch.float64)",
    )
    assert codes(unchanged, "TW701")


def test_a_pickle_the_project_writes_itself_is_a_hint(tmp_path: Path) -> None:
    root = project(
        tmp_path,
        {
            "prepare.py": "import dill\n\nwith open('v.pkl', 'wb') as f:\n    dill.dump(v, f)\n",
            "train.py": "import dill\nimport pickle\n\nvocab = dill.load(open('vocab.pkl', 'rb'))\n"
            "stats = pickle.load(open('stats.pkl', 'rb'))\n",
        },
    )
    report = review_paths([root], ReviewSettings(select=("TW305",)), jobs=1)
    assert {(f.line, f.severity.value) for f in report.findings} == {(4, "info"), (5, "warning")}


_DECODER = """\
    import torch


    def decode(model, src, opt):
        outputs = torch.zeros(2, 8, device=opt.device).long()
        lengths = torch.zeros(2, dtype=torch.long).cuda()
        return outputs, lengths
    """


def test_unguarded_cuda_in_a_module_whose_importer_falls_back_to_the_cpu(tmp_path: Path) -> None:
    script = """\
        import argparse
        from decoder import decode

        parser = argparse.ArgumentParser()
        parser.add_argument("--no_cuda", action="store_true")
        opt = parser.parse_args()
        opt.device = "cuda" if not opt.no_cuda else "cpu"
        decode(None, None, opt)
        """
    root = project(tmp_path, {"translate.py": script, "decoder.py": _DECODER})
    assert found(root, select=("TW708",)) == {("decoder.py", 6, "TW708")}


def test_an_importer_whose_fallback_already_fails_is_told_there_alone(tmp_path: Path) -> None:
    script = """\
        import torch
        from decoder import decode

        device = "cuda" if torch.cuda.is_available() else "cpu"
        mask = torch.ones(3).cuda()
        decode(None, None, device)
        """
    root = project(tmp_path, {"demo.py": script, "decoder.py": _DECODER})
    assert found(root, select=("TW708",)) == {("demo.py", 5, "TW708")}


def test_unguarded_cuda_in_a_gpu_only_project_is_fine(tmp_path: Path) -> None:
    script = """\
        from decoder import decode

        decode(None, None, opt)
        """
    # and a CPU fallback somewhere else in the project, in a file that does not import it
    other = 'import torch\ndevice = "cuda" if torch.cuda.is_available() else "cpu"\n'
    root = project(tmp_path, {"translate.py": script, "decoder.py": _DECODER, "other.py": other})
    assert found(root, select=("TW708",)) == set()


def test_a_factory_given_an_unknown_device_is_not_on_the_cpu(tmp_path: Path) -> None:
    # BLOOM's alibi: `torch.arange(n, device=hidden_states.device)` next to slopes made
    # on the device by a helper
    source = """\
        import torch


        def _slopes(heads, device):
            return torch.full((heads,), 0.5, device=device)


        def alibi(hidden_states, n):
            slopes = _slopes(2, hidden_states.device)
            return slopes[:, None, None] * torch.arange(n, device=hidden_states.device)


        def broken(hidden_states, n):
            slopes = _slopes(2, hidden_states.device)
            return slopes[:, None, None] * torch.arange(n)
        """
    root = project(tmp_path, {"model.py": source})
    assert found(root, select=("TW701",)) == {("model.py", 15, "TW701")}


def test_a_draw_from_numpy_in_another_file_of_a_script_that_seeds_only_torch(
    tmp_path: Path,
) -> None:
    files = {
        "agent.py": """\
            import numpy as np

            def update(model, optimizer, batch):
                order = np.random.permutation(len(batch))
                for index in order:
                    optimizer.zero_grad()
                    model(batch[index]).sum().backward()
                    optimizer.step()
            """,
        "train.py": """\
            import torch
            from agent import update

            if __name__ == "__main__":
                torch.manual_seed(0)
                model = torch.nn.Linear(2, 1)
                optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
                update(model, optimizer, [torch.randn(2)])
            """,
    }
    root = project(tmp_path, files)
    assert ("train.py", 4, "TW604") in found(root, select=("TW604",))
    files["train.py"] = (
        files["train.py"]
        .replace("torch.manual_seed(0)", "torch.manual_seed(0)\n                np.random.seed(0)")
        .replace("import torch\n", "import numpy as np\n            import torch\n")
    )
    root = project(tmp_path / "seeded", files)
    assert not [item for item in found(root, select=("TW604",)) if item[0] == "train.py"]


def test_a_load_is_a_warning_unless_the_project_provably_writes_the_file(tmp_path: Path) -> None:
    root = project(
        tmp_path,
        {
            "requirements.txt": "torch>=2.0\n",
            "train.py": """\
                import argparse
                import glob
                import os

                import torch

                parser = argparse.ArgumentParser()
                parser.add_argument("--resume")
                parser.add_argument("--out")
                args = parser.parse_args()


                def save(model, epoch):
                    torch.save(model.state_dict(), os.path.join(args.out, f"epoch_{epoch}.pth"))


                def restore(path):
                    return torch.load(path)


                user = torch.load(args.resume)
                mine = torch.load(os.path.join(args.out, "epoch_3.pth"))
                latest = torch.load(sorted(glob.glob(os.path.join(args.out, "epoch_*.pth")))[-1])
                passed = restore(args.resume)
                """,
        },
    )
    report = review_paths([root], ReviewSettings(select=("TW301",)), jobs=1)
    by_line = {finding.line: finding for finding in report.findings}
    assert by_line[21].severity.value == "warning" and "command line" in by_line[21].message
    assert by_line[22].severity.value == "info"
    assert by_line[23].severity.value == "info"
    assert by_line[18].severity.value == "warning" and "args.resume" in by_line[18].message


def test_a_save_through_a_forwarding_helper_is_read_at_its_callers(tmp_path: Path) -> None:
    root = project(
        tmp_path,
        {
            "misc.py": """\
                import torch

                def save_on_master(*args, **kwargs):
                    torch.save(*args, **kwargs)
                """,
            "main.py": """\
                import argparse
                import torch
                from misc import save_on_master

                args = argparse.ArgumentParser().parse_args()

                def save(model, optimizer, epoch):
                    to_save = {"model": model.state_dict(), "optimizer": optimizer.state_dict(),
                               "epoch": epoch, "args": args}
                    save_on_master(to_save, "checkpoint.pth")

                def resume(model, optimizer, path):
                    checkpoint = torch.load(path)
                    model.load_state_dict(checkpoint["model"])
                    optimizer.load_state_dict(checkpoint["optimizer"])
                    return checkpoint["epoch"]
                """,
        },
    )
    assert ("main.py", 13, "TW416") in found(root, select=("TW416",))


def test_a_yacs_config_in_a_checkpoint_fails_the_weights_only_load(tmp_path: Path) -> None:
    root = project(
        tmp_path,
        {
            "config.py": """\
                from yacs.config import CfgNode as CN

                _C = CN()
                _C.MODEL = CN()

                def get_config():
                    return _C.clone()
                """,
            "utils.py": """\
                import torch

                def save_checkpoint(config, model, optimizer, epoch, path):
                    state = {"model": model.state_dict(), "optimizer": optimizer.state_dict(),
                             "epoch": epoch, "config": config}
                    torch.save(state, path)

                def load_checkpoint(model, optimizer, path):
                    checkpoint = torch.load(path, map_location="cpu")
                    model.load_state_dict(checkpoint["model"])
                    optimizer.load_state_dict(checkpoint["optimizer"])
                """,
        },
    )
    assert ("utils.py", 9, "TW416") in found(root, select=("TW416",))


def test_a_conda_environment_file_declares_the_torch_range(tmp_path: Path) -> None:
    files = {
        "environment.yml": "dependencies:\n  - python=3.10\n  - pytorch=2.2.2\n",
        "train.py": """\
            import argparse
            import torch

            args = argparse.ArgumentParser().parse_args()
            torch.save({"args": args, "weights": {}}, "checkpoint.pt")
            settings = torch.load("checkpoint.pt")["args"]
            """,
    }
    pinned = found(project(tmp_path / "pinned", files), select=("TW416",))
    assert not pinned  # torch 2.2 loads it: weights_only became the default in 2.6
    files["environment.yml"] = "dependencies:\n  - pytorch>=2.1\n"
    assert ("train.py", 6, "TW416") in found(project(tmp_path / "open", files), select=("TW416",))


def test_an_unused_rate_equal_to_the_optimizers_default_changes_nothing() -> None:
    source = """\
        import torch

        learning_rate = 1e-3

        def build(model):
            return torch.optim.Adam(model.parameters())
        """
    assert codes(source, "TW145") == []  # Adam's default lr is 1e-3 in every release
    assert codes(source.replace("1e-3", "3e-4"), "TW145") == [(6, "TW145")]


def test_a_range_older_than_the_tables_still_knows_the_optimizers_default(
    tmp_path: Path,
) -> None:
    files = {
        "requirements.txt": "torch==1.0\n",
        "train.py": """\
            import torch

            lr = 1e-3

            def build(model):
                return torch.optim.Adam(model.parameters())
            """,
    }
    assert not found(project(tmp_path / "same", files), select=("TW145",))
    files["train.py"] = files["train.py"].replace("1e-3", "3e-4")
    assert ("train.py", 6, "TW145") in found(project(tmp_path / "other", files), select=("TW145",))


def test_a_device_set_by_a_helper_in_another_file_is_each_ranks_own(tmp_path: Path) -> None:
    train = """\
        import os

        import torch
        from torch.nn.parallel import DistributedDataParallel as DDP
        from dist_helper import setup

        def main(model):
            {setup}
            local_rank = int(os.environ["LOCAL_RANK"])
            model.cuda()
            return DDP(model, device_ids=[local_rank])
        """
    helper = """\
        import os

        import torch
        import torch.distributed as dist

        def setup():
            torch.cuda.set_device(int(os.environ["LOCAL_RANK"]))
            dist.init_process_group("nccl")
        """
    files = {"train.py": train.replace("{setup}", "setup()"), "dist_helper.py": helper}
    assert not found(project(tmp_path / "set", files), select=("TW803",))
    files["train.py"] = train.replace("{setup}", "pass")
    assert ("train.py", 11, "TW803") in found(project(tmp_path / "unset", files), select=("TW803",))
