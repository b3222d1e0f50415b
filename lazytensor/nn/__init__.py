"""Modules built on the user API: layers with PyTorch's initialisation and state-dict layout,
VGG16-BN and ResNet builders, the Conv-BN-ReLU block, optimizers and training steps.

Each name is imported from its module on first use (`lt.nn.Linear`, `from lazytensor.nn import SGD`):
`import lazytensor` does not pay for the training stack (issue 16: import time)."""
import importlib

_MODULE_OF = {
    "Module": "module",
    **{name: "layers" for name in ("AvgPool2d", "BatchNorm2d", "Conv2d", "ConvBNReLU", "Flatten", "GlobalAvgPool",
                                    "Linear", "MaxPool2d", "ReLU", "Sequential")},
    **{name: "models" for name in ("BasicBlock", "Bottleneck", "ResNet", "VGG", "resnet18", "resnet50", "vgg16_bn")},
    "SGD": "optim", "AdamW": "optim", "LossScaler": "amp", "TrainStep": "train_step", "train_step": "train_step",
}

__all__ = ["Module", "AvgPool2d", "BatchNorm2d", "Conv2d", "ConvBNReLU", "Flatten", "GlobalAvgPool", "Linear",
           "MaxPool2d", "ReLU", "Sequential", "BasicBlock", "Bottleneck", "ResNet", "VGG", "resnet18", "resnet50",
           "vgg16_bn", "optim", "SGD", "AdamW", "TrainStep", "train_step", "LossScaler"]


def __getattr__(name: str):
    if name == "optim":
        return importlib.import_module("lazytensor.nn.optim")
    module = _MODULE_OF.get(name)
    if module is None:
        raise AttributeError(f"module 'lazytensor.nn' has no attribute {name!r}")
    value = getattr(importlib.import_module(f"lazytensor.nn.{module}"), name)
    globals()[name] = value
    return value


def __dir__():
    return sorted(set(globals()) | set(__all__))
