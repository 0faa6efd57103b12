"""Synthetic CIFAR-shaped data so the project runs anywhere (no downloads)."""

import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset


class Normalize(nn.Module):
    """Per-channel normalisation with the CIFAR-10 statistics."""

    def __init__(self) -> None:
        super().__init__()
        self.mean = torch.tensor([0.4914, 0.4822, 0.4465]).view(1, 3, 1, 1)
        self.std = torch.tensor([0.2470, 0.2435, 0.2616]).view(1, 3, 1, 1)

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        return (images - self.mean) / self.std


class SyntheticCifar(Dataset):
    """Random images whose label is encoded in their mean brightness."""

    def __init__(self, size: int, num_classes: int = 10, seed: int = 0) -> None:
        generator = torch.Generator().manual_seed(seed)
        self.labels = torch.randint(0, num_classes, (size,), generator=generator)
        noise = torch.rand(size, 3, 32, 32, generator=generator)
        self.images = noise * 0.5 + self.labels.view(-1, 1, 1, 1) / (2 * num_classes)

    def __len__(self) -> int:
        return len(self.labels)

    def __getitem__(self, index: int) -> tuple[torch.Tensor, torch.Tensor]:
        return self.images[index], self.labels[index]


def make_loaders(batch_size: int, distributed: bool = False) -> tuple[DataLoader, DataLoader]:
    train_set = SyntheticCifar(2048, seed=0)
    val_set = SyntheticCifar(512, seed=1)
    sampler = None
    if distributed:
        sampler = torch.utils.data.distributed.DistributedSampler(train_set)
    train_loader = DataLoader(train_set, batch_size=batch_size, shuffle=True, sampler=sampler)
    val_loader = DataLoader(val_set, batch_size=batch_size, num_workers=2)
    return train_loader, val_loader
