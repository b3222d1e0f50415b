"""What an assignment means (values stay values, writes, several results) and its fast path."""
