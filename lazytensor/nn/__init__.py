"""Modules built on the user API: layers with PyTorch's initialisation and state-dict layout,
VGG16-BN and ResNet builders, the Conv-BN-ReLU block, optimizers and training steps."""
from lazytensor.nn.module import Module
from lazytensor.nn.layers import (AvgPool2d, BatchNorm2d, Conv2d, ConvBNReLU, Flatten, GlobalAvgPool, Linear,
                                  MaxPool2d, ReLU, Sequential)
from lazytensor.nn.models import BasicBlock, Bottleneck, ResNet, VGG, resnet18, resnet50, vgg16_bn
from lazytensor.nn import optim
from lazytensor.nn.optim import SGD, AdamW, LARS, LAMB
from lazytensor.nn import utils
from lazytensor.nn.amp import LossScaler
from lazytensor.nn.train_step import TrainStep, train_step
from lazytensor.nn.sync_batch_norm import SyncBatchNorm, convert_sync_batchnorm

__all__ = ["Module", "AvgPool2d", "BatchNorm2d", "Conv2d", "ConvBNReLU", "Flatten", "GlobalAvgPool", "Linear",
           "MaxPool2d", "ReLU", "Sequential", "BasicBlock", "Bottleneck", "ResNet", "VGG", "resnet18", "resnet50",
           "vgg16_bn", "optim", "SGD", "AdamW", "LARS", "LAMB", "utils", "TrainStep", "train_step", "LossScaler",
           "SyncBatchNorm", "convert_sync_batchnorm"]
