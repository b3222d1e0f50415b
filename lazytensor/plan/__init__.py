"""Expression -> steps: lowering to kernel programs, heavy-node builders and the CBR patterns, recipes, CUDA graph replay, evaluation."""
