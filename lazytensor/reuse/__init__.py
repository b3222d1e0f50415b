"""Plans reused by structure: recipes, several-result recipes, conv gradients, CUDA graph replay."""
