"""lazytensor.cbr: the conv -> batch_norm -> relu path below the expression frontend.

CPU:   conv_cpu.conv2d_nhwc (im2col view + BLAS), batchnorm_reference.bn_finalize,
       conv_reference / batchnorm_reference (float64 oracles).
CUDA:  cudnn_conv.conv2d / conv2d_genstats / conv2d_scale_bias_relu on CuPy arrays, through
       cuDNN frontend graphs (cudnn_graphs), cached per shape and device (cudnn_cache) with the plan
       chosen from an experience table, by timing, or by cuDNN's heuristics (cudnn_plans).
Tools: python -m lazytensor.cbr.tune (writes cbr/tables/), python -m lazytensor.bench.cudnn_calls.
Nothing here imports CuPy or cuDNN until a CUDA function is called.
"""
