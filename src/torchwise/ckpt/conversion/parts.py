"""Tensors safetensors cannot hold, stored as parts it can hold (``--split``), and put back.

- complex: ``torch.view_as_real`` (a last dimension of real, imaginary);
- quantized: the integers (``int_repr``) plus the scale and zero point (per tensor, in
  the note) or the per-channel scales and zero points (as parts);
- sparse COO: indices and values; CSR/CSC/BSR/BSC: compressed and plain indices, values;
- nested: each component (``unbind``) as its own part, with the layout in the note;
- any other dtype (complex32, sub-byte and float8 kinds safetensors lacks): the raw
  bytes as uint8, viewed back as the dtype.

A meta tensor (saved without data) has no parts: its dtype, shape and stride are kept
in the structure (``{"$meta": ...}``). A tensor whose parts cannot be taken
(:class:`CannotSplit`) is refused with the reason, never half-written.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import torch

#: dtypes safetensors stores (safetensors.torch's table, as of 0.6)
SAFETENSORS_NAMES = {
    "float64": "F64", "float32": "F32", "float16": "F16", "bfloat16": "BF16", "int64": "I64",
    "int32": "I32", "int16": "I16", "int8": "I8", "uint8": "U8", "bool": "BOOL",
    "float8_e4m3fn": "F8_E4M3", "float8_e5m2": "F8_E5M2", "float8_e4m3fnuz": "F8_E4M3FNUZ",
    "float8_e5m2fnuz": "F8_E5M2FNUZ", "complex64": "C64", "uint64": "U64", "uint32": "U32",
    "uint16": "U16",
}  # fmt: skip
#: the attribute the loader sets on a storage whose bytes are streamed: (file, offset)
SOURCE = "_torchwise_source"
_COMPRESSED = ("sparse_csr", "sparse_csc", "sparse_bsr", "sparse_bsc")


class CannotSplit(Exception):
    """The parts of this tensor cannot be taken (the message says why)."""


def unsupported(tensor: torch.Tensor) -> str | None:
    """Why safetensors cannot hold ``tensor`` as it is, or None."""
    import torch

    if tensor.is_quantized:
        return f"quantized {str(tensor.dtype).removeprefix('torch.')}"
    if tensor.is_nested:
        return "nested tensor"
    if tensor.layout != torch.strided:
        return f"{str(tensor.layout).removeprefix('torch.')} tensor"
    if tensor.is_meta and getattr(tensor.untyped_storage(), SOURCE, None) is None:
        return "meta tensor (saved without data)"
    dtype = str(tensor.dtype).removeprefix("torch.")
    if dtype not in SAFETENSORS_NAMES:
        return dtype
    return None


def split(tensor: torch.Tensor, kind: str) -> tuple[list[tuple[str, torch.Tensor]], dict[str, Any]]:
    """([(suffix, part)], the note to rebuild it): see the module docstring."""
    try:
        parts, note = _parts(tensor, kind)
    except (RuntimeError, TypeError, ValueError, NotImplementedError) as exc:
        raise CannotSplit(f"{kind}: {str(exc).splitlines()[0] if str(exc) else exc}") from None
    shape = [] if tensor.is_nested else list(tensor.shape)
    info: dict[str, Any] = {"note": note, "dtype": str(tensor.dtype).removeprefix("torch."),
                            "shape": shape}  # fmt: skip
    if tensor.is_quantized and _per_tensor(tensor):
        info.update(scale=tensor.q_scale(), zero_point=tensor.q_zero_point())
    elif tensor.is_quantized:
        info.update(axis=tensor.q_per_channel_axis())
    if tensor.is_nested:
        info.update(layout=str(tensor.layout).removeprefix("torch."), count=len(parts))
    return parts, info


def _per_tensor(tensor: torch.Tensor) -> bool:
    return str(tensor.qscheme()).endswith(("per_tensor_affine", "per_tensor_symmetric"))


def _parts(tensor: torch.Tensor, kind: str) -> tuple[list[tuple[str, torch.Tensor]], str]:
    import torch

    if kind.startswith("quantized"):
        if _per_tensor(tensor):
            return [("int_repr", tensor.int_repr())], "quantized per tensor"
        channel = [("int_repr", tensor.int_repr()), ("scales", tensor.q_per_channel_scales()),
                   ("zero_points", tensor.q_per_channel_zero_points())]  # fmt: skip
        return channel, "quantized per channel"
    if kind == "nested tensor":
        components = [c.detach().contiguous() for c in tensor.unbind()]
        bad = next((unsupported(c) for c in components if unsupported(c)), None)
        if bad is not None:
            raise ValueError(f"its components are {bad}")
        return [(str(i), c) for i, c in enumerate(components)], "nested tensor"
    if kind == "sparse_coo tensor":
        dense = tensor.coalesce()
        return [("indices", dense.indices()), ("values", dense.values())], "sparse COO"
    if kind.startswith(_COMPRESSED):
        row = tensor.layout in (torch.sparse_csr, torch.sparse_bsr)
        compressed = tensor.crow_indices() if row else tensor.ccol_indices()
        plain = tensor.col_indices() if row else tensor.row_indices()
        return [("compressed_indices", compressed), ("plain_indices", plain),
                ("values", tensor.values())], f"{kind}: compressed"  # fmt: skip
    if kind.startswith("meta"):
        raise ValueError("it has no data")
    if kind.startswith("complex"):
        return [("", torch.view_as_real(tensor.contiguous()))], f"{kind} as view_as_real"
    return [("", tensor.contiguous().view(torch.uint8))], f"{kind} as raw bytes (uint8)"


def rebuild(info: dict[str, Any], parts: dict[str, torch.Tensor]) -> torch.Tensor:
    """The tensor :func:`split` took apart, from its parts (suffix -> tensor) and note."""
    import torch

    note, shape = info["note"], info["shape"]
    dtype = getattr(torch, info["dtype"])
    if note == "quantized per tensor":
        return torch._make_per_tensor_quantized_tensor(
            parts["int_repr"], info["scale"], info["zero_point"]
        )
    if note == "quantized per channel":
        return torch._make_per_channel_quantized_tensor(
            parts["int_repr"], parts["scales"], parts["zero_points"], info["axis"]
        )
    if note == "nested tensor":
        components = [parts[str(i)] for i in range(info["count"])]
        return torch.nested.nested_tensor(components, layout=getattr(torch, info["layout"]))
    if note == "sparse COO":
        return torch.sparse_coo_tensor(parts["indices"], parts["values"], shape).coalesce()
    if note.endswith(": compressed"):
        layout = getattr(torch, note.split(" tensor:")[0])
        return torch.sparse_compressed_tensor(
            parts["compressed_indices"], parts["plain_indices"], parts["values"], shape,
            layout=layout,
        )  # fmt: skip
    whole = parts[""]
    if note.endswith("as view_as_real"):
        return torch.view_as_complex(whole).to(dtype)
    return whole.view(dtype).reshape(shape)


def meta_record(tensor: torch.Tensor) -> dict[str, Any]:
    """A meta tensor (no data) as JSON: what it takes to make it again."""
    return {"dtype": str(tensor.dtype).removeprefix("torch."), "shape": list(tensor.shape),
            "stride": list(tensor.stride())}  # fmt: skip


def meta_tensor(record: dict[str, Any]) -> torch.Tensor:
    import torch

    return torch.empty_strided(
        record["shape"], record["stride"], dtype=getattr(torch, record["dtype"]), device="meta"
    )
