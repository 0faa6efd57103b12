"""One model per loader of where it finds the pickles (and code) in a file.

- :mod:`.routes`: every loader's route through one file (:func:`~.routes.read_container`);
- :mod:`.torch_load` and :mod:`.torch_zip`: ``torch.load``'s format order and the
  records of a torch zip as ``PyTorchStreamReader`` finds them;
- :mod:`.jit_load`: ``torch.jit.load`` (flatbuffer, a zip anywhere in the file);
- :mod:`.export_load`: ``torch.export.load``'s ``.pt2`` configs;
- :mod:`.numpy_load`: ``numpy.load(allow_pickle=True)`` (``.npy``, ``.npz``, pickles);
- :mod:`.joblib_load`: ``joblib.load`` (compressed streams, inline array data);
- :mod:`.safetensors_load`, :mod:`.sharded`: safetensors, and sharded folders;
- :mod:`.names`: the loaders' names as reports give them.
"""
