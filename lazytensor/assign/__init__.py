"""What an assignment means (values stay values, writes, several results), its plans kept as recipes, and its fast path."""
