"""Reverse-mode automatic differentiation: gradient rules by op and the reverse pass, expression DAG -> expression DAG."""
