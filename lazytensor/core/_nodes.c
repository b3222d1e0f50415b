/* The node builders of lazytensor.core.expr for the cases seen before, in C.
 *
 * Every operator a user writes (`a + b`, `lt.relu(x)`) builds one Expr. For a case the builder has
 * seen before (expr._binary_cases, expr._unary_cases: the operands' structure ids or scalar types
 * -> the new node's structure id, dtype and loop dtypes) the node's fields follow from its operands
 * with a handful of reads and writes, which Python spends about a microsecond on and C a tenth of
 * that. This file does exactly what the Python builders `operator_function`'s `build` and
 * `unary_function`'s `build` do for those cases, writing the Expr's slots directly; anything else
 * (a case not seen yet, an evaluated operand, a wrong number of arguments, a field not set) is left
 * to the Python builder it wraps, which stays the reference (`python`). tests/test_compiled_nodes.py
 * checks that both build the same DAGs, field by field.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>

#define SLOT(o, offset) (*(PyObject **)((char *)(o) + (offset)))

/* The byte offsets of the __slots__ this file reads and writes, found by setup(). */
static struct {
    Py_ssize_t op, args, shape, dtype, device, heavy, attrs, skey, leaves, scalars, shared, uses,
        last_plan, result, epoch, origin;
} E;                                                    /* Expr */
static Py_ssize_t T_skey, T_shape, T_device, T_memory;  /* Tensor */
static Py_ssize_t C_scalars;                            /* Const */
static Py_ssize_t M_limit;                               /* readers.Memory */

static PyTypeObject *ExprType, *TensorType, *ConstType, *MemoryType;
static PyObject *RESULTS;               /* expr.RESULTS, a list of one int */
static PyObject *broadcast_shapes, *device_of, *memory_of, *constant;
static PyObject *zero, *one, *empty, *sweep_name;
/* Builders take their cases here once setup() has run and while set_enabled(True) holds (the
 * default): otherwise every call goes to the Python builder. */
static int ready = 0, enabled = 1, active = 0;

static int
slot_offset(PyTypeObject *type, const char *name, Py_ssize_t *offset)
{
    PyObject *d = PyDict_GetItemString(type->tp_dict, name);
    if (d == NULL || !Py_IS_TYPE(d, &PyMemberDescr_Type)) {
        PyErr_Format(PyExc_TypeError, "%s.%s is not a slot", type->tp_name, name);
        return -1;
    }
    PyMemberDef *m = ((PyMemberDescrObject *)d)->d_member;
    if (m->type != T_OBJECT_EX) {
        PyErr_Format(PyExc_TypeError, "%s.%s is not an object slot", type->tp_name, name);
        return -1;
    }
    *offset = m->offset;
    return 0;
}

static PyObject *
setup(PyObject *module, PyObject *args)
{
    PyObject *expr, *tensor, *cnst, *memory;
    if (!PyArg_ParseTuple(args, "O!O!O!O!O!OOOO", &PyType_Type, &expr, &PyType_Type, &tensor,
                          &PyType_Type, &cnst, &PyType_Type, &memory, &PyList_Type, &RESULTS,
                          &broadcast_shapes, &device_of, &memory_of, &constant))
        return NULL;
    ExprType = (PyTypeObject *)expr;
    TensorType = (PyTypeObject *)tensor;
    ConstType = (PyTypeObject *)cnst;
    MemoryType = (PyTypeObject *)memory;
    struct { const char *name; Py_ssize_t *offset; } expr_slots[] = {
        {"op", &E.op}, {"args", &E.args}, {"shape", &E.shape}, {"dtype", &E.dtype},
        {"device", &E.device}, {"heavy", &E.heavy}, {"attrs", &E.attrs}, {"skey", &E.skey},
        {"leaves", &E.leaves}, {"scalars", &E.scalars}, {"shared", &E.shared}, {"uses", &E.uses},
        {"last_plan", &E.last_plan}, {"result", &E.result}, {"epoch", &E.epoch},
        {"origin", &E.origin},
    };
    for (size_t i = 0; i < sizeof expr_slots / sizeof expr_slots[0]; i++)
        if (slot_offset(ExprType, expr_slots[i].name, expr_slots[i].offset) < 0)
            return NULL;
    if (slot_offset(TensorType, "skey", &T_skey) < 0 || slot_offset(TensorType, "shape", &T_shape) < 0
        || slot_offset(TensorType, "device", &T_device) < 0
        || slot_offset(TensorType, "memory", &T_memory) < 0
        || slot_offset(ConstType, "scalars", &C_scalars) < 0
        || slot_offset(MemoryType, "limit", &M_limit) < 0)
        return NULL;
    /* (kept for the life of the process: the module holds its references) */
    PyObject *keep[] = {expr, tensor, cnst, memory, RESULTS, broadcast_shapes, device_of, memory_of,
                        constant};
    for (size_t i = 0; i < sizeof keep / sizeof keep[0]; i++)
        Py_INCREF(keep[i]);
    ready = 1;
    active = enabled;
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
    active = ready && enabled;
    return PyBool_FromLong(was);
}

/* ---- building a node ------------------------------------------------------------------------ */

/* A new Expr with the fields every builder sets alike (op, skey, dtype, heavy, attrs, uses,
 * last_plan, result, origin); the rest are NULL until the caller sets them. */
static PyObject *
new_node(PyObject *op, PyObject *sid, PyObject *dtype)
{
    PyObject *node = ExprType->tp_alloc(ExprType, 0);
    if (node == NULL)
        return NULL;
    SLOT(node, E.op) = Py_NewRef(op);
    SLOT(node, E.skey) = Py_NewRef(sid);
    SLOT(node, E.dtype) = Py_NewRef(dtype);
    SLOT(node, E.heavy) = Py_NewRef(Py_False);
    SLOT(node, E.attrs) = Py_NewRef(Py_None);
    SLOT(node, E.uses) = Py_NewRef(zero);
    SLOT(node, E.last_plan) = Py_NewRef(Py_None);
    SLOT(node, E.result) = Py_NewRef(Py_None);
    SLOT(node, E.origin) = Py_NewRef(Py_None);
    return node;
}

/* x.uses += 1 for an Expr operand; whether the new node is then shared (x used more than once, or
 * shared below). -1 on error. */
static int
use(PyObject *x)
{
    PyObject *uses = PyNumber_Add(SLOT(x, E.uses), one);
    if (uses == NULL)
        return -1;
    Py_SETREF(SLOT(x, E.uses), uses);
    long n = PyLong_AsLong(uses);
    if (n == -1 && PyErr_Occurred())
        return -1;
    return n > 1 ? 1 : PyObject_IsTrue(SLOT(x, E.shared));
}

/* Register the node (by its weak reference *me, made on first need) as a reader of Tensor t's
 * memory: readers.register(), inline. */
static int
register_reader(PyObject *node, PyObject **me, PyObject *t)
{
    if (*me == NULL && (*me = PyWeakref_NewRef(node, NULL)) == NULL)
        return -1;
    PyObject *m = SLOT(t, T_memory);
    if (m == Py_None)
        m = PyObject_CallOneArg(memory_of, t);
    else
        Py_INCREF(m);
    if (m == NULL)
        return -1;
    int ok = -1;
    if (!PyList_Check(m) || PyList_Append(m, *me) < 0)
        goto done;
    PyObject *limit = Py_IS_TYPE(m, MemoryType) ? SLOT(m, M_limit) : NULL;
    if (limit == NULL) {
        PyErr_SetString(PyExc_TypeError, "a tensor's reader record is not a Memory");
        goto done;
    }
    PyObject *len = PyLong_FromSsize_t(PyList_GET_SIZE(m));
    if (len == NULL)
        goto done;
    int over = PyObject_RichCompareBool(len, limit, Py_GT);
    Py_DECREF(len);
    if (over < 0)
        goto done;
    if (over) {
        PyObject *r = PyObject_CallMethodNoArgs(m, sweep_name);
        if (r == NULL)
            goto done;
        Py_DECREF(r);
    }
    ok = 0;
done:
    Py_DECREF(m);
    return ok;
}

/* The key of an operand in a case table: its structure id for a Tensor or an unevaluated node,
 * else its type (a Python scalar's type picks a case; anything else finds none). NULL (no error)
 * where a field is not set: the Python builder takes the call. */
static PyObject *
case_key(PyObject *x)
{
    PyTypeObject *t = Py_TYPE(x);
    if (t == TensorType)
        return SLOT(x, T_skey);
    if (t == ExprType) {
        PyObject *result = SLOT(x, E.result);
        if (result == NULL)
            return NULL;
        if (result == Py_None)
            return SLOT(x, E.skey);
    }
    return (PyObject *)t;
}

/* The Const of a scalar operand: the case's own, by value, else made (expr.constant, which keeps
 * it in the case's table where it may). */
static PyObject *
constant_of(PyObject *consts, PyObject *value, PyObject *loop_dtype)
{
    PyObject *c = PyDict_GetItemWithError(consts, value);
    if (c != NULL)
        return Py_NewRef(c);
    if (PyErr_Occurred())
        return NULL;
    c = PyObject_CallFunctionObjArgs(constant, value, loop_dtype, consts, NULL);
    if (c != NULL && !Py_IS_TYPE(c, ConstType)) {
        Py_DECREF(c);
        PyErr_SetString(PyExc_TypeError, "expr.constant did not give a Const");
        return NULL;
    }
    return c;
}

/* ---- the builder objects -------------------------------------------------------------------- */

typedef struct {
    PyObject_HEAD
    PyObject *op;           /* the op's name */
    PyObject *cases;        /* the op's case table, shared with the Python builder */
    PyObject *python;       /* the Python builder: the reference, and every call this one leaves */
    PyObject *dict;         /* __name__, __doc__, ... */
    int reflected;          /* `b <op> a`, called as a's `__r<op>__(a, b)` */
    vectorcallfunc vectorcall;
} Builder;

static PyObject *
call_python(Builder *self, PyObject *const *args, size_t nargsf, PyObject *kwnames)
{
    return PyObject_Vectorcall(self->python, args, nargsf, kwnames);
}

static PyObject *
binary_call(Builder *self, PyObject *const *args, size_t nargsf, PyObject *kwnames)
{
    if (!active || PyVectorcall_NARGS(nargsf) != 2 || kwnames != NULL)
        return call_python(self, args, nargsf, kwnames);
    PyObject *a = args[self->reflected], *b = args[!self->reflected];
    PyObject *ka = case_key(a), *kb = case_key(b);
    if (ka == NULL || kb == NULL)
        return call_python(self, args, nargsf, kwnames);
    PyObject *key = PyTuple_Pack(2, ka, kb);
    if (key == NULL)
        return NULL;
    PyObject *c = PyDict_GetItemWithError(self->cases, key);     /* borrowed */
    Py_DECREF(key);
    if (c == NULL) {
        if (PyErr_Occurred())
            return NULL;
        return call_python(self, args, nargsf, kwnames);       /* a first case: the general path */
    }
    if (!PyTuple_CheckExact(c) || PyTuple_GET_SIZE(c) != 5) {
        PyErr_SetString(PyExc_TypeError, "a binary case is not (structure id, dtype, loop a, loop b, consts)");
        return NULL;
    }
    Py_INCREF(c);       /* (a table may be cleared while this call runs Python code) */
    PyTypeObject *ta = Py_TYPE(a), *tb = Py_TYPE(b);
    int a_node = ta == ExprType || ta == TensorType, b_node = tb == ExprType || tb == TensorType;
    PyObject *shape, *device, *node = NULL, *me = NULL, *leaves = NULL, *scalars = NULL, *epoch;
    PyObject *ca = NULL, *cb = NULL;        /* the Consts that stand for scalar operands */
    int shared = 0;

    /* shape and device first: they may raise, before anything is changed */
    PyObject *sa = a_node ? SLOT(a, ta == ExprType ? E.shape : T_shape) : NULL;
    PyObject *sb = b_node ? SLOT(b, tb == ExprType ? E.shape : T_shape) : NULL;
    PyObject *da = a_node ? SLOT(a, ta == ExprType ? E.device : T_device) : NULL;
    PyObject *db = b_node ? SLOT(b, tb == ExprType ? E.device : T_device) : NULL;
    if ((a_node && (sa == NULL || da == NULL)) || (b_node && (sb == NULL || db == NULL))) {
        Py_DECREF(c);
        return call_python(self, args, nargsf, kwnames);
    }
    if (a_node && b_node) {
        shape = Py_NewRef(sa);
        if (sb != sa) {
            int differ = PyObject_RichCompareBool(sb, sa, Py_NE);
            if (differ < 0)
                goto fail_early;
            if (differ) {
                Py_SETREF(shape, PyObject_CallFunctionObjArgs(broadcast_shapes, sa, sb, NULL));
                if (shape == NULL)
                    goto fail_early;
            }
        }
        device = Py_NewRef(da);
        if (db != da) {
            PyObject *both = PyTuple_Pack(2, da, db);
            if (both == NULL)
                goto fail_shape;
            Py_SETREF(device, PyObject_CallOneArg(device_of, both));
            Py_DECREF(both);
            if (device == NULL)
                goto fail_shape;
        }
    }
    else if (a_node) {
        shape = Py_NewRef(sa);
        device = Py_NewRef(da);
    }
    else {
        shape = Py_NewRef(sb);
        device = Py_NewRef(db);
    }

    PyObject *consts = PyTuple_GET_ITEM(c, 4);
    node = new_node(self->op, PyTuple_GET_ITEM(c, 0), PyTuple_GET_ITEM(c, 1));
    if (node == NULL)
        goto fail;
    if (ta == ExprType) {
        epoch = SLOT(a, E.epoch);
        if ((shared = use(a)) < 0)
            goto fail;
        leaves = Py_NewRef(SLOT(a, E.leaves));
        scalars = Py_NewRef(SLOT(a, E.scalars));
    }
    else if (ta == TensorType) {
        epoch = PyList_GET_ITEM(RESULTS, 0);
        leaves = PyTuple_Pack(1, a);
        scalars = Py_NewRef(empty);
        if (leaves == NULL || register_reader(node, &me, a) < 0)
            goto fail;
    }
    else {
        epoch = PyList_GET_ITEM(RESULTS, 0);
        if ((ca = constant_of(consts, a, PyTuple_GET_ITEM(c, 2))) == NULL)
            goto fail;
        leaves = Py_NewRef(empty);
        scalars = Py_NewRef(SLOT(ca, C_scalars));
    }
    Py_INCREF(epoch);
    if (tb == ExprType) {
        PyObject *eb = SLOT(b, E.epoch);
        int older = PyObject_RichCompareBool(eb, epoch, Py_LT);
        if (older < 0)
            goto fail_epoch;
        if (older)
            Py_SETREF(epoch, Py_NewRef(eb));
        int s = use(b);
        if (s < 0)
            goto fail_epoch;
        shared = shared || s;
        PyObject *lb = SLOT(b, E.leaves);
        if (PyTuple_GET_SIZE(leaves) == 0)
            Py_SETREF(leaves, Py_NewRef(lb));
        else if (PyTuple_GET_SIZE(lb) != 0)
            Py_SETREF(leaves, PySequence_Concat(leaves, lb));
        if (leaves == NULL)
            goto fail_epoch;
        PyObject *sc = SLOT(b, E.scalars);
        if (PyTuple_GET_SIZE(sc) != 0)
            Py_SETREF(scalars, PySequence_Concat(scalars, sc));
    }
    else if (tb == TensorType) {
        PyObject *one_leaf = PyTuple_Pack(1, b);
        if (one_leaf == NULL)
            goto fail_epoch;
        Py_SETREF(leaves, PySequence_Concat(leaves, one_leaf));
        Py_DECREF(one_leaf);
        if (leaves == NULL || register_reader(node, &me, b) < 0)
            goto fail_epoch;
    }
    else {
        if ((cb = constant_of(consts, b, PyTuple_GET_ITEM(c, 3))) == NULL)
            goto fail_epoch;
        Py_SETREF(scalars, PySequence_Concat(scalars, SLOT(cb, C_scalars)));
    }
    if (scalars == NULL)
        goto fail_epoch;
    PyObject *operands = PyTuple_Pack(2, ca ? ca : a, cb ? cb : b);
    if (operands == NULL)
        goto fail_epoch;
    SLOT(node, E.args) = operands;
    SLOT(node, E.shape) = shape;
    SLOT(node, E.device) = device;
    SLOT(node, E.leaves) = leaves;
    SLOT(node, E.scalars) = scalars;
    SLOT(node, E.epoch) = epoch;
    SLOT(node, E.shared) = Py_NewRef(shared ? Py_True : Py_False);
    Py_XDECREF(me);
    Py_XDECREF(ca);
    Py_XDECREF(cb);
    Py_DECREF(c);
    return node;

fail_epoch:
    Py_DECREF(epoch);
fail:
    Py_XDECREF(node);
    Py_XDECREF(me);
    Py_XDECREF(leaves);
    Py_XDECREF(scalars);
    Py_XDECREF(ca);
    Py_XDECREF(cb);
    Py_DECREF(device);
fail_shape:
    Py_DECREF(shape);
fail_early:
    Py_DECREF(c);
    return NULL;
}

static PyObject *
unary_call(Builder *self, PyObject *const *args, size_t nargsf, PyObject *kwnames)
{
    if (!active || PyVectorcall_NARGS(nargsf) != 1 || kwnames != NULL)
        return call_python(self, args, nargsf, kwnames);
    PyObject *x = args[0];
    PyTypeObject *t = Py_TYPE(x);
    if (t != TensorType && t != ExprType)
        return call_python(self, args, nargsf, kwnames);
    PyObject *k = case_key(x);
    if (k == NULL || k == (PyObject *)t)        /* an evaluated node (or a field not set) */
        return call_python(self, args, nargsf, kwnames);
    PyObject *c = PyDict_GetItemWithError(self->cases, k);
    if (c == NULL) {
        if (PyErr_Occurred())
            return NULL;
        return call_python(self, args, nargsf, kwnames);
    }
    if (!PyTuple_CheckExact(c) || PyTuple_GET_SIZE(c) != 2) {
        PyErr_SetString(PyExc_TypeError, "a unary case is not (structure id, dtype)");
        return NULL;
    }
    int tensor = t == TensorType;
    PyObject *shape = SLOT(x, tensor ? T_shape : E.shape), *device = SLOT(x, tensor ? T_device : E.device);
    if (shape == NULL || device == NULL)
        return call_python(self, args, nargsf, kwnames);
    PyObject *node = new_node(self->op, PyTuple_GET_ITEM(c, 0), PyTuple_GET_ITEM(c, 1));
    if (node == NULL)
        return NULL;
    SLOT(node, E.shape) = Py_NewRef(shape);
    SLOT(node, E.device) = Py_NewRef(device);
    if ((SLOT(node, E.args) = PyTuple_Pack(1, x)) == NULL)
        goto fail;
    if (!tensor) {
        SLOT(node, E.epoch) = Py_NewRef(SLOT(x, E.epoch));
        int shared = use(x);
        if (shared < 0)
            goto fail;
        SLOT(node, E.shared) = Py_NewRef(shared ? Py_True : Py_False);
        SLOT(node, E.leaves) = Py_NewRef(SLOT(x, E.leaves));
        SLOT(node, E.scalars) = Py_NewRef(SLOT(x, E.scalars));
        return node;
    }
    SLOT(node, E.epoch) = Py_NewRef(PyList_GET_ITEM(RESULTS, 0));
    SLOT(node, E.shared) = Py_NewRef(Py_False);
    SLOT(node, E.scalars) = Py_NewRef(empty);
    if ((SLOT(node, E.leaves) = PyTuple_Pack(1, x)) == NULL)
        goto fail;
    PyObject *me = NULL;
    int r = register_reader(node, &me, x);
    Py_XDECREF(me);
    if (r < 0)
        goto fail;
    return node;
fail:
    Py_DECREF(node);
    return NULL;
}

/* expr.heavy_over_tensor: a heavy node (`x.sum()`) over a Tensor, in C where the builders are on.
 * None where they are off: the caller builds it in Python. */
static PyObject *
heavy_over_tensor(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 5) {
        PyErr_SetString(PyExc_TypeError, "heavy_over_tensor(op, x, shape, dtype, attrs)");
        return NULL;
    }
    PyObject *x = args[1];
    if (!active || !Py_IS_TYPE(x, TensorType) || SLOT(x, T_device) == NULL)
        Py_RETURN_NONE;
    PyObject *node = new_node(args[0], Py_None, args[3]);
    if (node == NULL)
        return NULL;
    Py_SETREF(SLOT(node, E.heavy), Py_NewRef(Py_True));
    Py_SETREF(SLOT(node, E.attrs), Py_NewRef(args[4]));
    SLOT(node, E.shape) = Py_NewRef(args[2]);
    SLOT(node, E.device) = Py_NewRef(SLOT(x, T_device));
    SLOT(node, E.shared) = Py_NewRef(Py_True);
    SLOT(node, E.leaves) = Py_NewRef(empty);
    SLOT(node, E.scalars) = Py_NewRef(empty);
    SLOT(node, E.epoch) = Py_NewRef(PyList_GET_ITEM(RESULTS, 0));
    PyObject *me = NULL;
    if ((SLOT(node, E.args) = PyTuple_Pack(1, x)) == NULL || register_reader(node, &me, x) < 0) {
        Py_XDECREF(me);
        Py_DECREF(node);
        return NULL;
    }
    Py_DECREF(me);
    return node;
}

static PyObject *
builder_new(PyTypeObject *type, vectorcallfunc call, PyObject *op, PyObject *cases, PyObject *python,
            int reflected)
{
    if (!PyUnicode_Check(op) || !PyDict_CheckExact(cases) || !PyCallable_Check(python)) {
        PyErr_SetString(PyExc_TypeError, "a builder takes (op name, case dict, Python builder)");
        return NULL;
    }
    Builder *self = PyObject_GC_New(Builder, type);
    if (self == NULL)
        return NULL;
    self->op = Py_NewRef(op);
    self->cases = Py_NewRef(cases);
    self->python = Py_NewRef(python);
    self->dict = NULL;
    self->reflected = reflected;
    self->vectorcall = call;
    PyObject_GC_Track(self);
    return (PyObject *)self;
}

static int
builder_traverse(Builder *self, visitproc visit, void *arg)
{
    Py_VISIT(Py_TYPE(self));
    Py_VISIT(self->op);
    Py_VISIT(self->cases);
    Py_VISIT(self->python);
    Py_VISIT(self->dict);
    return 0;
}

static int
builder_clear(Builder *self)
{
    Py_CLEAR(self->op);
    Py_CLEAR(self->cases);
    Py_CLEAR(self->python);
    Py_CLEAR(self->dict);
    return 0;
}

static void
builder_dealloc(Builder *self)
{
    PyTypeObject *type = Py_TYPE(self);
    PyObject_GC_UnTrack(self);
    builder_clear(self);
    type->tp_free(self);
    Py_DECREF(type);
}

/* As a class attribute (Operand.__add__) the builder is a method: `t.__add__` binds t. */
static PyObject *
builder_get(PyObject *self, PyObject *obj, PyObject *type)
{
    if (obj == NULL || obj == Py_None)
        return Py_NewRef(self);
    return PyMethod_New(self, obj);
}

static PyMemberDef builder_members[] = {
    {"op", T_OBJECT, offsetof(Builder, op), READONLY, "the op's name"},
    {"python", T_OBJECT, offsetof(Builder, python), READONLY, "the Python builder this one stands for"},
    {"__dictoffset__", T_PYSSIZET, offsetof(Builder, dict), READONLY},
    {"__vectorcalloffset__", T_PYSSIZET, offsetof(Builder, vectorcall), READONLY},
    {NULL},
};

static PyObject *
binary_new(PyTypeObject *type, PyObject *args, PyObject *kwargs)
{
    PyObject *op, *cases, *python;
    int reflected;
    static char *names[] = {"op", "cases", "python", "reflected", NULL};
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "OOOp", names, &op, &cases, &python, &reflected))
        return NULL;
    return builder_new(type, (vectorcallfunc)binary_call, op, cases, python, reflected);
}

static PyObject *
unary_new(PyTypeObject *type, PyObject *args, PyObject *kwargs)
{
    PyObject *op, *cases, *python;
    static char *names[] = {"op", "cases", "python", NULL};
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "OOO", names, &op, &cases, &python))
        return NULL;
    return builder_new(type, (vectorcallfunc)unary_call, op, cases, python, 0);
}

static PyType_Slot binary_slots[] = {
    {Py_tp_doc, "BinaryBuilder(op, cases, python, reflected): `a <op> b` (a method of Operand)."},
    {Py_tp_new, binary_new},
    {Py_tp_dealloc, builder_dealloc},
    {Py_tp_traverse, builder_traverse},
    {Py_tp_clear, builder_clear},
    {Py_tp_call, PyVectorcall_Call},
    {Py_tp_descr_get, builder_get},
    {Py_tp_members, builder_members},
    {0, NULL},
};

static PyType_Slot unary_slots[] = {
    {Py_tp_doc, "UnaryBuilder(op, cases, python): `op(x)` (lt.exp, lt.relu, ...)."},
    {Py_tp_new, unary_new},
    {Py_tp_dealloc, builder_dealloc},
    {Py_tp_traverse, builder_traverse},
    {Py_tp_clear, builder_clear},
    {Py_tp_call, PyVectorcall_Call},
    {Py_tp_members, builder_members},
    {0, NULL},
};

#define BUILDER_FLAGS (Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_HAVE_VECTORCALL)

static PyType_Spec binary_spec = {
    "lazytensor.core._nodes.BinaryBuilder", sizeof(Builder), 0,
    /* a method descriptor: `a + b` calls it with a prepended, without binding a method object */
    BUILDER_FLAGS | Py_TPFLAGS_METHOD_DESCRIPTOR, binary_slots,
};

static PyType_Spec unary_spec = {
    "lazytensor.core._nodes.UnaryBuilder", sizeof(Builder), 0, BUILDER_FLAGS, unary_slots,
};

static PyMethodDef module_methods[] = {
    {"setup", setup, METH_VARARGS,
     "setup(Expr, Tensor, Const, Memory, RESULTS, broadcast_shapes, device_of, memory_of, constant)"},
    {"heavy_over_tensor", (PyCFunction)(void (*)(void))heavy_over_tensor, METH_FASTCALL,
     "heavy_over_tensor(op, x, shape, dtype, attrs): expr.heavy_over_tensor's node; None where the builders are off"},
    {"set_enabled", set_enabled, METH_O,
     "set_enabled(flag) -> the previous flag; off, every builder calls its Python builder"},
    {NULL},
};

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT, "lazytensor.core._nodes",
    "The node builders of lazytensor.core.expr for the cases seen before, in C.", -1, module_methods,
};

PyMODINIT_FUNC
PyInit__nodes(void)
{
    PyObject *m = PyModule_Create(&module_def);
    if (m == NULL)
        return NULL;
    zero = PyLong_FromLong(0);
    one = PyLong_FromLong(1);
    empty = PyTuple_New(0);
    sweep_name = PyUnicode_InternFromString("sweep");
    PyObject *binary = PyType_FromSpec(&binary_spec);
    PyObject *unary = PyType_FromSpec(&unary_spec);
    if (zero == NULL || one == NULL || empty == NULL || sweep_name == NULL || binary == NULL
        || unary == NULL || PyModule_AddObject(m, "BinaryBuilder", binary) < 0) {
        Py_XDECREF(binary);
        Py_XDECREF(unary);
        Py_DECREF(m);
        return NULL;
    }
    if (PyModule_AddObject(m, "UnaryBuilder", unary) < 0) {
        Py_DECREF(unary);
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
