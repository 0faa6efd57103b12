"""One model per loader of how it finds the pickles (and code) in a file.

- :mod:`.torch_load`: ``torch.load``'s format order (zip, tar, stacked pickles);
- :mod:`.torch_zip`: the records of a torch zip as ``PyTorchStreamReader`` finds them.
"""
