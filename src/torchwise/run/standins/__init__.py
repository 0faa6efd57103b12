"""Stand-ins for what a training script needs and this machine lacks: its
dataset's files (torchvision's datasets, Hugging Face's ``load_dataset`` and
the script's own ``Dataset`` classes), its pretrained weights (torchvision, torch.hub, timm, and
Hugging Face models, configurations and tokenizers).

Each stand-in takes over only when the real thing is missing (a dataset
whose files are not there, a download that fails) and always says so in the
run's notes: the findings of a run on stand-ins are about the training code,
and the report never lets them pass for a run on the real data. The GPU and
the cluster have their own simulations (``--as-cuda``, ``--nproc``).
``RunOptions.stand_ins=False`` (``--no-stand-ins``) turns them all off.
"""

from __future__ import annotations

from types import ModuleType

from torchwise.run.session import Session
from torchwise.run.standins.hf import HubStandIns
from torchwise.run.standins.hf_datasets import patch_datasets
from torchwise.run.standins.hooks import AfterImport
from torchwise.run.standins.user_data import patch_user_datasets
from torchwise.run.standins.vision import patch_torchvision_datasets
from torchwise.run.standins.weights import WeightStandIns


class StandIns:
    """Installs every stand-in: weights at once (torch is imported), the
    libraries' patches as the script imports them."""

    def __init__(self, session: Session) -> None:
        self.session = session

    def install(self) -> None:
        session = self.session
        note, patch = session.note, session.patches.setattr
        weights = WeightStandIns(note, patch)
        weights.install()
        patch_user_datasets(note, patch)

        hub = HubStandIns(note, patch)

        def datasets(module: ModuleType) -> None:
            patch_torchvision_datasets(module, note, patch)

        def hf_datasets(module: ModuleType) -> None:
            patch_datasets(module, note, patch, hub.offline_when_unreachable)

        hook = AfterImport(
            {
                "torchvision.datasets": datasets,
                "torchvision.models._api": weights.patch_torchvision_models,
                "timm": weights.patch_timm,
                "datasets": hf_datasets,
                **hub.callbacks(),
            }
        )
        session.patches.call_on_undo(hook.install())
