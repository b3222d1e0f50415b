/* The interpreter tier's flat runners for small calls, in C: a block's plan (interpret_flat) run as
 * NumPy's own inner loops, called directly.
 *
 * A flat runner's block function makes a handful of ufunc calls into kept buffers; at a few
 * thousand elements or fewer each call is mostly NumPy's dispatch (type resolution, the iterator's
 * set-up, the error state: about 0.25 us), which the loop itself is not. A Plan holds, per step,
 * the inner loop NumPy's dispatch ends in for those dtypes (the ufunc's loop whose types are
 * exactly the step's: interpret_cloops checks NumPy resolves to it) and calls it over the
 * operands' data: the same function on the same memory with the same strides, so the same bits.
 * Floating-point errors are not reported, as the tier's own calls run with NumPy's errors ignored.
 *
 * It is built without NumPy's headers (the extension builds with Python's alone): the two structs
 * it reads, an ndarray's and a ufunc's leading fields, are NumPy's public C ABI, declared here, and
 * interpret_cloops checks them against NumPy's own view (probe) before any Plan is made.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

typedef Py_ssize_t npy_intp;
typedef void (*loop_fn)(char **args, npy_intp const *dimensions, npy_intp const *steps, void *data);

typedef struct {                /* numpy/ndarraytypes.h: PyArrayObject_fields, leading fields */
    PyObject_HEAD
    char *data;
    int nd;
    npy_intp *dimensions;
    npy_intp *strides;
    PyObject *base;
    PyObject *descr;
    int flags;
} Array;

typedef struct {                /* numpy/ufuncobject.h: PyUFuncObject, leading fields */
    PyObject_HEAD
    int nin, nout, nargs;
    int identity;
    loop_fn *functions;
    void *const *data;
    int ntypes;
    int reserved1;
    const char *name;
    const char *types;
} UFunc;

#define C_CONTIGUOUS 0x0001
#define ALIGNED 0x0100
#define WRITEABLE 0x0400
#define MAX_ARGS 4

static PyTypeObject *ndarray = NULL, *ufunc_type = NULL;

typedef struct {
    loop_fn fn;
    void *data;
    int nargs;
    int slot[MAX_ARGS];
    npy_intp stride[MAX_ARGS];
} Step;

typedef struct {
    PyObject_HEAD
    npy_intp n;
    int n_steps, n_inputs, n_scalars;
    PyObject *descrs;           /* tuple: out's, each input's, each scalar's */
    PyObject *keep;             /* what the constant slots point into, and the ufuncs */
    char **ptrs;                /* slot 0: out; then the inputs, the scalars, the constants */
    Step *steps;
} Plan;

static void
plan_dealloc(Plan *self)
{
    Py_XDECREF(self->descrs);
    Py_XDECREF(self->keep);
    PyMem_Free(self->ptrs);
    PyMem_Free(self->steps);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static npy_intp
size_of(Array *a)
{
    npy_intp n = 1;
    for (int k = 0; k < a->nd; k++)
        n *= a->dimensions[k];
    return n;
}

/* The loop of `ufunc` whose type numbers are exactly `types` (nargs of them), or -1. */
static int
loop_index(UFunc *u, const int *types)
{
    for (int j = 0; j < u->ntypes; j++) {
        int k = 0;
        while (k < u->nargs && (unsigned char)u->types[j * u->nargs + k] == types[k])
            k++;
        if (k == u->nargs)
            return u->functions[j] != NULL ? j : -1;
    }
    return -1;
}

/* Plan(n, descrs, n_inputs, n_scalars, constants, steps): constants, arrays whose data the slots
 * after the scalars' point into; steps, (ufunc, type numbers, slots, strides) each. */
static PyObject *
plan_new(PyTypeObject *type, PyObject *args, PyObject *kwds)
{
    npy_intp n;
    int n_inputs, n_scalars;
    PyObject *descrs, *constants, *steps;
    if (ndarray == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "setup() has not run");
        return NULL;
    }
    if (!PyArg_ParseTuple(args, "nO!iiO!O!", &n, &PyTuple_Type, &descrs, &n_inputs, &n_scalars,
                          &PyList_Type, &constants, &PyList_Type, &steps))
        return NULL;
    if (PyTuple_GET_SIZE(descrs) != 1 + n_inputs + n_scalars) {
        PyErr_SetString(PyExc_ValueError, "a descr for out, each input and each scalar");
        return NULL;
    }
    Plan *self = (Plan *)type->tp_alloc(type, 0);
    if (self == NULL)
        return NULL;
    self->n = n;
    self->n_inputs = n_inputs;
    self->n_scalars = n_scalars;
    self->n_steps = (int)PyList_GET_SIZE(steps);
    Py_INCREF(descrs);
    self->descrs = descrs;
    self->keep = PyList_New(0);
    Py_ssize_t n_slots = 1 + n_inputs + n_scalars + PyList_GET_SIZE(constants);
    self->ptrs = PyMem_Calloc(n_slots, sizeof(char *));
    self->steps = PyMem_Calloc(self->n_steps + 1, sizeof(Step));
    if (self->keep == NULL || self->ptrs == NULL || self->steps == NULL)
        goto fail;
    for (Py_ssize_t c = 0; c < PyList_GET_SIZE(constants); c++) {
        PyObject *a = PyList_GET_ITEM(constants, c);
        if (Py_TYPE(a) != ndarray) {
            PyErr_SetString(PyExc_TypeError, "a constant is not an ndarray");
            goto fail;
        }
        if (PyList_Append(self->keep, a) < 0)
            goto fail;
        self->ptrs[1 + n_inputs + n_scalars + c] = ((Array *)a)->data;
    }
    for (int s = 0; s < self->n_steps; s++) {
        PyObject *item = PyList_GET_ITEM(steps, s), *ufunc, *types, *slots, *strides;
        if (!PyArg_ParseTuple(item, "OO!O!O!", &ufunc, &PyTuple_Type, &types, &PyTuple_Type, &slots,
                              &PyTuple_Type, &strides))
            goto fail;
        if (Py_TYPE(ufunc) != ufunc_type) {
            PyErr_SetString(PyExc_TypeError, "a step's function is not a ufunc");
            goto fail;
        }
        UFunc *u = (UFunc *)ufunc;
        Step *step = &self->steps[s];
        int nums[MAX_ARGS];
        step->nargs = u->nargs;
        if (u->nargs > MAX_ARGS || PyTuple_GET_SIZE(types) != u->nargs || PyTuple_GET_SIZE(slots) != u->nargs
            || PyTuple_GET_SIZE(strides) != u->nargs) {
            PyErr_SetString(PyExc_ValueError, "a step's types, slots and strides are one per argument");
            goto fail;
        }
        for (int k = 0; k < u->nargs; k++) {
            nums[k] = (int)PyLong_AsLong(PyTuple_GET_ITEM(types, k));
            step->slot[k] = (int)PyLong_AsLong(PyTuple_GET_ITEM(slots, k));
            step->stride[k] = PyLong_AsSsize_t(PyTuple_GET_ITEM(strides, k));
            if (PyErr_Occurred())
                goto fail;
            if (step->slot[k] < 0 || step->slot[k] >= n_slots) {
                PyErr_SetString(PyExc_ValueError, "a slot out of range");
                goto fail;
            }
        }
        int j = loop_index(u, nums);
        if (j < 0) {
            PyErr_SetString(PyExc_LookupError, "the ufunc has no loop of exactly these types");
            goto fail;
        }
        step->fn = u->functions[j];
        step->data = u->data == NULL ? NULL : u->data[j];
        if (PyList_Append(self->keep, ufunc) < 0)
            goto fail;
    }
    return (PyObject *)self;
fail:
    Py_DECREF(self);
    return NULL;
}

/* plan(out, inputs, scalars) -> True, the program computed into out; False, with nothing done,
 * where an array is not of the plan's type, dtype (by identity), size or layout. */
static PyObject *
plan_call(Plan *self, PyObject *args, PyObject *kwds)
{
    PyObject *out, *inputs, *scalars;
    if (kwds != NULL || PyTuple_GET_SIZE(args) != 3) {
        PyErr_SetString(PyExc_TypeError, "plan(out, inputs, scalars)");
        return NULL;
    }
    out = PyTuple_GET_ITEM(args, 0);
    inputs = PyTuple_GET_ITEM(args, 1);
    scalars = PyTuple_GET_ITEM(args, 2);
    PyObject **in_items, **sc_items;
    Py_ssize_t n_in, n_sc;
    if (PyList_CheckExact(inputs)) {
        in_items = ((PyListObject *)inputs)->ob_item;
        n_in = PyList_GET_SIZE(inputs);
    } else if (PyTuple_CheckExact(inputs)) {
        in_items = ((PyTupleObject *)inputs)->ob_item;
        n_in = PyTuple_GET_SIZE(inputs);
    } else
        Py_RETURN_FALSE;
    if (!PyTuple_CheckExact(scalars))
        Py_RETURN_FALSE;
    sc_items = ((PyTupleObject *)scalars)->ob_item;
    n_sc = PyTuple_GET_SIZE(scalars);
    if (n_in != self->n_inputs || n_sc != self->n_scalars)
        Py_RETURN_FALSE;
    PyObject **descrs = ((PyTupleObject *)self->descrs)->ob_item;
    Array *o = (Array *)out;
    if (Py_TYPE(out) != ndarray || o->descr != descrs[0]
        || (o->flags & (C_CONTIGUOUS | ALIGNED | WRITEABLE)) != (C_CONTIGUOUS | ALIGNED | WRITEABLE)
        || size_of(o) != self->n)
        Py_RETURN_FALSE;
    self->ptrs[0] = o->data;
    for (Py_ssize_t k = 0; k < n_in; k++) {
        Array *a = (Array *)in_items[k];
        if (Py_TYPE(a) != ndarray || a->descr != descrs[1 + k]
            || (a->flags & (C_CONTIGUOUS | ALIGNED)) != (C_CONTIGUOUS | ALIGNED) || size_of(a) != self->n)
            Py_RETURN_FALSE;
        self->ptrs[1 + k] = a->data;
    }
    for (Py_ssize_t k = 0; k < n_sc; k++) {
        Array *a = (Array *)sc_items[k];
        if (Py_TYPE(a) != ndarray || a->descr != descrs[1 + n_in + k] || a->nd != 0
            || !(a->flags & ALIGNED))
            Py_RETURN_FALSE;
        self->ptrs[1 + n_in + k] = a->data;
    }
    npy_intp n = self->n;
    char *argv[MAX_ARGS];
    for (int s = 0; s < self->n_steps; s++) {
        Step *step = &self->steps[s];
        for (int k = 0; k < step->nargs; k++)
            argv[k] = self->ptrs[step->slot[k]];
        step->fn(argv, &n, step->stride, step->data);
    }
    Py_RETURN_TRUE;
}

static PyTypeObject PlanType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "lazytensor.kernels.cpu._ufunc_loops.Plan",
    .tp_basicsize = sizeof(Plan),
    .tp_dealloc = (destructor)plan_dealloc,
    .tp_call = (ternaryfunc)plan_call,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "A block's ufunc steps as NumPy's inner loops over flat operands.",
    .tp_new = plan_new,
};

static PyObject *
setup(PyObject *module, PyObject *args)
{
    PyObject *array, *ufunc;
    if (!PyArg_ParseTuple(args, "O!O!", &PyType_Type, &array, &PyType_Type, &ufunc))
        return NULL;
    Py_XSETREF(ndarray, (PyTypeObject *)Py_NewRef(array));
    Py_XSETREF(ufunc_type, (PyTypeObject *)Py_NewRef(ufunc));
    Py_RETURN_NONE;
}

/* probe_array(a) -> (data address, ndim, descr, flags) as this file reads them. */
static PyObject *
probe_array(PyObject *module, PyObject *a)
{
    if (ndarray == NULL || Py_TYPE(a) != ndarray) {
        PyErr_SetString(PyExc_TypeError, "probe_array(an ndarray), after setup()");
        return NULL;
    }
    Array *x = (Array *)a;
    return Py_BuildValue("(niOi)", (npy_intp)x->data, x->nd, x->descr, x->flags);
}

/* probe_ufunc(u) -> (nin, nout, nargs, ntypes) as this file reads them; with names=True also
 * (name, the type numbers of each loop). */
static PyObject *
probe_ufunc(PyObject *module, PyObject *args)
{
    PyObject *u;
    int names = 0;
    if (!PyArg_ParseTuple(args, "O|p", &u, &names))
        return NULL;
    if (ufunc_type == NULL || Py_TYPE(u) != ufunc_type) {
        PyErr_SetString(PyExc_TypeError, "probe_ufunc(a ufunc), after setup()");
        return NULL;
    }
    UFunc *f = (UFunc *)u;
    if (!names)
        return Py_BuildValue("(iiii)", f->nin, f->nout, f->nargs, f->ntypes);
    PyObject *loops = PyList_New(f->ntypes);
    if (loops == NULL)
        return NULL;
    for (int j = 0; j < f->ntypes; j++) {
        PyObject *t = PyTuple_New(f->nargs);
        if (t == NULL) {
            Py_DECREF(loops);
            return NULL;
        }
        for (int k = 0; k < f->nargs; k++)
            PyTuple_SET_ITEM(t, k, PyLong_FromLong((unsigned char)f->types[j * f->nargs + k]));
        PyList_SET_ITEM(loops, j, t);
    }
    return Py_BuildValue("(iiiisN)", f->nin, f->nout, f->nargs, f->ntypes, f->name, loops);
}

static PyMethodDef module_methods[] = {
    {"setup", setup, METH_VARARGS, "setup(numpy.ndarray, numpy.ufunc): the types of arrays and ufuncs"},
    {"probe_array", probe_array, METH_O, "an ndarray's fields as this module reads them"},
    {"probe_ufunc", probe_ufunc, METH_VARARGS, "a ufunc's fields as this module reads them"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef moduledef = {
    PyModuleDef_HEAD_INIT, "_ufunc_loops", "NumPy's inner loops for the interpreter tier's small calls.",
    -1, module_methods,
};

PyMODINIT_FUNC
PyInit__ufunc_loops(void)
{
    if (PyType_Ready(&PlanType) < 0)
        return NULL;
    PyObject *m = PyModule_Create(&moduledef);
    if (m == NULL)
        return NULL;
    Py_INCREF(&PlanType);
    if (PyModule_AddObject(m, "Plan", (PyObject *)&PlanType) < 0) {
        Py_DECREF(&PlanType);
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
