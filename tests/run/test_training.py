"""Training-loop checks on the patterns that look like bugs and are not (and the ones that are)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from run_helpers import codes

Run = Callable[..., dict[str, Any]]

GAN = """
import torch
from torch import nn

torch.manual_seed(0)
G = nn.Sequential(nn.Linear(2, 8), nn.BatchNorm1d(8), nn.ReLU(), nn.Linear(8, 4))
D = nn.Sequential(nn.Linear(4, 8), nn.LeakyReLU(0.2), nn.Dropout(0.3), nn.Linear(8, 1))
opt_g = torch.optim.Adam(G.parameters(), lr=1e-3)
opt_d = torch.optim.Adam(D.parameters(), lr=1e-3)
bce = nn.BCEWithLogitsLoss()
for step in range(4):
    real = torch.randn(16, 4)
    z = torch.randn(16, 2)
    # discriminator: real vs fake (the fake detached), zeroed before its backward
    D.zero_grad()
    fake = G(z)
    loss_d = bce(D(real), torch.ones(16, 1)) + bce(D(fake.detach()), torch.zeros(16, 1))
    loss_d.backward()
    opt_d.step()
    # generator: its backward reaches D's parameters too, which D zeroes next time
    G.zero_grad()
    loss_g = bce(D(fake), torch.ones(16, 1))
    loss_g.backward()
    opt_g.step()
    with torch.no_grad():
        samples = G(torch.randn(16, 2))  # sampling in train mode, then more training
"""


def test_gan_training_is_clean(run: Run) -> None:
    assert codes(run(GAN), serious=True) == []


def test_unused_output_is_a_hint_and_a_detach_a_warning(run: Run) -> None:
    source = """
    import torch
    from torch import nn

    class Net(nn.Module):
        def __init__(self, cut):
            super().__init__()
            self.cut = cut
            self.encoder = nn.Linear(4, 8)
            self.pooler = nn.Linear(8, 8)
            self.head = nn.Linear(8, 2)

        def forward(self, x):
            h = self.encoder(x)
            pooled = self.pooler(h)  # computed, never used by the loss
            if self.cut:
                h = h.detach()
            return self.head(torch.relu(h))

    for cut in (False, True):
        model = Net(cut)
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        for step in range(3):
            loss = nn.functional.cross_entropy(model(torch.randn(8, 4)), torch.randint(0, 2, (8,)))
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
    """
    result = run(source)
    found = {(f["code"], f["severity"], f["message"].split("`")[1]) for f in result["findings"]}
    assert ("TWR102", "info", "pooler") in found
    assert ("TWR102", "warning", "encoder") in found
    assert not any(f[0] == "TWR102" and f[1] == "warning" and f[2] != "encoder" for f in found)


def test_frozen_by_no_grad_is_a_hint(run: Run) -> None:
    source = """
    import torch
    from torch import nn

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.backbone = nn.Linear(4, 8)
            self.head = nn.Linear(8, 2)

        def forward(self, x):
            with torch.no_grad():
                features = self.backbone(x)
            return self.head(features)

    model = Net()
    optimizer = torch.optim.AdamW(model.parameters(), lr=0.1)
    for step in range(3):
        loss = nn.functional.cross_entropy(model(torch.randn(8, 4)), torch.randint(0, 2, (8,)))
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    """
    result = run(source)
    assert [(f["code"], f["severity"]) for f in result["findings"]] == [("TWR102", "info")]


OPTIMIZED_PART = """
import torch
from torch import nn

model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 8), nn.ReLU(), nn.Linear(8, 2))
{load}
optimizer = torch.optim.SGD(model[{part}].parameters(), lr=0.1)
for step in range(3):
    loss = nn.functional.cross_entropy(model(torch.randn(8, 4)), torch.randint(0, 2, (8,)))
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
"""


PRETRAINED = """
torch.save(nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 8)).state_dict(), "backbone.pt")
model[:3].load_state_dict(torch.load("backbone.pt"))
"""


def test_a_trained_head_alone_is_a_hint_a_left_out_head_a_warning(run: Run) -> None:
    """A head trained on a loaded backbone is fine-tuning (a hint: the backbone's gradients
    are wasted); on a backbone nothing loaded, the head learns from a random layer."""
    head_only = run(OPTIMIZED_PART.format(part="4:", load=PRETRAINED))
    assert {(f["code"], f["severity"]) for f in head_only["findings"]} == {("TWR103", "info")}
    random_backbone = run(OPTIMIZED_PART.format(part="4:", load=""))
    (found,) = [f for f in random_backbone["findings"] if f["code"] == "TWR103"]
    assert found["severity"] == "warning" and "random initialisation" in found["message"]
    backbone_only = run(OPTIMIZED_PART.format(part=":3", load=""))
    assert ("TWR103", "warning") in {(f["code"], f["severity"]) for f in backbone_only["findings"]}


def test_a_scaler_the_script_disabled_is_left_alone(run: Run) -> None:
    source = """
    import torch
    from torch import nn

    model = nn.Linear(4, 2)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    scaler = torch.amp.GradScaler("cuda", enabled=False)
    for step in range(3):
        loss = model(torch.randn(8, 4)).sum()
        optimizer.zero_grad()
        scaler.scale(loss).backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
    """
    assert codes(run(source)) == []


def test_a_per_batch_scheduler_after_the_step_is_clean(run: Run) -> None:
    source = """
    import torch
    from torch import nn

    model = nn.Linear(4, 2)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    scheduler = torch.optim.lr_scheduler.OneCycleLR(optimizer, max_lr=0.1, total_steps=10)
    for step in range(4):
        loss = model(torch.randn(8, 4)).pow(2).mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        scheduler.step()
    """
    assert codes(run(source)) == []


def test_losses_appended_with_their_graph_are_kept_alive(run: Run) -> None:
    source = """
    import torch
    from torch import nn

    model = nn.Linear(4, 2)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    history, values = [], []
    for step in range(5):
        loss = model(torch.randn(8, 4)).pow(2).mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        history.append(loss)
        values.append(loss.item())
    """
    result = run(source)
    kept = [f for f in result["findings"] if f["code"] == "TWR109"]
    assert len(kept) == 1 and "`history`" in kept[0]["message"] and kept[0]["line"] == 13


def test_a_running_list_is_reported_where_it_grows_not_where_it_is_averaged(run: Run) -> None:
    source = """
    import torch
    from torch import nn
    from torch.utils.data import DataLoader, TensorDataset

    model = nn.Linear(4, 2)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    loader = DataLoader(TensorDataset(torch.randn(64, 4)), batch_size=8, shuffle=True)
    for epoch in range(2):
        losses = []
        for (x,) in loader:
            loss = model(x).pow(2).mean()
            losses.append(loss)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        losses = torch.stack(losses).mean().item()
    """
    (kept,) = [f for f in run(source)["findings"] if f["code"] == "TWR109"]
    assert "`losses`" in kept["message"] and kept["line"] == 13


def test_nan_from_the_data_and_from_the_loss(run: Run) -> None:
    from_data = """
    import torch
    from torch import nn

    model = nn.Linear(4, 2)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for step in range(3):
        x = torch.randn(8, 4)
        x[0, 0] = float("nan")
        loss = model(x).pow(2).mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    """
    found = [f for f in run(from_data)["findings"] if f["code"] == "TWR110"]
    assert len(found) == 1 and "batch" in found[0]["data"]["cause"]
    from_loss = """
    import torch
    from torch import nn

    model = nn.Linear(4, 2)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for step in range(3):
        out = model(torch.randn(8, 4))
        loss = torch.log(out - 100.0).mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    """
    found = [f for f in run(from_loss)["findings"] if f["code"] == "TWR110"]
    assert len(found) == 1 and found[0]["line"] == 9


def test_argv_and_the_main_guard_are_the_scripts(tmp_path: Any) -> None:
    from torchwise.run.child import execute
    from torchwise.run.options import RunOptions, Target

    script = tmp_path / "argv.py"
    script.write_text(
        "import sys\nif __name__ == '__main__':\n"
        "    assert sys.argv[1:] == ['--lr', '0.1'], sys.argv\n    sys.exit(3)\n"
    )
    result = execute(Target(str(script), None, ("--lr", "0.1")), RunOptions())
    assert result["exit_status"] == 3
    assert [(f["code"], f["line"]) for f in result["findings"]] == [("TWR001", 4)]


def test_a_frozen_table_does_not_split_a_detached_encoder(run: Run) -> None:
    source = """
    import torch
    from torch import nn

    class Encoder(nn.Module):
        def __init__(self):
            super().__init__()
            self.embed = nn.Embedding(10, 8)
            self.positions = nn.Embedding.from_pretrained(torch.randn(5, 8), freeze=True)
            self.layers = nn.ModuleList([nn.Linear(8, 8) for _ in range(2)])

        def forward(self, ids):
            x = self.embed(ids) + self.positions(torch.arange(5))
            for layer in self.layers:
                x = layer(x)
            return x

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.encoder = Encoder()
            self.head = nn.Linear(8, 2)

        def forward(self, ids):
            memory = self.encoder(ids)
            memory = memory.detach()
            return self.head(memory).mean(1)

    model = Net()
    optimizer = torch.optim.Adam(model.parameters())
    for step in range(3):
        ids, labels = torch.randint(0, 10, (4, 5)), torch.randint(0, 2, (4,))
        loss = nn.functional.cross_entropy(model(ids), labels)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    """
    found = [(f["code"], f["severity"], f["line"]) for f in run(source)["findings"]]
    assert found == [("TWR102", "warning", 25)]  # memory = self.encoder(ids)


ENDLESS = """
import itertools
import torch
from torch import nn
from torch.utils.data import DataLoader, IterableDataset


class Stream(IterableDataset):
    def __iter__(self):
        for _ in itertools.count():
            yield torch.randn(4), torch.randn(1)


def batches():
    for x, y in DataLoader(Stream(), batch_size=8):
        yield x, y


model = nn.Linear(4, 1)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
stream = batches()
for step in range(1000):
    x, y = next(stream)  # an endless stream: the script never expects it to end
    loss = nn.functional.mse_loss(model(x), y)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
"""


def test_next_on_an_endless_loader_the_budget_ended_is_the_budget(run: Run) -> None:
    result = run(ENDLESS, steps=3)
    assert result["exit_status"] is None and result["steps"] == 3
    assert codes(result) == []


def test_a_stop_iteration_of_the_scripts_own_is_still_a_crash(run: Run) -> None:
    result = run("first = next(iter([]))\n")
    assert codes(result) == ["TWR001"]


def test_a_sampling_loop_after_the_training_steps_is_stopped(run: Any) -> None:
    result = run(
        """
        import torch
        from torch.utils.data import DataLoader, TensorDataset

        model = torch.nn.Linear(4, 4)
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        loader = DataLoader(TensorDataset(torch.randn(64, 4)), batch_size=4)
        for (x,) in loader:
            optimizer.zero_grad()
            model(x).pow(2).mean().backward()
            optimizer.step()
        sample = torch.randn(1, 4)
        with torch.no_grad():
            for t in range(100_000):  # a denoising loop: no DataLoader, no backward
                sample = model(sample)
        print("SAMPLED")
        """,
        steps=3,
    )
    assert "a sampling or generation loop" in result["stopped_by"]
    assert result["steps"] == 3


def test_rollouts_before_the_first_update_are_not_cut(run: Any) -> None:
    result = run(
        """
        import torch

        policy = torch.nn.Linear(4, 2)
        optimizer = torch.optim.Adam(policy.parameters())
        for update in range(4):
            with torch.no_grad():
                for step in range(300):  # a rollout: many calls, no backward
                    policy(torch.randn(1, 4))
            optimizer.zero_grad()
            policy(torch.randn(8, 4)).sum().backward()
            optimizer.step()
        """,
        steps=5,
    )
    assert result["steps"] == 4 and result["stopped_by"] in ("", None)


def _found(result: dict[str, Any], code: str) -> list[tuple[str, int]]:
    return [(f["severity"], f["line"]) for f in result["findings"] if f["code"] == code]


CLEARED = """
import torch
from torch import nn

torch.manual_seed(0)
model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))
optimizer = torch.optim.{optimizer}(model.parameters(), lr=0.1)
for step in range(4):
    loss = nn.functional.cross_entropy(model(torch.randn(8, 4)), torch.randint(0, 2, (8,)))
    loss.backward()
    {clear}
    optimizer.step()
"""


def test_gradients_cleared_between_backward_and_step_are_an_error(run: Run) -> None:
    for optimizer, clear in [
        ("SGD", "optimizer.zero_grad()"),
        ("Adam", "model.zero_grad(set_to_none=False)"),
    ]:
        result = run(CLEARED.format(optimizer=optimizer, clear=clear))
        assert _found(result, "TWR112") == [("error", 11)], (optimizer, codes(result))


def test_zero_grad_before_backward_or_after_step_is_clean(run: Run) -> None:
    result = run(
        CLEARED.format(optimizer="SGD", clear="pass").replace(
            "    loss.backward()\n", "    optimizer.zero_grad()\n    loss.backward()\n"
        )
    )
    assert codes(result, serious=True) == []
    closure = run(
        """
        import torch
        from torch import nn

        model = nn.Linear(4, 1)
        optimizer = torch.optim.LBFGS(model.parameters(), max_iter=3)
        x, y = torch.randn(16, 4), torch.randn(16, 1)
        def closure():
            optimizer.zero_grad()
            loss = nn.functional.mse_loss(model(x), y)
            loss.backward()
            return loss
        for step in range(3):
            optimizer.step(closure)
        """
    )
    assert "TWR112" not in codes(closure)


def test_a_discriminator_zeroed_between_the_generators_backward_and_step_is_clean(
    run: Run,
) -> None:
    zeroed = GAN.replace("    loss_g.backward()\n", "    loss_g.backward()\n    D.zero_grad()\n")
    result = run(zeroed)
    assert "TWR112" not in codes(result)


DQN = """
import copy
import torch
from torch import nn

torch.manual_seed(0)
policy = nn.Sequential(nn.Linear(4, 16), nn.ReLU(), nn.Linear(16, 2))
target = copy.deepcopy(policy)
optimizer = torch.optim.Adam({optimized}.parameters(), lr=1e-3)
for step in range(5):
    state, next_state = torch.randn(8, 4), torch.randn(8, 4)
    q = policy(state).max(1).values
    with torch.no_grad():
        expected = 0.99 * target(next_state).max(1).values + 1.0
    loss = nn.functional.smooth_l1_loss(q, expected)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
"""


def test_an_optimizer_built_on_the_wrong_network_is_an_error(run: Run) -> None:
    wrong = run(DQN.format(optimized="target"))
    assert [s for s, _ in _found(wrong, "TWR103")] == ["error"]
    right = run(DQN.format(optimized="policy"))
    assert codes(right, serious=True) == []


PROBABILITIES = """
import torch
from torch import nn

torch.manual_seed(0)
model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 3){head})
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
criterion = nn.{loss}()
for step in range(3):
    x, y = torch.randn(8, 4), torch.randint(0, 3, (8,))
    loss = criterion(model(x), y)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
"""


def test_probabilities_fed_to_a_loss_that_normalises_are_an_error(run: Run) -> None:
    for head, loss in [
        (", nn.Softmax(dim=1)", "CrossEntropyLoss"),
        ("", "NLLLoss"),  # raw scores where log-probabilities belong
        (", nn.Softmax(dim=1)", "NLLLoss"),
    ]:
        result = run(PROBABILITIES.format(head=head, loss=loss))
        assert [s for s, _ in _found(result, "TWR306")] == ["error"], (head, loss, codes(result))


def test_scores_and_log_probabilities_where_they_belong_are_clean(run: Run) -> None:
    for head, loss in [
        ("", "CrossEntropyLoss"),
        (", nn.LogSoftmax(dim=1)", "NLLLoss"),
        # log_softmax is idempotent: cross entropy of log-probabilities is the same loss
        (", nn.LogSoftmax(dim=1)", "CrossEntropyLoss"),
    ]:
        result = run(PROBABILITIES.format(head=head, loss=loss))
        assert "TWR306" not in codes(result), (head, loss)


def test_a_sigmoid_before_a_loss_with_logits_is_an_error(run: Run) -> None:
    source = """
    import torch
    from torch import nn

    model = nn.Sequential(nn.Linear(4, 1){head})
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for step in range(3):
        x, y = torch.randn(8, 4), torch.randint(0, 2, (8, 1)).float()
        loss = nn.functional.binary_cross_entropy_with_logits(model(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    """
    assert [s for s, _ in _found(run(source.format(head=", nn.Sigmoid()")), "TWR306")] == ["error"]
    assert "TWR306" not in codes(run(source.format(head="")))


ACCUMULATION = """
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

torch.manual_seed(0)
model = nn.Linear(4, 2)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
data = TensorDataset(torch.randn(64, 4), torch.randint(0, 2, (64,)))
loader = DataLoader(data, batch_size=4, shuffle=True)
accumulate = 4
for i, (x, y) in enumerate(loader):
    loss = nn.functional.cross_entropy(model(x), y){scale}
    loss.backward()
    if (i + 1) % accumulate == 0:
        optimizer.step()
        optimizer.zero_grad()
"""


def test_accumulation_without_averaging_is_a_warning(run: Run) -> None:
    result = run(ACCUMULATION.format(scale=""))
    assert _found(result, "TWR113") == [("warning", 14)], codes(result)
    assert "TWR113" not in codes(run(ACCUMULATION.format(scale=" / accumulate")))


def test_two_losses_of_one_batch_backpropagated_apart_are_no_accumulation(run: Run) -> None:
    result = run(
        """
        import torch
        from torch import nn
        from torch.utils.data import DataLoader, TensorDataset

        D = nn.Linear(4, 1)
        optimizer = torch.optim.SGD(D.parameters(), lr=0.1)
        bce = nn.BCEWithLogitsLoss()
        loader = DataLoader(TensorDataset(torch.randn(32, 4)), batch_size=4, shuffle=True)
        for (real,) in loader:
            optimizer.zero_grad()
            bce(D(real), torch.ones(4, 1)).backward()
            bce(D(torch.randn(4, 4)), torch.zeros(4, 1)).backward()
            optimizer.step()
        """
    )
    assert codes(result, serious=True) == []


SYNCED = """
import copy
import torch
from torch import nn

torch.manual_seed(0)
policy = nn.Sequential(nn.Linear(4, 16), nn.ReLU(), nn.Linear(16, 2))
target = copy.deepcopy(policy)
target.load_state_dict(policy.state_dict())
optimizer = torch.optim.Adam({optimized}.parameters(), lr=1e-3)
for step in range(6):
    state, next_state = torch.randn(8, 4), torch.randn(8, 4)
    q = policy(state).max(1).values
    expected = 0.99 * target(next_state).max(1).values + 1.0  # no no_grad: both get gradients
    loss = nn.functional.smooth_l1_loss(q, expected)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    if step % 2 == 1:
        {sync}
"""


def test_a_trained_network_overwritten_by_an_unchanged_one_is_an_error(run: Run) -> None:
    reversed_sync = run(
        SYNCED.format(optimized="policy", sync="policy.load_state_dict(target.state_dict())")
    )
    assert _found(reversed_sync, "TWR114") == [("error", 20)], codes(reversed_sync)
    target_optimized = run(
        SYNCED.format(optimized="target", sync="target.load_state_dict(policy.state_dict())")
    )
    assert _found(target_optimized, "TWR114") == [("error", 20)], codes(target_optimized)


def test_a_target_network_synced_from_the_trained_one_is_clean(run: Run) -> None:
    result = run(
        SYNCED.format(optimized="policy", sync="target.load_state_dict(policy.state_dict())")
    )
    assert "TWR114" not in codes(result)
    restored = run(
        SYNCED.format(optimized="policy", sync="policy.load_state_dict(best)").replace(
            "optimizer.step()\n",
            "optimizer.step()\n    best = copy.deepcopy(policy.state_dict())\n",
        )
    )
    assert "TWR114" not in codes(restored)


def test_a_parameter_its_forward_does_not_use_is_a_hint(run: Run) -> None:
    result = run(
        """
        import torch
        from torch import nn

        class Net(nn.Module):
            def __init__(self, learn_eps=False):
                super().__init__()
                self.eps = nn.Parameter(torch.zeros(1))  # only used with learn_eps
                self.body = nn.Linear(4, 2)
                self.learn_eps = learn_eps

            def forward(self, x):
                return self.body(x * (1 + self.eps) if self.learn_eps else x)

        model = Net()
        optimizer = torch.optim.Adam(model.parameters())
        for step in range(3):
            loss = nn.functional.cross_entropy(model(torch.randn(8, 4)), torch.randint(0, 2, (8,)))
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        """
    )
    assert [(f["code"], f["severity"]) for f in result["findings"]] == [("TWR102", "info")]


def test_probabilities_over_a_sequence_are_read_along_the_class_dimension(run: Run) -> None:
    source = """
    import torch
    from torch import nn

    model = nn.Linear(4, 5)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for step in range(3):
        x, y = torch.randn(8, 7, 4), torch.randint(0, 5, (8, 7))
        scores = model(x){head}.transpose(1, 2)  # (batch, classes, tokens)
        loss = nn.functional.cross_entropy(scores, y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    """
    assert "TWR306" in codes(run(source.format(head=".softmax(-1)")))
    assert "TWR306" not in codes(run(source.format(head="")))


SOFT_UPDATE = """
import copy
import torch
from torch import nn

online = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))
target = copy.deepcopy(online)
optimizer = torch.optim.Adam(online.parameters(), lr=1e-2)
tau = 0.05
for step in range(6):
    state, next_state = torch.randn(16, 4), torch.randn(16, 4)
    with torch.no_grad():
        goal = target(next_state).max(1).values
    loss = nn.functional.mse_loss(online(state).max(1).values, goal)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    for {pair} in zip(target.parameters(), online.parameters()):
        target_param.data.copy_(tau * online_param.data + (1 - tau) * target_param.data)
"""


def test_a_soft_update_that_pulls_the_trained_network_toward_the_target(run: Run) -> None:
    """Written the wrong way round, the target never changes and every step pulls the
    trained weights back to it (TWR114, at the update's line)."""
    wrong = run(SOFT_UPDATE.format(pair="online_param, target_param"))
    (found,) = [f for f in wrong["findings"] if f["code"] == "TWR114"]
    assert found["severity"] == "error" and found["line"] == 19
    assert "moved toward the Sequential called at line 13" in found["message"]
    right = run(SOFT_UPDATE.format(pair="target_param, online_param"))
    assert codes(right, serious=True) == []


def test_reptile_copies_the_changing_meta_weights_into_the_fast_ones(run: Run) -> None:
    source = """
    import copy
    import torch
    from torch import nn

    meta = nn.Linear(4, 2)
    fast = copy.deepcopy(meta)
    optimizer = torch.optim.SGD(fast.parameters(), lr=0.1)
    for task in range(4):
        for param, meta_param in zip(fast.parameters(), meta.parameters()):
            param.data.copy_(meta_param.data)
        for inner in range(2):
            loss = fast(torch.randn(8, 4)).pow(2).mean()
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        with torch.no_grad():
            for meta_param, param in zip(meta.parameters(), fast.parameters()):
                meta_param += 0.5 * (param - meta_param)
        meta(torch.randn(2, 4))
    """
    assert codes(run(source), serious=True) == []


def test_a_small_soft_update_step_is_seen_through_float32_rounding(run: Run) -> None:
    """tau = 0.001 moves float32 weights by a few ulps' worth: the pull is still told apart."""
    source = SOFT_UPDATE.format(pair="online_param, target_param").replace(
        "tau = 0.05", "tau = 0.001"
    )
    assert "TWR114" in codes(run(source), serious=True)
