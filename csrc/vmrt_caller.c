/* vmrt._cnative.Caller: a Python callable serving one C export whose cconv has
 * only scalar types (i, I, f, F; no refs, no spans). It is the fast path of
 * vmrt/native/cmodule.py: called straight from generated code, it converts the
 * Python arguments into the argument struct (layout rules in vmrt_native.h),
 * calls the export with the GIL released, and returns the results (None, one
 * value, or a tuple). A failing status raises the exception that the Python
 * callable |fail| builds from the status code (it reads the thread's message).
 *
 * Built with the limited API like the rest of the extension; the type is added
 * to the module by vmrt_caller_install(), which cmodule.py calls once. */
#define Py_LIMITED_API 0x03080000
#include <Python.h>

#include "vmrt_native_call.h"

#define VMRT_CALLER_MAX 16

typedef struct {
  PyObject_HEAD
  const vmrt_call_t* call; /* owned by |keep|; fn is NULL once released */
  PyObject* keep;
  PyObject* fail;
  int arg_count;
  int result_count;
  char arg_types[VMRT_CALLER_MAX];
  char result_types[VMRT_CALLER_MAX];
  uint16_t arg_offsets[VMRT_CALLER_MAX];
  uint16_t result_offsets[VMRT_CALLER_MAX];
  uint16_t args_size;
  uint16_t results_size;
} vmrt_caller_t;

/* Lays out a scalar fragment; returns the struct size or -1. */
static int vmrt_caller_layout(const char* types, int count, uint16_t* offsets) {
  int position = 0;
  int max_align = 4;
  for (int k = 0; k < count; ++k) {
    int size;
    switch (types[k]) {
      case 'i':
      case 'f':
        size = 4;
        break;
      case 'I':
      case 'F':
        size = 8;
        break;
      default:
        return -1;
    }
    position += -position & (size - 1);
    offsets[k] = (uint16_t)position;
    position += size;
    if (size > max_align) max_align = size;
  }
  if (position == 0) return 4; /* { int unused; } */
  position += -position & (max_align - 1);
  return position;
}

static PyObject* vmrt_caller_new(PyTypeObject* type, PyObject* args,
                                 PyObject* kwargs) {
  unsigned long long call;
  PyObject* keep;
  const char* arg_types;
  const char* result_types;
  PyObject* fail;
  (void)kwargs;
  if (!PyArg_ParseTuple(args, "KOssO", &call, &keep, &arg_types, &result_types,
                        &fail)) {
    return NULL;
  }
  size_t arg_count = strlen(arg_types);
  size_t result_count = strlen(result_types);
  if (arg_count > VMRT_CALLER_MAX || result_count > VMRT_CALLER_MAX) {
    PyErr_SetString(PyExc_ValueError, "too many arguments or results");
    return NULL;
  }
  allocfunc alloc = (allocfunc)PyType_GetSlot(type, Py_tp_alloc);
  vmrt_caller_t* self = (vmrt_caller_t*)alloc(type, 0);
  if (!self) return NULL;
  self->call = (const vmrt_call_t*)(uintptr_t)call;
  self->arg_count = (int)arg_count;
  self->result_count = (int)result_count;
  memcpy(self->arg_types, arg_types, arg_count);
  memcpy(self->result_types, result_types, result_count);
  int args_size = vmrt_caller_layout(arg_types, (int)arg_count, self->arg_offsets);
  int results_size =
      vmrt_caller_layout(result_types, (int)result_count, self->result_offsets);
  if (args_size < 0 || results_size < 0) {
    Py_DECREF(self);
    PyErr_SetString(PyExc_ValueError, "Caller takes only i, I, f and F");
    return NULL;
  }
  self->args_size = (uint16_t)args_size;
  self->results_size = (uint16_t)results_size;
  Py_INCREF(keep);
  self->keep = keep;
  Py_INCREF(fail);
  self->fail = fail;
  return (PyObject*)self;
}

static void vmrt_caller_dealloc(PyObject* object) {
  vmrt_caller_t* self = (vmrt_caller_t*)object;
  PyTypeObject* type = Py_TYPE(object);
  Py_XDECREF(self->fail);
  Py_XDECREF(self->keep);
  freefunc tp_free = (freefunc)PyType_GetSlot(type, Py_tp_free);
  tp_free(object);
  Py_DECREF(type);
}

static PyObject* vmrt_caller_value(char type, const char* at) {
  switch (type) {
    case 'i': {
      int32_t v;
      memcpy(&v, at, 4);
      return PyLong_FromLong(v);
    }
    case 'I': {
      int64_t v;
      memcpy(&v, at, 8);
      return PyLong_FromLongLong(v);
    }
    case 'f': {
      float v;
      memcpy(&v, at, 4);
      return PyFloat_FromDouble(v);
    }
    default: {
      double v;
      memcpy(&v, at, 8);
      return PyFloat_FromDouble(v);
    }
  }
}

static PyObject* vmrt_caller_call(PyObject* object, PyObject* args,
                                  PyObject* kwargs) {
  vmrt_caller_t* self = (vmrt_caller_t*)object;
  uint64_t arg_words[VMRT_CALLER_MAX + 1];
  uint64_t result_words[VMRT_CALLER_MAX + 1];
  char* arg_bytes = (char*)arg_words;
  char* result_bytes = (char*)result_words;
  if (kwargs && PyDict_Size(kwargs)) {
    PyErr_SetString(PyExc_TypeError, "C exports take positional arguments");
    return NULL;
  }
  if (PyTuple_Size(args) != self->arg_count) {
    PyErr_Format(PyExc_TypeError, "takes %d arguments, got %d", self->arg_count,
                 (int)PyTuple_Size(args));
    return NULL;
  }
  const vmrt_call_t* call = self->call;
  if (!call->fn) {
    /* The module's context was closed: its state is gone. */
    PyObject* error = PyObject_CallFunction(self->fail, "L", (long long)-1);
    if (!error) return NULL;
    PyObject* error_type = PyObject_Type(error);
    PyErr_SetObject(error_type, error);
    Py_DECREF(error_type);
    Py_DECREF(error);
    return NULL;
  }
  memset(arg_words, 0, self->args_size);
  memset(result_words, 0, self->results_size);
  for (int k = 0; k < self->arg_count; ++k) {
    PyObject* item = PyTuple_GetItem(args, k);
    char* at = arg_bytes + self->arg_offsets[k];
    switch (self->arg_types[k]) {
      case 'i': {
        long v = PyLong_AsLong(item);
        if (v == -1 && PyErr_Occurred()) return NULL;
        if (v < INT32_MIN || v > INT32_MAX) {
          PyErr_Format(PyExc_OverflowError, "argument %d: %ld does not fit in i32",
                       k, v);
          return NULL;
        }
        int32_t narrow = (int32_t)v;
        memcpy(at, &narrow, 4);
        break;
      }
      case 'I': {
        long long v = PyLong_AsLongLong(item);
        if (v == -1 && PyErr_Occurred()) return NULL;
        int64_t wide = (int64_t)v;
        memcpy(at, &wide, 8);
        break;
      }
      case 'f': {
        double v = PyFloat_AsDouble(item);
        if (v == -1.0 && PyErr_Occurred()) return NULL;
        float narrow = (float)v;
        memcpy(at, &narrow, 4);
        break;
      }
      default: {
        double v = PyFloat_AsDouble(item);
        if (v == -1.0 && PyErr_Occurred()) return NULL;
        memcpy(at, &v, 8);
        break;
      }
    }
  }
  vmrt_status_t status;
  Py_BEGIN_ALLOW_THREADS
  vmrt_status_message_buffer[0] = 0;
  status = call->fn(call->stack, call->module, call->state, arg_bytes,
                    result_bytes);
  Py_END_ALLOW_THREADS
  if (status) {
    long long code = (status > 0 && status < 256) ? (long long)status : VMRT_UNKNOWN;
    PyObject* error = PyObject_CallFunction(self->fail, "L", code);
    if (!error) return NULL;
    PyObject* error_type = PyObject_Type(error);
    PyErr_SetObject(error_type, error);
    Py_DECREF(error_type);
    Py_DECREF(error);
    return NULL;
  }
  if (self->result_count == 0) Py_RETURN_NONE;
  if (self->result_count == 1) {
    return vmrt_caller_value(self->result_types[0],
                             result_bytes + self->result_offsets[0]);
  }
  PyObject* tuple = PyTuple_New(self->result_count);
  if (!tuple) return NULL;
  for (int k = 0; k < self->result_count; ++k) {
    PyObject* value = vmrt_caller_value(self->result_types[k],
                                        result_bytes + self->result_offsets[k]);
    if (!value) {
      Py_DECREF(tuple);
      return NULL;
    }
    PyTuple_SetItem(tuple, k, value);
  }
  return tuple;
}

static PyType_Slot vmrt_caller_slots[] = {
    {Py_tp_new, (void*)vmrt_caller_new},
    {Py_tp_dealloc, (void*)vmrt_caller_dealloc},
    {Py_tp_call, (void*)vmrt_caller_call},
    {Py_tp_doc, (void*)"Caller(call_address, keep, arg_types, result_types, fail): "
                       "calls a scalar-only C export through a vmrt_call_t that "
                       "`keep` owns; fail(code) builds the exception (code -1: "
                       "the module was released)."},
    {0, NULL},
};

static PyType_Spec vmrt_caller_spec = {
    "vmrt._cnative.Caller",
    sizeof(vmrt_caller_t),
    0,
    Py_TPFLAGS_DEFAULT,
    vmrt_caller_slots,
};

int vmrt_caller_install(void) {
  PyGILState_STATE gil = PyGILState_Ensure();
  int result = -1;
  PyObject* type = PyType_FromSpec(&vmrt_caller_spec);
  PyObject* module = type ? PyImport_ImportModule("vmrt._cnative") : NULL;
  if (module && PyObject_SetAttrString(module, "Caller", type) == 0) result = 0;
  if (result) PyErr_Clear();
  Py_XDECREF(module);
  Py_XDECREF(type);
  PyGILState_Release(gil);
  return result;
}
