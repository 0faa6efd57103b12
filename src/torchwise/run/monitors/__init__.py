"""The monitors of ``torchwise run``: each patches one part of torch and reports to the session.

These modules import torch; they are imported only in the process that runs the
user's script.
"""
