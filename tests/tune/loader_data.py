"""A DataLoader factory for tune's tests: 64 samples of 16 features, 3 classes."""

from __future__ import annotations

import time

import torch
from torch.utils.data import DataLoader, Dataset


class Features(Dataset[tuple[torch.Tensor, torch.Tensor]]):
    def __init__(self, size: int = 64, delay_s: float = 0.0) -> None:
        generator = torch.Generator().manual_seed(0)
        self.x = torch.randn(size, 16, generator=generator)
        self.y = torch.randint(0, 3, (size,), generator=generator)
        self.delay_s = delay_s

    def __len__(self) -> int:
        return len(self.x)

    def __getitem__(self, index: int) -> tuple[torch.Tensor, torch.Tensor]:
        if self.delay_s:
            time.sleep(self.delay_s)  # stands in for decoding a file
        return self.x[index], self.y[index]


def make_loader() -> DataLoader[tuple[torch.Tensor, torch.Tensor]]:
    return DataLoader(Features(), batch_size=8)


def make_dict_loader() -> DataLoader[dict[str, torch.Tensor]]:
    def collate(items):  # type: ignore[no-untyped-def]
        xs, ys = zip(*items, strict=True)
        return {"x": torch.stack(xs), "labels": torch.stack(ys)}

    return DataLoader(Features(), batch_size=8, collate_fn=collate)


def not_a_loader() -> list[int]:
    return [1, 2, 3]


def broken_loader() -> DataLoader[tuple[torch.Tensor, torch.Tensor]]:
    raise ValueError("the dataset path does not exist")
