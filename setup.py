"""The one compiled module: the node builders in C (lazytensor/core/_nodes.c). Everything else is in
pyproject.toml. The extension is optional: where it cannot be compiled (no C compiler or no Python
headers), lazytensor installs and runs with the Python builders, and says so
(`python -m lazytensor bench --suite interactive`; tests/core/test_compiled_nodes.py requires it)."""
from setuptools import Extension, setup

setup(ext_modules=[Extension("lazytensor.core._nodes", ["lazytensor/core/_nodes.c"], optional=True)])
