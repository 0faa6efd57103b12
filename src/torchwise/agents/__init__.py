"""PyTorch expert agents for coding agent hosts: ``torchwise agents install``."""
