"""The functions users call that build nodes: elementwise functions, reductions, views, conv2d and batch_norm, NumPy dispatch."""
