"""Heavy-node builders: each turns one heavy node (matmul, pooling, scans, gathers, scatters) into steps."""
