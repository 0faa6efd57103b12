"""What a script that stopped before its first step needed, in one line.

A run that stops before any optimizer step found nothing about training: the
user wants to know what the script needed that this machine lacks, and what
would serve (a package to install, data to give, a stand-in, a launcher), not
only the exception. :func:`needs_of` reads the exception for the classes that
stop real scripts on a laptop: a missing package, a missing file, a GPU, the
network, a launcher's environment.
"""

from __future__ import annotations

import errno
import re

#: torch's error when a tensor saved for backward was changed in place afterwards
IN_PLACE_ERROR = "modified by an inplace operation"
#: the words of a stand-in's note when it guessed what the items hold (a Dataset's items
#: shaped from the model, a dataset's columns unknown offline): a crash before the first
#: step on such data may be the stand-in's, not the script's
GUESSED_ITEMS = "shaped from"
GUESSED_COLUMNS = "real columns are unknown"

_NETWORK = re.compile(
    r"(?i)name resolution|nodename nor servname|failed to establish a new connection|"
    r"connection refused|network is unreachable|max retries exceeded|couldn't connect|offline mode"
)
_CUDA = re.compile(
    r"(?i)not compiled with cuda|no nvidia driver|no cuda gpus are available|"
    r"found no nvidia driver|cuda driver initialization failed"
)
_LAUNCHER = re.compile(
    r"(?i)environment variable (?:RANK|WORLD_SIZE|MASTER_ADDR|MASTER_PORT|LOCAL_RANK) "
    r"expected|rank parameter missing|world_size parameter missing"
)


def needs_of(error: BaseException, *, simulated_gpu: bool) -> str | None:
    """One line: what the script needed and what would serve; None when it is the script's bug."""
    text = str(error)
    if isinstance(error, ModuleNotFoundError) and error.name:
        top = error.name.split(".")[0]
        return (
            f"it needs the package '{top}', which is not installed where it runs "
            f"(install it, e.g. pip install {top})"
        )
    if missing_file(error):
        name = getattr(error, "filename", None) or _quoted(text) or "a file"
        return (
            f"it needs {name!s}, which is not here: stand-ins serve torchvision's datasets, a "
            "Dataset class of the script and pretrained downloads, not data read elsewhere "
            "(give the data, or a small sample of it)"
        )
    if _CUDA.search(text) and not simulated_gpu:
        return "it needs a GPU: run without --cpu (a simulated GPU), or with --as-cuda"
    if _NETWORK.search(text):
        return (
            "it needs the network to fetch something no stand-in covers (give a local copy, "
            "or run where the network is reachable)"
        )
    if _LAUNCHER.search(text):
        return "it needs a launcher's environment: run it with --nproc N (torchrun's ranks)"
    return None


def missing_file(error: BaseException) -> bool:
    """Whether ``error`` says a file or folder is not there."""
    if isinstance(error, FileNotFoundError):
        return True
    if isinstance(error, OSError) and error.errno == errno.ENOENT:
        return True
    text = str(error).lower()
    return isinstance(error, (OSError, ValueError)) and (
        "no such file" in text or "does not exist" in text
    )


def _quoted(text: str) -> str | None:
    """The path an error message names: quoted, or before "not found" (numpy's wording)."""
    found = re.search(r"['\"]([^'\"]+)['\"]", text) or re.match(r"(\S+) not found", text)
    return found.group(1) if found else None
