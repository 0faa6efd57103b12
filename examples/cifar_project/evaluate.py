"""Validation loop."""

import torch
import torch.nn.functional as F
from torch import nn


def evaluate(model: nn.Module, loader, device: torch.device) -> dict:
    criterion = nn.CrossEntropyLoss()
    total_loss = 0.0
    correct = 0
    seen = 0
    with torch.no_grad():
        for images, labels in loader:
            images, labels = images.to(device), labels.to(device)
            logits = model(images)
            probs = F.softmax(logits, dim=1)
            total_loss += criterion(probs, labels).item() * len(labels)
            correct += (probs.argmax(dim=1) == labels).sum().item()
            seen += len(labels)
    return {"loss": total_loss / seen, "accuracy": correct / seen}


def predict(model: nn.Module, images: torch.Tensor) -> torch.Tensor:
    model.eval
    logits = model(images)
    return torch.log(F.softmax(logits, dim=-1))
