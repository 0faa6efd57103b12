"""MobileNetV2 (width 1.0) in the torchvision layout."""

# nn.Module.__call__ is typed as returning Any; forward signatures carry the types.
# mypy: disable-error-code="no-any-return"
from __future__ import annotations

from typing import ClassVar

import torch
from torch import nn


def _conv_bn_relu(
    cin: int, cout: int, kernel: int, stride: int = 1, groups: int = 1
) -> nn.Sequential:
    pad = (kernel - 1) // 2
    return nn.Sequential(
        nn.Conv2d(cin, cout, kernel, stride, pad, groups=groups, bias=False),
        nn.BatchNorm2d(cout),
        nn.ReLU6(inplace=True),
    )


class InvertedResidual(nn.Module):
    """1x1 expand, 3x3 depthwise (groups = channels), 1x1 linear projection."""

    def __init__(self, cin: int, cout: int, stride: int, expand: int) -> None:
        super().__init__()
        hidden = cin * expand
        self.use_residual = stride == 1 and cin == cout
        layers: list[nn.Module] = []
        if expand != 1:
            layers.append(_conv_bn_relu(cin, hidden, 1))
        layers += [
            _conv_bn_relu(hidden, hidden, 3, stride, groups=hidden),
            nn.Conv2d(hidden, cout, 1, bias=False),
            nn.BatchNorm2d(cout),
        ]
        self.conv = nn.Sequential(*layers)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.conv(x) if self.use_residual else self.conv(x)


class MobileNetV2(nn.Module):
    """Inverted residual stages (t, c, n, s) from Table 2 of the paper."""

    SETTINGS: ClassVar[list[tuple[int, int, int, int]]] = [
        (1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 4, 2),
        (6, 96, 3, 1), (6, 160, 3, 2), (6, 320, 1, 1),
    ]  # fmt: skip

    def __init__(self, num_classes: int = 1000, dropout: float = 0.2) -> None:
        super().__init__()
        features: list[nn.Module] = [_conv_bn_relu(3, 32, 3, 2)]
        cin = 32
        for expand, cout, repeats, stride in self.SETTINGS:
            for i in range(repeats):
                features.append(InvertedResidual(cin, cout, stride if i == 0 else 1, expand))
                cin = cout
        features.append(_conv_bn_relu(cin, 1280, 1))
        self.features = nn.Sequential(*features)
        self.classifier = nn.Sequential(nn.Dropout(dropout), nn.Linear(1280, num_classes))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.features(x)  # (B, 1280, H/32, W/32)
        x = nn.functional.adaptive_avg_pool2d(x, 1).flatten(1)  # (B, 1280)
        return self.classifier(x)  # (B, num_classes)


def mobilenet_v2(num_classes: int = 1000, dropout: float = 0.2) -> MobileNetV2:
    return MobileNetV2(num_classes, dropout)
