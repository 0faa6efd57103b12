"""Train CifarNet on synthetic data.

    python train.py --epochs 2
"""

import argparse

import torch
from torch import nn
from torch.optim import SGD
from torch.optim.lr_scheduler import CosineAnnealingLR

from data import make_loaders
from evaluate import evaluate
from model import build_model


def train_one_epoch(model, loader, optimizer, scheduler, scaler, device):
    model.train()
    criterion = nn.CrossEntropyLoss()
    running_loss = 0.0
    for step, (images, labels) in enumerate(loader):
        images = images.to(device)
        labels = labels.to(device)
        with torch.cuda.amp.autocast():
            loss = criterion(model(images), labels)
        scaler.scale(loss).backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm=1.0)
        scheduler.step()
        scaler.step(optimizer)
        scaler.update()
        running_loss += loss
        if step % 50 == 0:
            print(f"step {step}: loss {loss.item():.4f}")
    return running_loss / len(loader)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--resume", default=None)
    args = parser.parse_args()

    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    model = build_model({"num_classes": 10})
    if args.resume:
        model.load_state_dict(torch.load(args.resume), strict=False)
    optimizer = SGD(model.parameters(), lr=0.1, momentum=0.9)
    scheduler = CosineAnnealingLR(optimizer, T_max=args.epochs * 32)
    scaler = torch.cuda.amp.GradScaler()
    train_loader, val_loader = make_loaders(args.batch_size)

    for epoch in range(args.epochs):
        train_loss = train_one_epoch(model, train_loader, optimizer, scheduler, scaler, device)
        metrics = evaluate(model, val_loader, device)
        print(f"epoch {epoch}: train {train_loss:.4f} val {metrics}")
        torch.save(model, f"checkpoint_{epoch}.pt")


if __name__ == "__main__":
    main()
