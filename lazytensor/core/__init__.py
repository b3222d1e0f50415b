"""The IR and tensors: expression nodes, dtypes and promotion, shapes, view steps, rewrites; plain data that computes nothing."""
