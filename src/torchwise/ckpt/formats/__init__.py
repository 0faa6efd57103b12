"""The containers checkpoints come in, read the way each loader reads them.

- :mod:`.zipdir` and :mod:`.zipstream`: a zip archive as miniz (torch's reader) reads it;
- :mod:`.tarfmt`: the pre-1.0 tar checkpoint, as ``torch.load``'s ``legacy_load`` reads it;
- :mod:`.container`: what reading a file produces (its pickles, tricks, failures).
"""
