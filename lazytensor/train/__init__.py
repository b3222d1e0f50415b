"""The training application: the train command, its data, augmentation, CIFAR-10 and model names."""
