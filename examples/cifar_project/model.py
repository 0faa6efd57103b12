"""A small residual CNN for 32x32 images (CIFAR-10 sized)."""

import torch
import torch.nn.functional as F
from torch import nn


class ConvBlock(nn.Module):
    """3x3 convolution, batch norm, ReLU."""

    def __init__(self, in_channels: int, out_channels: int, stride: int = 1) -> None:
        super().__init__()
        # The conv bias is redundant: BatchNorm subtracts the mean right after.
        self.conv = nn.Conv2d(in_channels, out_channels, 3, stride=stride, padding=1, bias=True)
        self.bn = nn.BatchNorm2d(out_channels)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.relu(self.bn(self.conv(x)))


class ResidualBlock(nn.Module):
    """Two conv blocks with an identity (or 1x1 projection) shortcut."""

    def __init__(self, in_channels: int, out_channels: int, stride: int = 1) -> None:
        super().__init__()
        self.first = ConvBlock(in_channels, out_channels, stride)
        self.second = nn.Sequential(
            nn.Conv2d(out_channels, out_channels, 3, padding=1, bias=False),
            nn.BatchNorm2d(out_channels),
        )
        self.shortcut = nn.Identity()
        if stride != 1 or in_channels != out_channels:
            self.shortcut = nn.Sequential(
                nn.Conv2d(in_channels, out_channels, 1, stride=stride, bias=False),
                nn.BatchNorm2d(out_channels),
            )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.relu(self.second(self.first(x)) + self.shortcut(x))


class CifarNet(nn.Module):
    """A ResNet-style classifier for 3x32x32 images."""

    def __init__(self, num_classes: int = 10, width: int = 32, dropout: float = 0.1) -> None:
        super().__init__()
        self.stem = ConvBlock(3, width)
        self.stages = nn.Sequential(
            ResidualBlock(width, width),
            ResidualBlock(width, 2 * width, stride=2),
            ResidualBlock(2 * width, 4 * width, stride=2),
        )
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.dropout = nn.Dropout(dropout)
        self.head = nn.Linear(4 * width, num_classes)

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        x = self.stages(self.stem(images))  # (B, 4w, 8, 8)
        x = self.pool(x).flatten(1)  # (B, 4w)
        return self.head(self.dropout(x))  # (B, num_classes)


def build_model(config: dict) -> nn.Module:
    model = CifarNet(num_classes=config["num_classes"], width=config.get("width", 32))
    return model.cuda() if torch.cuda.is_available() else model
