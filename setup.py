"""The compiled modules: the node builders in C (lazytensor/core/_nodes.c) and an array's address
(lazytensor/core/_address.c). Everything else is in pyproject.toml. Both are optional: where they
cannot be compiled (no C compiler or no Python headers), lazytensor installs and runs with the Python
builders and NumPy's `a.ctypes.data`, and says so for the builders (`python -m lazytensor bench
--suite interactive`; tests/core/test_compiled_nodes.py requires them)."""
from setuptools import Extension, setup

setup(ext_modules=[Extension("lazytensor.core._nodes", ["lazytensor/core/_nodes.c"], optional=True),
                   Extension("lazytensor.core._address", ["lazytensor/core/_address.c"], optional=True)])
