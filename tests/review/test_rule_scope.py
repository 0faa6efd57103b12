"""Rules whose scope is the whole file: they stay quiet in library code."""

from __future__ import annotations

from torchwise.review import ReviewSettings, review_source


def _codes(source: str, code: str) -> list[int]:
    findings = review_source(source, "lib.py", ReviewSettings(select=(code,)))
    return [f.line for f in findings if f.code == code]


def test_partial_load_in_library_code_is_not_flagged() -> None:
    # Sharded loading, adapters, weight averaging: partial loads on purpose.
    library = "def load_adapter(model, state):\n    model.load_state_dict(state, strict=False)\n"
    assert _codes(library, "TW113") == []


def test_partial_load_in_a_training_file_is_flagged() -> None:
    training = (
        "def train(model, state, loader, opt):\n"
        "    model.load_state_dict(state, strict=False)\n"
        "    for x in loader:\n"
        "        opt.zero_grad()\n"
        "        model(x).sum().backward()\n"
        "        opt.step()\n"
    )
    assert _codes(training, "TW113") == [2]


def test_accumulating_outside_a_training_loop_is_not_flagged() -> None:
    loss_function = (
        "def total_loss(criterion, outputs, targets):\n"
        "    total = 0\n"
        "    for out, y in zip(outputs, targets):\n"
        "        total += criterion(out, y)\n"
        "    return total\n"
    )
    assert _codes(loss_function, "TW106") == []


def test_load_of_allowlisted_classes_is_not_said_to_fail() -> None:
    source = (
        "import torch\n"
        "from model import Net\n"
        "with torch.serialization.safe_globals([Net]):\n"
        "    model = torch.load('model.pth')\n"
        "model.eval()\n"
    )
    assert _codes(source, "TW416") == []
    plain = source.replace("with torch.serialization.safe_globals([Net]):\n    ", "")
    assert _codes(plain, "TW416") == [3]


def test_test_modules_are_not_training_code() -> None:
    source = (
        "import torch\n"
        "def test_step(model, batches):\n"
        "    opt = torch.optim.SGD(model.parameters(), lr=0.1)\n"
        "    for x in batches:\n"
        "        model(x).sum().backward()\n"
        "        opt.step()\n"
    )
    assert _codes(source, "TW101") == [5]
    in_tests = review_source(source, "tests/test_model.py", ReviewSettings(select=("TW101",)))
    assert [f.code for f in in_tests] == []


def test_models_from_pretrained_are_in_eval_mode() -> None:
    source = (
        "import torch\n"
        "from transformers import AutoModelForImageClassification\n"
        "model = AutoModelForImageClassification.from_pretrained('vit')\n"
        "with torch.no_grad():\n"
        "    logits = model(pixels).logits\n"
    )
    assert _codes(source, "TW104") == []


def test_a_flag_call_followed_by_eval_is_not_flagged() -> None:
    source = (
        "import torch\n"
        "class Trainer:\n"
        "    def wrap(self, model, training=True):\n"
        "        out = model(torch.zeros(1))\n"
        "        return model\n"
        "    def evaluate(self):\n"
        "        model = self.wrap(self.model, training=False)\n"
        "        model.eval()\n"
    )
    assert _codes(source, "TW104") == []


def test_partial_loads_by_design_in_a_training_file_are_not_flagged() -> None:
    training = (
        "def train(unet, teacher, model, loader, opt):\n"
        "    unet.load_state_dict(teacher.state_dict(), strict=False)\n"
        "    model.load_state_dict({'w': w}, strict=False, assign=True)\n"
        "    for x in loader:\n"
        "        opt.zero_grad()\n"
        "        unet(x).sum().backward()\n"
        "        opt.step()\n"
    )
    assert _codes(training, "TW113") == []


def test_rules_about_how_a_project_trains_skip_test_modules() -> None:
    source = (
        "import torch\n"
        "def test_fit(model, loader, opt):\n"
        "    losses = []\n"
        "    for x in loader:\n"
        "        opt.zero_grad()\n"
        "        loss = model(x).sum()\n"
        "        loss.backward()\n"
        "        opt.step()\n"
        "        losses.append(loss)\n"
    )
    settings = ReviewSettings(select=("TW106",))
    assert [f.line for f in review_source(source, "train.py", settings)] == [9]
    assert review_source(source, "tests/test_fit.py", settings) == []


def _severities(source: str, code: str) -> list[tuple[int, str]]:
    findings = review_source(source, "train.py", ReviewSettings(select=(code,)))
    return [(f.line, f.severity.value) for f in findings if f.code == code]


_TRAINS_AND_SAVES = (
    "import torch\n"
    "for epoch in range(3):\n"
    "    for x in loader:\n"
    "        opt.zero_grad()\n"
    "        model(x).sum().backward()\n"
    "        opt.step()\n"
    "    torch.save({'epoch': epoch, 'model': model.state_dict()}, 'last.pt')\n"
)


def test_checkpoint_without_optimizer_is_a_hint_where_nothing_resumes() -> None:
    assert _severities(_TRAINS_AND_SAVES, "TW603") == [(7, "info")]


def test_checkpoint_without_optimizer_is_a_warning_where_the_project_resumes() -> None:
    resumes = (
        "ckpt = torch.load('last.pt')\n"
        "model.load_state_dict(ckpt['model']); epoch = ckpt['epoch']\n"
    )
    assert _severities(resumes + _TRAINS_AND_SAVES, "TW603") == [(1, "warning")]  # at the resume
    # A load that reads weights only (an evaluation, a fine-tuning start) resumes nothing.
    weights = "ckpt = torch.load('last.pt')\nmodel.load_state_dict(ckpt['model'])\n"
    assert _severities(weights + _TRAINS_AND_SAVES, "TW603") == [(9, "info")]


# -- the tensor model on library code (false errors found on the precision corpus) --------
def _lib_codes(source: str, *select: str) -> list[tuple[int, str]]:
    findings = review_source(source, "lib.py", ReviewSettings(select=select))
    return [(f.line, f.code) for f in findings]


def test_an_untracked_operand_leaves_the_rank_unknown() -> None:
    # DETR's position encoding: `dim_t` may be a tensor of any rank
    source = (
        "import torch\n"
        "def encode(mask, num, temperature):\n"
        "    x_embed = mask.cumsum(2, dtype=torch.float32)\n"
        "    dim_t = torch.arange(num, dtype=torch.float32)\n"
        "    dim_t = temperature ** (2 * (dim_t // 2) / num)\n"
        "    pos_x = x_embed[:, :, :, None] / dim_t\n"
        "    return pos_x[:, :, :, 0::2]\n"
    )
    assert _lib_codes(source, "TW706") == []


def test_a_shape_held_in_a_variable_is_not_one_size() -> None:
    source = (
        "import torch\n"
        "def f(x, b, h, d, n):\n"
        "    shape = (b, h, -1, d)\n"
        "    y = torch.zeros_like(x).reshape(shape)\n"
        "    return y[:, :, :n]\n"
    )
    assert _lib_codes(source, "TW706") == []


def test_a_local_function_named_like_a_model_is_not_a_model() -> None:
    source = (
        "import torch\n"
        "def unwrap_model(model):\n"
        "    model = accelerator.unwrap_model(model)\n"
        "    return model\n"
        "def save(transformer):\n"
        "    transformer = unwrap_model(transformer)\n"
        "    transformer.to(torch.float32)\n"
    )
    assert _lib_codes(source, "TW703") == []


def test_a_constant_shaped_like_the_output_carries_no_graph() -> None:
    source = (
        "import torch\n"
        "from torch import nn\n"
        "model = nn.Linear(4, 2)\n"
        "for x in loader:\n"
        "    output = model(x)\n"
        "    loss = torch.nn.functional.mse_loss(output, torch.ones_like(output))\n"
        "    loss.backward()\n"
    )
    assert _lib_codes(source, "TW707") == []


def test_a_local_rank_option_never_read_is_harmless() -> None:
    declared = (
        "import argparse\n"
        "parser = argparse.ArgumentParser()\n"
        "parser.add_argument('--local_rank', type=int, default=0)\n"
        "args = parser.parse_args()\n"
    )
    assert _lib_codes(declared, "TW612") == []
    assert _lib_codes(declared + "gpu = args.local_rank\n", "TW612") == [(3, "TW612")]


def test_code_a_test_expects_to_raise_is_not_reported() -> None:
    source = (
        "import pytest\n"
        "import torch\n"
        "def test_mismatch():\n"
        "    with pytest.raises(RuntimeError):\n"
        "        torch.zeros(2).cuda() + torch.zeros(2)\n"
        "def test_also():\n"
        "    torch.zeros(2).cuda() + torch.zeros(2)\n"
    )
    findings = review_source(source, "tests/test_devices.py", ReviewSettings(select=("TW701",)))
    assert [f.line for f in findings] == [7]


def test_a_discarded_dtype_conversion_is_a_warning_and_a_discarded_move_an_error() -> None:
    source = (
        "import torch\n"
        "mask = torch.ones(4, 4)\n"
        "mask.to(torch.float16)\n"
        "mask.to('cuda')\n"
        "mask.cuda()\n"
    )
    findings = review_source(source, "train.py", ReviewSettings(select=("TW703",)))
    assert [(f.line, f.severity.value) for f in findings] == [
        (3, "warning"), (4, "error"), (5, "error"),
    ]  # fmt: skip


def test_identity_checks_are_not_tensor_ops() -> None:
    source = (
        "import torch\n"
        "x = torch.zeros(2).cuda()\n"
        "y = torch.zeros(2)\n"
        "same = x is y\n"
        "mixed = x == y\n"
    )
    assert _lib_codes(source, "TW701") == [(5, "TW701")]


def test_a_string_default_only_formatted_into_text_is_harmless() -> None:
    declared = (
        "import argparse\n"
        "parser = argparse.ArgumentParser()\n"
        "parser.add_argument('--split', default=5)\n"
        "args = parser.parse_args()\n"
    )
    assert _lib_codes(declared + "name = f'train[:{args.split}%]'\n", "TW613") == []
    assert _lib_codes(declared + "n = args.split * 2\n", "TW613") == [(3, "TW613")]


def test_a_nested_function_named_like_a_model_is_not_a_model() -> None:
    source = (
        "import torch\n"
        "def main(transformer, accelerator):\n"
        "    def unwrap_model(model):\n"
        "        return accelerator.unwrap_model(model)\n"
        "    transformer = unwrap_model(transformer)\n"
        "    transformer.to(torch.float32)\n"
    )
    assert _lib_codes(source, "TW703") == []
