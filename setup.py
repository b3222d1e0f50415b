"""The compiled modules: the node builders in C (lazytensor/core/_nodes.c), an array's address
(lazytensor/core/_address.c), the interpreter tier's inner-loop runner (kernels/cpu/_ufunc_loops.c)
and the assignment's path to it (lazytensor/assign/_direct_path.c). Everything else is in
pyproject.toml. All are optional: where one cannot be compiled (no C compiler or no Python headers),
lazytensor installs and runs with the Python builders, NumPy's `a.ctypes.data` and the Python
runners, and says so for the builders (`python -m lazytensor bench --suite interactive`;
tests/core/test_compiled_nodes.py and tests/core/test_array_address.py require the first two)."""
from setuptools import Extension, setup

setup(ext_modules=[
    Extension("lazytensor.core._nodes", ["lazytensor/core/_nodes.c"], optional=True),
    Extension("lazytensor.core._address", ["lazytensor/core/_address.c"], optional=True),
    Extension("lazytensor.kernels.cpu._ufunc_loops", ["kernels/cpu/_ufunc_loops.c"], optional=True),
    Extension("lazytensor.assign._direct_path", ["lazytensor/assign/_direct_path.c"], optional=True),
])
