"""torch's in-place error names an operation; the run names the line.

The run goes again under anomaly detection (a second process), so this test
goes through ``run_script``, not the in-process runner.
"""

from __future__ import annotations

from pathlib import Path

from torchwise.run import RunOptions, run_script

SCRIPT = """\
import torch
from torch import nn

model = nn.Linear(4, 4)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
for step in range(3):
    hidden = model(torch.randn(8, 4))
    scale = hidden.exp()
    noise = torch.randn(8, 4).exp()
    scale.mul_(noise)
    loss = scale.sum()
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
"""


def test_a_tensor_changed_in_place_after_autograd_saved_it_is_found_at_its_line(
    tmp_path: Path,
) -> None:
    script = tmp_path / "train.py"
    script.write_text(SCRIPT)
    report = run_script(script, options=RunOptions(script_output="capture"))
    (crash,) = [f for f in report.findings if f.code == "TWR001"]
    assert crash.line == 8  # `scale = hidden.exp()`, not the other exp nor the backward
    assert crash.message.startswith("a tensor that autograd saved at ")
    assert "train.py:8 is changed in place afterwards" in crash.message
    assert "backward at line 13" in crash.message
    assert crash.data["found by"].endswith("detect_anomaly")
