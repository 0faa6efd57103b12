"""``torchwise ckpt convert``: to safetensors after a clean scan, losing nothing.

- :mod:`.convert`: the entry point (:func:`convert`);
- :mod:`.loading`: torch rebuilds the checkpoint (on the meta device when it can);
- :mod:`.plan`: what will be written (tensors, aliases, split parts, structure);
- :mod:`.typedjson`: the structure around the tensors as tagged JSON;
- :mod:`.stwriter`: the streamed safetensors writer and its read-back check;
- :mod:`.restore`: :func:`load_converted`, the inverse;
- :mod:`.restricted`: the allowlisted C unpickler for protocols torch's weights_only lacks.
"""

from torchwise.ckpt.conversion.convert import ConvertOptions, ConvertResult, convert
from torchwise.ckpt.conversion.restore import load_converted

__all__ = ["ConvertOptions", "ConvertResult", "convert", "load_converted"]
