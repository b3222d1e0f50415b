"""Heavy-node builders: each turns one heavy node (reduce, matmul, pooling, scans, gathers, scatters) into steps; table.py lists every heavy op's builders."""
