/* vmrt._cnative.aligned_bytearray(size, alignment) -> (memoryview, address): `size`
 * zero bytes starting at an `alignment` boundary of a new bytearray, as a
 * memoryview slice, and their address. The C path of _aligned_bytearray in
 * vmrt/hal/buffer.py, whose Python twin reads the address through ctypes (a
 * call allocates a buffer or three: the address lookup was a good part of each).
 *
 * Built with the limited API like the rest of the extension; the function is
 * added to the module by vmrt_aligned_install(), which buffer.py calls once. */
#define Py_LIMITED_API 0x03080000
#include <Python.h>

#include <stdint.h>
#include <string.h>

static PyObject* vmrt_aligned_bytearray(PyObject* self, PyObject* args) {
  Py_ssize_t size, alignment;
  (void)self;
  if (!PyArg_ParseTuple(args, "nn", &size, &alignment)) return NULL;
  if (size < 0 || alignment <= 0 || (alignment & (alignment - 1)) != 0 ||
      size > PY_SSIZE_T_MAX - alignment) {
    PyErr_SetString(PyExc_ValueError, "aligned_bytearray: bad size or alignment");
    return NULL;
  }
  PyObject* data = PyByteArray_FromStringAndSize(NULL, size + alignment);
  if (!data) return NULL;
  char* bytes = PyByteArray_AsString(data);
  memset(bytes, 0, (size_t)(size + alignment));
  uintptr_t base = (uintptr_t)bytes;
  Py_ssize_t offset = (Py_ssize_t)((0 - base) & (uintptr_t)(alignment - 1)); /* unsigned */
  PyObject* whole = PyMemoryView_FromObject(data);
  Py_DECREF(data);
  if (!whole) return NULL;
  PyObject* start = PyLong_FromSsize_t(offset);
  PyObject* stop = PyLong_FromSsize_t(offset + size);
  PyObject* range = start && stop ? PySlice_New(start, stop, NULL) : NULL;
  Py_XDECREF(start);
  Py_XDECREF(stop);
  PyObject* view = range ? PyObject_GetItem(whole, range) : NULL;
  Py_XDECREF(range);
  Py_DECREF(whole);
  if (!view) return NULL;
  PyObject* address = PyLong_FromUnsignedLongLong((unsigned long long)(base + offset));
  if (!address) {
    Py_DECREF(view);
    return NULL;
  }
  PyObject* result = PyTuple_New(2);
  if (!result) {
    Py_DECREF(view);
    Py_DECREF(address);
    return NULL;
  }
  PyTuple_SetItem(result, 0, view);
  PyTuple_SetItem(result, 1, address);
  return result;
}

static PyMethodDef vmrt_aligned_def = {
    "aligned_bytearray", vmrt_aligned_bytearray, METH_VARARGS,
    "aligned_bytearray(size, alignment) -> (memoryview of `size` zero bytes at an "
    "`alignment` boundary of a new bytearray, their address)"};

int vmrt_aligned_install(void) {
  PyGILState_STATE gil = PyGILState_Ensure();
  int result = -1;
  PyObject* module = PyImport_ImportModule("vmrt._cnative");
  PyObject* function = module ? PyCFunction_NewEx(&vmrt_aligned_def, NULL, NULL) : NULL;
  if (function && PyObject_SetAttrString(module, "aligned_bytearray", function) == 0) {
    result = 0;
  }
  if (result) PyErr_Clear();
  Py_XDECREF(function);
  Py_XDECREF(module);
  PyGILState_Release(gil);
  return result;
}
