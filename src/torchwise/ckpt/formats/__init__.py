"""The containers checkpoints come in, read the way each loader reads them.

- :mod:`.zipdir`, :mod:`.ziptricks` and :mod:`.zipstream`: a zip archive as miniz
  (torch's reader) reads it, where readers disagree, a member's bytes;
- :mod:`.tarfmt`: the pre-1.0 tar checkpoint, as ``torch.load``'s ``legacy_load`` reads it;
- :mod:`.npy`: the ``.npy`` header, as ``numpy.lib.format.read_array`` reads it;
- :mod:`.compressed`: joblib's compressed streams;
- :mod:`.container`: what reading a file produces (its pickles, tricks, routes).
"""
