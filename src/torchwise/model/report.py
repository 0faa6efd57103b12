"""Render a :class:`ModelSummary` as text, JSON, Markdown or CSV."""

from __future__ import annotations

import csv
import io
import json

from torchwise.model.scaling import ScalingResult
from torchwise.model.summary import LayerInfo, ModelSummary
from torchwise.units import count, exact, nbytes

FORMATS = ("text", "json", "markdown", "csv")


def shapes(values: list[tuple[int, ...]]) -> str:
    return " ".join("[" + ",".join(str(d) for d in s) + "]" for s in values) or "-"


def _trainable(layer: LayerInfo) -> str:
    if layer.trainable is None:
        return "-"
    if layer.trainable:
        return "yes"
    return "partly" if layer.params_trainable else "frozen"


def _row(layer: LayerInfo) -> list[str]:
    label = f"{'  ' * layer.depth}{layer.name or '(root)'} ({layer.type_name})"
    if layer.calls > 1:
        label += f" x{layer.calls}"
    elif layer.calls == 0:
        label += " [container]" if layer.flops or layer.activation_bytes else " [not called]"
    return [
        label,
        shapes(layer.input_shapes),
        shapes(layer.output_shapes),
        exact(layer.params_total),
        _trainable(layer),
        count(layer.flops),
        nbytes(layer.activation_bytes),
    ]


HEADERS = [
    "Layer (type)",
    "Input shape",
    "Output shape",
    "Params",
    "Trainable",
    "FLOPs",
    "Act. mem",
]


def _totals(s: ModelSummary) -> list[tuple[str, str]]:
    frozen = s.total_params - s.trainable_params
    rows = [
        (
            "Parameters",
            f"{exact(s.total_params)} (trainable {exact(s.trainable_params)}, "
            f"frozen {exact(frozen)})",
        ),
    ]
    for group in s.shared_params:
        rows.append(("Shared", " = ".join(group) + " (counted once)"))
    by_dtype = ", ".join(f"{d} {nbytes(n)}" for d, n in sorted(s.param_bytes_by_dtype.items()))
    rows += [
        ("Parameter memory", f"{nbytes(s.param_bytes)} ({by_dtype or 'none'})"),
        ("Buffers", f"{s.buffer_count} ({nbytes(s.buffer_bytes)})"),
        ("Forward", f"{count(s.flops_forward, 'FLOPs')} = {count(s.macs_forward, 'MACs')}"),
    ]
    rows += _attention_rows(s)
    if s.flops_training is not None:
        training = count(s.flops_training, "FLOPs")
        if s.flops_convention != "full":
            training += " (full convention)"
        rows.append(("Forward + backward", training))
    rows.append((f"Peak activations ({s.mode})", nbytes(s.peak_activation_bytes)))
    if s.training is not None:
        t = s.training
        rows.append(
            (
                "Training memory",
                f"{nbytes(t.total('adam'))} with Adam = weights {nbytes(t.weights)} + grads "
                f"{nbytes(t.gradients)} + Adam state {nbytes(t.optimizer['adam'])} + activations "
                f"{nbytes(t.activations)} + the loss's backward {nbytes(t.loss_backward)}; "
                f"SGD {nbytes(t.total('sgd'))}, "
                f"SGD+momentum {nbytes(t.total('sgd-momentum'))}",
            )
        )
    if s.attention_kernels and s.memory_for:
        rows.append(("Attention kernels", _kernels(s.attention_kernels, s.memory_for)))
    ops = ", ".join(f"{op} x{n}" for op, n in sorted(s.unsupported_ops.items()))
    rows.append(("Unsupported ops", ops or "none (every op is counted or known to cost no MACs)"))
    return rows


def _kernels(kernels: dict[str, int], target: str) -> str:
    """Which kernels the meta run gave F.scaled_dot_product_attention, and for what."""
    taken = ", ".join(f"{name} x{n}" for name, n in sorted(kernels.items()))
    other = "cpu" if target == "cuda" else "cuda"
    return (
        f"{taken} (scaled_dot_product_attention as {target.upper()} runs it; "
        f"--memory-for {other} models the {other.upper()})"
    )


def _attention_rows(s: ModelSummary) -> list[tuple[str, str]]:
    """Attention's share of the forward and the FLOP convention in use."""
    full = s.flops_forward_full
    rows = []
    if s.attention_flops_forward:
        share = 100 * s.attention_flops_forward / max(full, 1)
        rows.append(
            (
                "Attention",
                f"{count(s.attention_flops_forward, 'FLOPs')} ({share:.1f}% of the full forward; "
                "products of two activations: QK^T and PV)",
            )
        )
    if s.flops_convention == "full":
        text = (
            "full: every multiply-accumulate of matrix products and convolutions, 2 FLOPs "
            "each, attention's included (--flops-convention no-attention matches fvcore, "
            "ptflops and timm's model cards)"
        )
    else:
        text = (
            "no-attention: products of two activations left out, as fvcore, ptflops and "
            "timm's model cards count (--flops-convention full counts them)"
        )
    rows.append(("FLOP convention", text))
    return rows


def render_text(s: ModelSummary) -> str:
    rows = [HEADERS, *(_row(layer) for layer in s.layers)]
    widths = [max(len(r[i]) for r in rows) for i in range(len(HEADERS))]
    right = {3, 5, 6}
    lines = [
        f"{s.model_name}: inputs {shapes(s.input_shapes)} -> outputs {shapes(s.output_shapes)} "
        f"({', '.join(s.output_dtypes)}); device {s.device_used}, {s.mode} mode",
        "",
    ]
    for i, row in enumerate(rows):
        cells = [
            c.rjust(w) if j in right else c.ljust(w)
            for j, (c, w) in enumerate(zip(row, widths, strict=True))
        ]
        lines.append("  ".join(cells).rstrip())
        if i == 0:
            lines.append("  ".join("-" * w for w in widths))
    lines.append("")
    label_width = max(len(k) for k, _ in _totals(s))
    lines += [f"{k.ljust(label_width)}  {v}" for k, v in _totals(s)]
    lines += [f"note: {n}" for n in s.notes]
    return "\n".join(lines) + "\n"


def render_markdown(s: ModelSummary) -> str:
    def esc(text: str) -> str:
        return text.replace("|", "\\|")

    lines = [f"## {s.model_name}", "", "| " + " | ".join(HEADERS) + " |"]
    lines.append("|" + "|".join(["---", "---", "---", "---:", "---", "---:", "---:"]) + "|")
    for layer in s.layers:
        row = _row(layer)
        row[0] = ("&nbsp;" * 2 * layer.depth) + f"`{layer.name or '(root)'}` ({layer.type_name})"
        lines.append("| " + " | ".join(esc(c) for c in row) + " |")
    lines += ["", "| Total | |", "|---|---|"]
    lines += [f"| {k} | {esc(v)} |" for k, v in _totals(s)]
    lines += [f"\n> note: {n}" for n in s.notes]
    return "\n".join(lines) + "\n"


def render_csv(s: ModelSummary) -> str:
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(
        ["name", "type", "depth", "input_shapes", "output_shapes", "params_own", "params_total",
         "params_trainable", "flops", "attention_flops", "activation_bytes", "calls"]
    )  # fmt: skip
    for layer in s.layers:
        writer.writerow(
            [layer.name, layer.type_name, layer.depth, shapes(layer.input_shapes),
             shapes(layer.output_shapes), layer.params_own, layer.params_total,
             layer.params_trainable, layer.flops, layer.attention_flops, layer.activation_bytes,
             layer.calls]
        )  # fmt: skip
    return out.getvalue()


def render(s: ModelSummary, fmt: str) -> str:
    if fmt == "json":
        return json.dumps(s.to_dict(), indent=2) + "\n"
    if fmt == "markdown":
        return render_markdown(s)
    if fmt == "csv":
        return render_csv(s)
    return render_text(s)


def _exponent(dimension: str, k: float | None) -> str:
    return "n/a" if k is None else f"{dimension}^{k:.2f}"


def render_scaling(r: ScalingResult, fmt: str) -> str:
    if fmt == "json":
        return json.dumps(r.to_dict(), indent=2) + "\n"
    if fmt == "csv":
        rows = [f"{p.size},{p.flops},{p.peak_activation_bytes}" for p in r.points]
        return "\n".join([f"{r.dimension},flops,peak_activation_bytes", *rows]) + "\n"
    table = [[r.dimension, "FLOPs", "Peak activations"]]
    table += [[str(p.size), count(p.flops), nbytes(p.peak_activation_bytes)] for p in r.points]
    if fmt == "markdown":
        lines = ["| " + " | ".join(row) + " |" for row in table]
        lines.insert(1, "|---:|---:|---:|")
    else:
        widths = [max(len(row[i]) for row in table) for i in range(3)]
        lines = ["  ".join(c.rjust(w) for c, w in zip(row, widths, strict=True)) for row in table]
    lines += [
        "",
        f"FLOPs ~ {_exponent(r.dimension, r.flops_exponent)}, activations ~ "
        f"{_exponent(r.dimension, r.activation_exponent)} (least-squares fit in log-log space)",
    ]
    return "\n".join(lines) + "\n"
