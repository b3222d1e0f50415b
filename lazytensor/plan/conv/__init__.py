"""Convolutions and the CBR (Conv + BatchNorm + ReLU) path: forward, backward, conv steps, channel padding."""
