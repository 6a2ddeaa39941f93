/* A C extension module that records through waffle's C ABI (libwaffle.so), as an ML library
 * written in C might: its spans, the Python spans around them and the Python callbacks inside
 * them all belong to the one session of the process (tests/test_one_recorder.py). */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "waffle_macros.h"

/* work(n): a span "c_work" holding an event "c_done". */
static PyObject *work(PyObject *self, PyObject *args) {
  (void)self;
  long long n;
  if (!PyArg_ParseTuple(args, "L", &n)) return NULL;
  WAFFLE_SPAN("c_work", WAFFLE_KV_I64("n", n));
  WAFFLE_EVENT("c_done", WAFFLE_KV_I64("n", n));
  Py_RETURN_NONE;
}

/* call(f): f() inside a span "c_call". */
static PyObject *call(PyObject *self, PyObject *f) {
  (void)self;
  WAFFLE_SPAN("c_call");
  return PyObject_CallNoArgs(f);
}

static PyMethodDef methods[] = {
    {"work", work, METH_VARARGS, "A span with an event inside."},
    {"call", call, METH_O, "Calls its argument inside a span."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "waffle_cext", NULL, -1, methods,
                                    NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit_waffle_cext(void) { return PyModule_Create(&module); }
