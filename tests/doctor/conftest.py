"""Doctor tests run torch single-threaded.

pytest-xdist already runs one worker per core; torch's own intra-op threads on top
of that spin-wait for each other on a busy 2-core runner and multiply wall time
several times over (measured: 0.9 s of CPU for the LSTM case, 173 s of wall time
under load with the default thread count). One thread per worker is also how the
verdicts were calibrated.
"""

from __future__ import annotations

import torch

torch.set_num_threads(1)
