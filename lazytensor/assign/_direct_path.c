/* `y[...] = e` for the interpreter tier's seen structures, in C: Tensor.__setitem__'s common case
 * when a flat runner with NumPy's inner loops (kernels/cpu/_ufunc_loops.c) serves the call.
 *
 * The Python path of that case (array_methods.setitem, evaluate.assign, direct.assign and
 * flat_operands, the CPU backend's run_flat, FlatRunner.run) checks some thirty fields and makes
 * four lookups, 2 us a call, when the loops take 0.2 us. This file makes the same checks, in the
 * same order of meaning, and calls the runner's loops; anything else (a key other than `...`, a
 * value not an unevaluated Expr, readers of y's memory, a structure not kept here, a compiled
 * kernel arrived, a profile, a changed tier setting, new scalar objects, an array the loops
 * refuse) goes to the Python setitem it wraps, before anything is written. lazytensor/assign/
 * direct.py keeps an entry here (by the node's and destination's structure ids and the shape)
 * after the Python path served a call through such a runner.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>

#define SLOT(o, offset) (*(PyObject **)((char *)(o) + (offset)))

static struct {
    Py_ssize_t skey, shape, dtype, device, heavy, leaves, scalars, shared, last_plan, result, epoch;
} E;
static Py_ssize_t T_data, T_shape, T_dtype, T_device, T_skey, T_flat, T_memory, M_version;
static PyTypeObject *ExprType, *TensorType, *MemoryType;
static PyObject *RESULTS, *known, *steps_dict, *launch_dict, *environ_data, *mark_keys, *cpu, *entries;
static PyObject *s_before_step, *s_listeners, *s_flat_kernels, *s_kernels, *s_loops, *s_scalars, *s_values;
static PyObject *one;
static int ready = 0, enabled = 1;

#define MAX_LEAVES 16
#define MAX_ENTRIES 1024

static int
slot_offset(PyObject *type, const char *name, Py_ssize_t *offset)
{
    PyObject *d = PyDict_GetItemString(((PyTypeObject *)type)->tp_dict, name);
    if (d == NULL || !Py_IS_TYPE(d, &PyMemberDescr_Type)
        || ((PyMemberDescrObject *)d)->d_member->type != T_OBJECT_EX) {
        PyErr_Format(PyExc_TypeError, "%s.%s is not an object slot", ((PyTypeObject *)type)->tp_name, name);
        return -1;
    }
    *offset = ((PyMemberDescrObject *)d)->d_member->offset;
    return 0;
}

/* setup(Expr, Tensor, Memory, RESULTS, direct._known, steps module dict, launch_log module dict, os.environ's
 * data dict, (the tier marks' keys), "cpu") */
static PyObject *
setup(PyObject *module, PyObject *args)
{
    PyObject *expr, *tensor, *memory;
    if (!PyArg_ParseTuple(args, "O!O!O!O!O!O!O!O!O!U", &PyType_Type, &expr, &PyType_Type, &tensor,
                          &PyType_Type, &memory, &PyList_Type, &RESULTS, &PyDict_Type, &known,
                          &PyDict_Type, &steps_dict,
                          &PyDict_Type, &launch_dict, &PyDict_Type, &environ_data, &PyTuple_Type,
                          &mark_keys, &cpu))
        return NULL;
    struct { PyObject *type; const char *name; Py_ssize_t *offset; } slots[] = {
        {expr, "skey", &E.skey}, {expr, "shape", &E.shape}, {expr, "dtype", &E.dtype},
        {expr, "device", &E.device}, {expr, "heavy", &E.heavy}, {expr, "leaves", &E.leaves},
        {expr, "scalars", &E.scalars}, {expr, "shared", &E.shared}, {expr, "last_plan", &E.last_plan},
        {expr, "result", &E.result}, {expr, "epoch", &E.epoch},
        {tensor, "data", &T_data}, {tensor, "shape", &T_shape}, {tensor, "dtype", &T_dtype},
        {tensor, "device", &T_device}, {tensor, "skey", &T_skey}, {tensor, "flat", &T_flat},
        {tensor, "memory", &T_memory}, {memory, "version", &M_version},
    };
    for (size_t i = 0; i < sizeof slots / sizeof slots[0]; i++)
        if (slot_offset(slots[i].type, slots[i].name, slots[i].offset) < 0)
            return NULL;
    if (PyTuple_GET_SIZE(mark_keys) != 2) {
        PyErr_SetString(PyExc_ValueError, "two tier marks");
        return NULL;
    }
    ExprType = (PyTypeObject *)expr;
    TensorType = (PyTypeObject *)tensor;
    MemoryType = (PyTypeObject *)memory;
    PyObject *keep[] = {expr, tensor, memory, RESULTS, known, steps_dict, launch_dict, environ_data, mark_keys, cpu};
    for (size_t i = 0; i < sizeof keep / sizeof keep[0]; i++)
        Py_INCREF(keep[i]);
    if (entries == NULL && (entries = PyDict_New()) == NULL)
        return NULL;
    ready = 1;
    Py_RETURN_NONE;
}

/* keep(node skey, dest skey, dest shape, (direct._known's key, its value (program, backend), the
 * backend's key of compiled kernels (program, ndim), its key of runners (program, shape))). An entry
 * holds no runner nor lookup table: each call finds the backend's current ones, as run_flat does,
 * so a runner the backend dropped (FlatRunners' bounds) is freed. */
static PyObject *
keep(PyObject *module, PyObject *args)
{
    PyObject *node_key, *dest_key, *shape, *entry;
    if (!ready || !PyArg_ParseTuple(args, "OOO!O!", &node_key, &dest_key, &PyTuple_Type, &shape,
                                    &PyTuple_Type, &entry)
        || PyTuple_GET_SIZE(entry) != 4 || !PyTuple_CheckExact(PyTuple_GET_ITEM(entry, 1))
        || PyTuple_GET_SIZE(PyTuple_GET_ITEM(entry, 1)) != 2) {
        if (!PyErr_Occurred())
            PyErr_SetString(PyExc_TypeError, "keep(node skey, dest skey, dest shape, a 4-tuple), after setup()");
        return NULL;
    }
    PyObject *key = PyTuple_Pack(3, node_key, dest_key, shape);
    if (key == NULL)
        return NULL;
    if (PyDict_GET_SIZE(entries) >= MAX_ENTRIES)
        PyDict_Clear(entries);
    int r = PyDict_SetItem(entries, key, entry);
    Py_DECREF(key);
    if (r < 0)
        return NULL;
    Py_RETURN_NONE;
}

static PyObject *
clear(PyObject *module, PyObject *unused)
{
    if (entries != NULL)
        PyDict_Clear(entries);
    Py_RETURN_NONE;
}

static PyObject *
set_enabled(PyObject *module, PyObject *flag)
{
    int was = enabled;
    int on = PyObject_IsTrue(flag);
    if (on < 0)
        return NULL;
    enabled = on;
    return PyBool_FromLong(was);
}

static PyObject *
size(PyObject *module, PyObject *unused)
{
    return PyLong_FromSsize_t(entries == NULL ? 0 : PyDict_GET_SIZE(entries));
}

static int
same(PyObject *a, PyObject *b)        /* 1 equal, 0 not, -1 error */
{
    return a == b ? 1 : PyObject_RichCompareBool(a, b, Py_EQ);
}

/* 1: dest[...] = value done here; 0: not this file's case, nothing done; -1: an error. */
static int
fast_assign(PyObject *dest, PyObject *key, PyObject *value)
{
    int eq;
    if (!ready || !enabled || key != Py_Ellipsis || Py_TYPE(value) != ExprType || Py_TYPE(dest) != TensorType)
        return 0;
    /* evaluate.assign's common case: nothing reads dest's memory; value settled, never planned,
     * not heavy, of dest's shape, dtype and device (the CPU) */
    PyObject *readers = SLOT(dest, T_memory);
    if (readers == NULL || Py_TYPE(readers) != MemoryType || PyList_GET_SIZE(readers) != 0)
        return 0;
    if (SLOT(value, E.last_plan) != Py_None || SLOT(value, E.result) != Py_None
        || SLOT(value, E.heavy) != Py_False || SLOT(value, E.shared) != Py_False)
        return 0;
    PyObject *shape = SLOT(dest, T_shape);
    if ((eq = same(SLOT(value, E.epoch), PyList_GET_ITEM(RESULTS, 0))) != 1
        || (eq = same(SLOT(value, E.shape), shape)) != 1)
        return eq;
    PyObject *device = SLOT(dest, T_device);
    if (SLOT(value, E.dtype) != SLOT(dest, T_dtype) || SLOT(value, E.device) != device
        || (device != cpu && PyUnicode_Compare(device, cpu) != 0))
        return PyErr_Occurred() ? -1 : 0;
    /* nobody hooked into the steps or profiling */
    PyObject *hook = PyDict_GetItemWithError(steps_dict, s_before_step);
    if (hook != Py_None)
        return PyErr_Occurred() ? -1 : 0;
    PyObject *listeners = PyDict_GetItemWithError(launch_dict, s_listeners);
    if (listeners == NULL || !PyList_CheckExact(listeners) || PyList_GET_SIZE(listeners) != 0)
        return PyErr_Occurred() ? -1 : 0;
    /* the entry kept for this structure, still the backend's */
    PyObject *k = PyTuple_Pack(3, SLOT(value, E.skey), SLOT(dest, T_skey), shape);
    if (k == NULL)
        return -1;
    PyObject *entry = PyDict_GetItemWithError(entries, k);
    Py_DECREF(k);
    if (entry == NULL)
        return PyErr_Occurred() ? -1 : 0;
    Py_INCREF(entry);           /* (the checks below run Python code: attribute reads, __eq__) */
    int done = -1;
    PyObject *known_key = PyTuple_GET_ITEM(entry, 0), *known_value = PyTuple_GET_ITEM(entry, 1);
    PyObject *backend = PyTuple_GET_ITEM(known_value, 1), *flat = NULL;
    PyObject *kernels_key = PyTuple_GET_ITEM(entry, 2), *runners_key = PyTuple_GET_ITEM(entry, 3);
    PyObject *runner_entry;
    PyObject *current = NULL, *kernels = NULL, *loops = NULL, *last = NULL, *values = NULL, *out = NULL;
    PyObject *inputs = NULL, *call = NULL, *version = NULL, *held = NULL;
    /* direct.assign's program and backend for this structure still the ones kept */
    PyObject *now_known = PyDict_GetItemWithError(known, known_key);
    if (now_known != known_value) {
        done = PyErr_Occurred() ? -1 : 0;
        goto finish;
    }
    current = PyObject_GetAttr(backend, s_flat_kernels);
    if (current == NULL)
        goto finish;
    done = 0;
    flat = current;
    if (!PyList_CheckExact(flat) || PyList_GET_SIZE(flat) != 4)
        goto finish;
    if ((kernels = PyObject_GetAttr(backend, s_kernels)) == NULL) {
        done = -1;
        goto finish;
    }
    if (PyList_GET_ITEM(flat, 0) != kernels || !PyDict_CheckExact(PyList_GET_ITEM(flat, 1))
        || !PyDict_CheckExact(PyList_GET_ITEM(flat, 3)))
        goto finish;
    /* no compiled kernel kept for this program and rank; this runner still kept, its compile open
     * and the tier's settings as when it was made */
    if (PyDict_GetItemWithError(PyList_GET_ITEM(flat, 1), kernels_key) != NULL || PyErr_Occurred())
        goto error_or_finish;
    runner_entry = PyDict_GetItemWithError(PyList_GET_ITEM(flat, 3), runners_key);
    if (runner_entry == NULL || !PyTuple_CheckExact(runner_entry) || PyTuple_GET_SIZE(runner_entry) < 3)
        goto error_or_finish;
    held = Py_NewRef(runner_entry);     /* (the checks below may run Python code) */
    PyObject *flag = PyTuple_GET_ITEM(runner_entry, 1), *marks = PyTuple_GET_ITEM(runner_entry, 2);
    if (!PyList_CheckExact(flag) || PyList_GET_SIZE(flag) < 1 || PyList_GET_ITEM(flag, 0) != Py_True
        || !PyTuple_CheckExact(marks) || PyTuple_GET_SIZE(marks) != 2)
        goto finish;
    for (int m = 0; m < 2; m++) {
        PyObject *now = PyDict_GetItemWithError(environ_data, PyTuple_GET_ITEM(mark_keys, m));
        if (now == NULL) {
            if (PyErr_Occurred())
                goto error;
            now = Py_None;
        }
        if ((eq = same(now, PyTuple_GET_ITEM(marks, m))) != 1) {
            done = eq;
            goto finish;
        }
    }
    /* flat_operands: dest and every tensor C-contiguous and of dest's shape, none sharing dest's
     * memory, each read once */
    PyObject *dflat = SLOT(dest, T_flat), *data = SLOT(dest, T_data);
    if (dflat == NULL || !PyTuple_CheckExact(dflat) || PyTuple_GET_SIZE(dflat) != 2
        || PyTuple_GET_ITEM(dflat, 1) != Py_True)
        goto finish;
    PyObject *own = PyTuple_GET_ITEM(dflat, 0);
    PyObject *leaves = SLOT(value, E.leaves);
    if (leaves == NULL || !PyTuple_CheckExact(leaves) || PyTuple_GET_SIZE(leaves) > MAX_LEAVES)
        goto finish;
    Py_ssize_t n = PyTuple_GET_SIZE(leaves);
    if ((inputs = PyTuple_New(n)) == NULL)
        goto error;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *t = PyTuple_GET_ITEM(leaves, i);
        if (Py_TYPE(t) != TensorType)
            goto finish;
        for (Py_ssize_t j = 0; j < i; j++)
            if (PyTuple_GET_ITEM(leaves, j) == t)
                goto finish;
        if ((eq = same(SLOT(t, T_shape), shape)) != 1) {
            done = eq;
            goto finish;
        }
        PyObject *tflat = SLOT(t, T_flat), *a = SLOT(t, T_data);
        if (tflat == NULL || !PyTuple_CheckExact(tflat) || PyTuple_GET_SIZE(tflat) != 2
            || PyTuple_GET_ITEM(tflat, 1) != Py_True)
            goto finish;
        if ((eq = same(PyTuple_GET_ITEM(tflat, 0), own)) != 0) {
            if (eq < 0 || a != data) {
                done = eq < 0 ? -1 : 0;
                goto finish;
            }
        }
        PyTuple_SET_ITEM(inputs, i, Py_NewRef(a));
    }
    /* FlatRunner.run's case of its loops: the scalars the same objects as the last call's */
    PyObject *runner = PyTuple_GET_ITEM(runner_entry, 0);
    PyObject *scalars = SLOT(value, E.scalars);
    if ((loops = PyObject_GetAttr(runner, s_loops)) == NULL || (last = PyObject_GetAttr(runner, s_scalars)) == NULL
        || (values = PyObject_GetAttr(runner, s_values)) == NULL)
        goto error;
    if (loops == Py_False || loops == Py_None || !PyTuple_CheckExact(scalars) || !PyTuple_CheckExact(last)
        || PyTuple_GET_SIZE(last) != PyTuple_GET_SIZE(scalars) || !PyTuple_CheckExact(values)
        || PyTuple_GET_SIZE(values) != 2)
        goto finish;
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(scalars); i++)
        if (PyTuple_GET_ITEM(scalars, i) != PyTuple_GET_ITEM(last, i))
            goto finish;
    out = Py_NewRef(data);
    call = PyObject_CallFunctionObjArgs(loops, out, inputs, PyTuple_GET_ITEM(values, 1), NULL);
    if (call == NULL)
        goto error;
    if (call != Py_True)
        goto finish;            /* refused (an array's type, dtype, size or layout): nothing written */
    /* readers.version += 1 */
    version = PyNumber_Add(SLOT(readers, M_version), one);
    if (version == NULL)
        goto error;
    Py_SETREF(SLOT(readers, M_version), version);
    version = NULL;
    done = 1;
    goto finish;
error_or_finish:
    done = PyErr_Occurred() ? -1 : 0;
    goto finish;
error:
    done = -1;
finish:
    Py_XDECREF(current);
    Py_XDECREF(kernels);
    Py_XDECREF(loops);
    Py_XDECREF(last);
    Py_XDECREF(values);
    Py_XDECREF(out);
    Py_XDECREF(inputs);
    Py_XDECREF(call);
    Py_XDECREF(held);
    Py_DECREF(entry);
    return done;
}

typedef struct {
    PyObject_HEAD
    PyObject *python;           /* the Python setitem */
    vectorcallfunc vectorcall;
} Setitem;

static PyObject *
setitem_call(Setitem *self, PyObject *const *args, size_t nargsf, PyObject *kwnames)
{
    Py_ssize_t nargs = PyVectorcall_NARGS(nargsf);
    if (nargs == 3 && kwnames == NULL) {
        int r = fast_assign(args[0], args[1], args[2]);
        if (r == 1)
            Py_RETURN_NONE;
        if (r < 0)
            return NULL;
    }
    return PyObject_Vectorcall(self->python, args, nargsf, kwnames);
}

static PyObject *
setitem_new(PyTypeObject *type, PyObject *args, PyObject *kwargs)
{
    PyObject *python;
    if (!PyArg_ParseTuple(args, "O", &python))
        return NULL;
    Setitem *self = PyObject_GC_New(Setitem, type);
    if (self == NULL)
        return NULL;
    self->python = Py_NewRef(python);
    self->vectorcall = (vectorcallfunc)setitem_call;
    PyObject_GC_Track(self);
    return (PyObject *)self;
}

static int
setitem_traverse(Setitem *self, visitproc visit, void *arg)
{
    Py_VISIT(Py_TYPE(self));
    Py_VISIT(self->python);
    return 0;
}

static int
setitem_clear(Setitem *self)
{
    Py_CLEAR(self->python);
    return 0;
}

static void
setitem_dealloc(Setitem *self)
{
    PyTypeObject *type = Py_TYPE(self);
    PyObject_GC_UnTrack(self);
    setitem_clear(self);
    type->tp_free(self);
    Py_DECREF(type);
}

static PyObject *
setitem_get(PyObject *self, PyObject *obj, PyObject *type)
{
    if (obj == NULL || obj == Py_None)
        return Py_NewRef(self);
    return PyMethod_New(self, obj);
}

static PyMemberDef setitem_members[] = {
    {"python", T_OBJECT, offsetof(Setitem, python), READONLY, "the Python setitem this one wraps"},
    {"__vectorcalloffset__", T_PYSSIZET, offsetof(Setitem, vectorcall), READONLY},
    {NULL},
};

static PyType_Slot setitem_slots[] = {
    {Py_tp_doc, "Setitem(python): Tensor.__setitem__, the seen structures' `y[...] = e` here, else python."},
    {Py_tp_new, setitem_new},
    {Py_tp_dealloc, setitem_dealloc},
    {Py_tp_traverse, setitem_traverse},
    {Py_tp_clear, setitem_clear},
    {Py_tp_call, PyVectorcall_Call},
    {Py_tp_descr_get, setitem_get},
    {Py_tp_members, setitem_members},
    {0, NULL},
};

static PyType_Spec setitem_spec = {
    "lazytensor.assign._direct_path.Setitem", sizeof(Setitem), 0,
    /* a method descriptor: `y[...] = e` calls it with y prepended, without binding a method object */
    Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_HAVE_VECTORCALL | Py_TPFLAGS_METHOD_DESCRIPTOR,
    setitem_slots,
};

static PyMethodDef module_methods[] = {
    {"setup", setup, METH_VARARGS,
     "setup(Expr, Tensor, Memory, RESULTS, steps' dict, launch_log's dict, environ data, mark keys, 'cpu')"},
    {"keep", keep, METH_VARARGS, "keep(node skey, dest skey, entry): a structure the loops serve"},
    {"clear", clear, METH_NOARGS, "drop every kept structure"},
    {"set_enabled", set_enabled, METH_O, "set_enabled(flag) -> the previous flag; off, every call takes the Python setitem"},
    {"size", size, METH_NOARGS, "how many structures are kept"},
    {NULL},
};

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT, "lazytensor.assign._direct_path",
    "`y[...] = e` for the interpreter tier's seen structures, in C.", -1, module_methods,
};

PyMODINIT_FUNC
PyInit__direct_path(void)
{
    PyObject *m = PyModule_Create(&module_def);
    if (m == NULL)
        return NULL;
    one = PyLong_FromLong(1);
    s_before_step = PyUnicode_InternFromString("before_step");
    s_listeners = PyUnicode_InternFromString("listeners");
    s_flat_kernels = PyUnicode_InternFromString("_flat_kernels");
    s_kernels = PyUnicode_InternFromString("kernels");
    s_loops = PyUnicode_InternFromString("loops");
    s_scalars = PyUnicode_InternFromString("_scalars");
    s_values = PyUnicode_InternFromString("_values");
    PyObject *type = PyType_FromSpec(&setitem_spec);
    if (one == NULL || s_before_step == NULL || s_listeners == NULL || s_flat_kernels == NULL
        || s_kernels == NULL || s_loops == NULL || s_scalars == NULL || s_values == NULL || type == NULL
        || PyModule_AddObject(m, "Setitem", type) < 0) {
        Py_XDECREF(type);
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
