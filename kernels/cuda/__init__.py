"""The CUDA backend: CUDA C rendered from the program IR, compiled by NVRTC, cuBLAS and launches."""
