"""The CPU backend: numba kernels rendered from the program IR, and the interpreter tier."""
