"""Modules built on the user API: the Conv-BN-ReLU block, layers, optimizers and training steps."""
