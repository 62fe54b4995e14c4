"""validate entries: timm models at toy size on CUDA, optimised with timm's own optimizer factory."""

import timm
import torch
from timm.optim import create_optimizer_v2


def _adamw(model):
    return create_optimizer_v2(model, "adamw", lr=1e-3, weight_decay=0.05)


def vit():
    model = timm.create_model(
        "vit_tiny_patch16_224", pretrained=False, img_size=32, patch_size=8, depth=2, num_classes=10
    ).cuda()
    return model, (torch.randn(2, 3, 32, 32).cuda(),), _adamw


def resnet():
    model = timm.create_model("resnet10t", pretrained=False, num_classes=10).cuda()
    return model, (torch.randn(2, 3, 32, 32).cuda(),), _adamw
