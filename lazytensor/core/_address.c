/* The address of a NumPy array's first element, read from the array itself.
 *
 * Plan lookups read the address of every array they bind (lazytensor.core.memory.address): a
 * recipe's key holds each array's alignment, and CUDA graph replay compares addresses. NumPy's
 * `a.ctypes.data` builds a ctypes helper object on each call, 1-4 microseconds, hundreds of times
 * per optimizer step. The pointer is the array struct's first field after the object header, the
 * field NumPy's own PyArray_DATA reads (its layout is part of NumPy's ABI).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

typedef struct {
    PyObject_HEAD
    char *data;
} ArrayHead;

static PyTypeObject *ndarray = NULL;

static PyObject *
setup(PyObject *self, PyObject *type)
{
    if (!PyType_Check(type)) {
        PyErr_SetString(PyExc_TypeError, "setup(numpy.ndarray)");
        return NULL;
    }
    Py_XSETREF(ndarray, (PyTypeObject *)Py_NewRef(type));
    Py_RETURN_NONE;
}

static PyObject *
address(PyObject *self, PyObject *a)
{
    if (ndarray == NULL || !PyObject_TypeCheck(a, ndarray)) {
        PyErr_Format(PyExc_TypeError, "address() takes a NumPy array, not %.100s", Py_TYPE(a)->tp_name);
        return NULL;
    }
    return PyLong_FromVoidPtr(((ArrayHead *)a)->data);
}

static PyMethodDef module_methods[] = {
    {"setup", setup, METH_O, "setup(numpy.ndarray): the array type address() reads"},
    {"address", address, METH_O, "address(a) -> a.ctypes.data, for a NumPy array a"},
    {NULL},
};

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT, "lazytensor.core._address",
    "The address of a NumPy array's first element, read from the array itself.", -1, module_methods,
};

PyMODINIT_FUNC
PyInit__address(void)
{
    return PyModule_Create(&module_def);
}
