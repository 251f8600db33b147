// Heap access ops: JanusPyGetAttr / JanusPySetAttr / JanusPyGetSubscr / JanusPySetSubscr.
//
// The general path for Python objects known only at run time (list elements inside a
// converted loop, tree nodes). Objects travel through the graph as int64 pointer tensors
// that are only ever resolved through the per-call store on the Python side
// (janus.ops.pyheap): a pointer the store did not hand out is an error, never a deref.
// Reads return the store's local copy when the call wrote one, else the heap value;
// writes go to the store only. The executor replays the store's writes after the whole
// graph succeeded (all-or-nothing).
//
// Every op takes and returns an int64 `token`, which the generator threads through them in
// program order, so gets and sets never race. The kernels take the GIL only while they
// call into Python.

#include <Python.h>

#include <cstring>
#include <map>
#include <string>

#include "tensorflow/core/framework/op.h"
#include "tensorflow/core/framework/op_kernel.h"
#include "tensorflow/core/framework/shape_inference.h"

namespace janus {

using tensorflow::DataType;
using tensorflow::DataTypeSize;
using tensorflow::DataTypeString;
using tensorflow::DEVICE_CPU;
using tensorflow::OpKernel;
using tensorflow::OpKernelConstruction;
using tensorflow::OpKernelContext;
using tensorflow::PartialTensorShape;
using tensorflow::Tensor;
using tensorflow::TensorShape;
using tensorflow::errors::FailedPrecondition;
using tensorflow::errors::Internal;

// janus_invoke.cc: the step's first error, which an invocation cancelled because of it reports.
void RecordStepError(OpKernelContext* ctx, const tensorflow::Status& status);

namespace {

// Formats the pending Python exception. A JanusAssumption exception (the value had
// another type or shape than the graph was specialised on) becomes the marker status
// the executor treats as "assumption broke"; anything else is an internal error.
tensorflow::Status PythonError(const std::string& what) {
  PyObject *type = nullptr, *value = nullptr, *traceback = nullptr;
  PyErr_Fetch(&type, &value, &traceback);
  std::string message = "unknown error";
  bool assumption = false;
  if (value != nullptr) {
    PyObject* text = PyObject_Str(value);
    if (text != nullptr) {
      const char* utf8 = PyUnicode_AsUTF8(text);
      if (utf8 != nullptr) message = utf8;
      Py_DECREF(text);
    }
    PyObject* id = PyObject_GetAttrString(value, "assumption_id");
    if (id != nullptr) {
      assumption = true;
      message = "JANUS_ASSUMPTION_FAILED:" + std::to_string(PyLong_AsLongLong(id)) + ": " + message;
      Py_DECREF(id);
    } else {
      PyErr_Clear();
    }
  }
  Py_XDECREF(type);
  Py_XDECREF(value);
  Py_XDECREF(traceback);
  if (assumption) return FailedPrecondition(message);
  return Internal(what, ": ", message);
}

// Holds the GIL on a TensorFlow pool thread. PyGILState_Ensure alone creates a Python thread
// state on a thread that has none and deletes it again on release, which cost most of a heap
// read (~20 us). The first acquisition on a thread therefore keeps its thread state for the
// thread's lifetime (the pool threads live as long as the process): later ones only take the GIL.
class GilHold {
 public:
  GilHold() {
    thread_local bool kept = false;
    if (!kept) {
      PyGILState_STATE first = PyGILState_Ensure();
      if (first == PyGILState_UNLOCKED) {
        PyEval_SaveThread();  // releases the GIL; the thread state stays registered for this thread
        kept = true;
      } else {
        PyGILState_Release(first);  // this thread already held the GIL: nothing to keep
      }
    }
    state_ = PyGILState_Ensure();
  }
  ~GilHold() { PyGILState_Release(state_); }
  GilHold(const GilHold&) = delete;
  GilHold& operator=(const GilHold&) = delete;

 private:
  PyGILState_STATE state_;
};

// Calls janus.ops.pyheap.<function>(*args) with the GIL held; steals the reference to `args`.
// The function objects are looked up once and kept (janus.ops.pyheap is never reloaded).
PyObject* CallPyheap(const char* function, PyObject* args) {
  static PyObject* module = nullptr;  // guarded by the GIL
  if (module == nullptr) module = PyImport_ImportModule("janus.ops.pyheap");
  if (module == nullptr || args == nullptr) {
    Py_XDECREF(args);
    return nullptr;
  }
  static std::map<std::string, PyObject*> functions;  // guarded by the GIL
  PyObject*& fn = functions[function];
  if (fn == nullptr) fn = PyObject_GetAttrString(module, function);
  if (fn == nullptr) {
    Py_DECREF(args);
    return nullptr;
  }
  PyObject* result = PyObject_CallObject(fn, args);
  Py_DECREF(args);
  return result;
}

// Writes a Python scalar (bool, int, float: objects arrive as int pointers) into a new scalar output.
tensorflow::Status ScalarOut(OpKernelContext* ctx, int index, PyObject* value, DataType dtype) {
  Tensor* out = nullptr;
  TF_RETURN_IF_ERROR(ctx->allocate_output(index, TensorShape({}), &out));
  if (dtype == tensorflow::DT_BOOL && PyBool_Check(value)) {
    out->scalar<bool>()() = value == Py_True;
  } else if (dtype == tensorflow::DT_INT64 && PyLong_Check(value) && !PyBool_Check(value)) {
    out->scalar<int64_t>()() = PyLong_AsLongLong(value);
  } else if (dtype == tensorflow::DT_DOUBLE && PyFloat_Check(value)) {
    out->scalar<double>()() = PyFloat_AsDouble(value);
  } else {
    return Internal("heap value of type ", Py_TYPE(value)->tp_name, " does not fit ", DataTypeString(dtype));
  }
  if (PyErr_Occurred()) return PythonError("converting the heap value");
  return tensorflow::OkStatus();
}

// Copies a C-contiguous buffer object (a numpy array) into a new output tensor.
tensorflow::Status CopyOut(OpKernelContext* ctx, int index, PyObject* array, DataType dtype,
                           const PartialTensorShape& expected) {
  PyObject* shape_obj = PyObject_GetAttrString(array, "shape");
  if (shape_obj == nullptr) return PythonError("reading the value's shape");
  TensorShape shape;
  Py_ssize_t rank = PyTuple_Size(shape_obj);
  for (Py_ssize_t i = 0; i < rank; ++i) {
    shape.AddDim(PyLong_AsLongLong(PyTuple_GetItem(shape_obj, i)));
  }
  Py_DECREF(shape_obj);
  if (!expected.IsCompatibleWith(shape)) {
    return Internal("heap value has shape ", shape.DebugString(), ", expected ", expected.DebugString());
  }
  Py_buffer view;
  if (PyObject_GetBuffer(array, &view, PyBUF_C_CONTIGUOUS) != 0) return PythonError("reading the value's buffer");
  Tensor* out = nullptr;
  tensorflow::Status status = ctx->allocate_output(index, shape, &out);
  if (status.ok()) {
    const size_t bytes = out->NumElements() * DataTypeSize(dtype);
    if (static_cast<size_t>(view.len) != bytes) {
      status = Internal("heap value has ", view.len, " bytes, expected ", bytes);
    } else if (bytes > 0) {
      std::memcpy(out->data(), view.buf, bytes);
    }
  }
  PyBuffer_Release(&view);
  return status;
}

// Hands a tensor's bytes to Python as (bytes, dtype enum, shape tuple).
PyObject* TensorToPython(const Tensor& t) {
  PyObject* shape = PyTuple_New(t.dims());
  for (int i = 0; i < t.dims(); ++i) PyTuple_SetItem(shape, i, PyLong_FromLongLong(t.dim_size(i)));
  auto data = t.tensor_data();
  PyObject* bytes = PyBytes_FromStringAndSize(data.data(), data.size());
  return Py_BuildValue("(NiN)", bytes, static_cast<int>(t.dtype()), shape);
}

void PassToken(OpKernelContext* ctx) { ctx->set_output(0, ctx->input(0)); }

}  // namespace

#define JANUS_HEAP_COMMON                                                                                 \
  Input("token: int64").Input("store: int64").Input("obj: int64").Output("token_out: int64").Attr("expect: int") \
      .SetIsStateful()

// Gets output (token, value) with the value's static shape from the `shape` attribute.
tensorflow::Status HeapGetShape(tensorflow::shape_inference::InferenceContext* c) {
  c->set_output(0, c->Scalar());
  PartialTensorShape shape;
  TF_RETURN_IF_ERROR(c->GetAttr("shape", &shape));
  tensorflow::shape_inference::ShapeHandle out;
  TF_RETURN_IF_ERROR(c->MakeShapeFromPartialTensorShape(shape, &out));
  c->set_output(1, out);
  return tensorflow::OkStatus();
}

// Sets output only the token.
tensorflow::Status HeapSetShape(tensorflow::shape_inference::InferenceContext* c) {
  c->set_output(0, c->Scalar());
  return tensorflow::OkStatus();
}

REGISTER_OP("JanusPyGetAttr")
    .JANUS_HEAP_COMMON.Attr("attr_name: string")
    .Attr("dtype: type")
    .Attr("shape: shape")
    .Output("value: dtype")
    .SetShapeFn(HeapGetShape);

REGISTER_OP("JanusPyGetSubscr")
    .JANUS_HEAP_COMMON.Input("key: int64")
    .Attr("dtype: type")
    .Attr("shape: shape")
    .Output("value: dtype")
    .SetShapeFn(HeapGetShape);

REGISTER_OP("JanusPySetAttr")
    .JANUS_HEAP_COMMON.Input("value: T")
    .Attr("attr_name: string")
    .Attr("T: type")
    .SetShapeFn(HeapSetShape);

REGISTER_OP("JanusPySetSubscr")
    .JANUS_HEAP_COMMON.Input("key: int64")
    .Input("value: T")
    .Attr("T: type")
    .SetShapeFn(HeapSetShape);

class HeapGetOp : public OpKernel {
 public:
  explicit HeapGetOp(OpKernelConstruction* ctx, bool subscript) : OpKernel(ctx), subscript_(subscript) {
    if (!subscript_) OP_REQUIRES_OK(ctx, ctx->GetAttr("attr_name", &name_));
    OP_REQUIRES_OK(ctx, ctx->GetAttr("expect", &expect_));
    OP_REQUIRES_OK(ctx, ctx->GetAttr("dtype", &dtype_));
    OP_REQUIRES_OK(ctx, ctx->GetAttr("shape", &shape_));
  }

  void Compute(OpKernelContext* ctx) override {
    const long long store = ctx->input(1).scalar<int64_t>()();
    const long long obj = ctx->input(2).scalar<int64_t>()();
    const long long key = subscript_ ? ctx->input(3).scalar<int64_t>()() : 0;
    tensorflow::Status status;
    {
      GilHold gil;
      PyObject* args = subscript_ ? Py_BuildValue("(LLLL)", store, obj, key, static_cast<long long>(expect_))
                                  : Py_BuildValue("(LLsL)", store, obj, name_.c_str(), static_cast<long long>(expect_));
      // Scalars (bool, int, float, object pointers) come back as Python numbers, tensors as arrays.
      PyObject* value = CallPyheap(subscript_ ? "get_item" : "get_attr", args);
      status = value == nullptr                                 ? PythonError("janus heap read")
               : PyFloat_Check(value) || PyLong_Check(value) ? ScalarOut(ctx, 1, value, dtype_)
                                                             : CopyOut(ctx, 1, value, dtype_, shape_);
      Py_XDECREF(value);
    }
    if (!status.ok()) RecordStepError(ctx, status);  // before the executor cancels the step's other nodes
    OP_REQUIRES_OK(ctx, status);
    PassToken(ctx);
  }

 private:
  bool subscript_;
  std::string name_;
  tensorflow::int64 expect_ = 0;
  DataType dtype_;
  PartialTensorShape shape_;
};

class HeapSetOp : public OpKernel {
 public:
  explicit HeapSetOp(OpKernelConstruction* ctx, bool subscript) : OpKernel(ctx), subscript_(subscript) {
    if (!subscript_) OP_REQUIRES_OK(ctx, ctx->GetAttr("attr_name", &name_));
    OP_REQUIRES_OK(ctx, ctx->GetAttr("expect", &expect_));
  }

  void Compute(OpKernelContext* ctx) override {
    const long long store = ctx->input(1).scalar<int64_t>()();
    const long long obj = ctx->input(2).scalar<int64_t>()();
    const Tensor& value = ctx->input(subscript_ ? 4 : 3);
    const long long key = subscript_ ? ctx->input(3).scalar<int64_t>()() : 0;
    tensorflow::Status status;
    {
      GilHold gil;
      PyObject* payload = TensorToPython(value);
      PyObject* args =
          subscript_ ? Py_BuildValue("(LLLNL)", store, obj, key, payload, static_cast<long long>(expect_))
                     : Py_BuildValue("(LLsNL)", store, obj, name_.c_str(), payload, static_cast<long long>(expect_));
      PyObject* result = CallPyheap(subscript_ ? "set_item" : "set_attr", args);
      status = result == nullptr ? PythonError("janus heap write") : tensorflow::OkStatus();
      Py_XDECREF(result);
    }
    if (!status.ok()) RecordStepError(ctx, status);  // before the executor cancels the step's other nodes
    OP_REQUIRES_OK(ctx, status);
    PassToken(ctx);
  }

 private:
  bool subscript_;
  std::string name_;
  tensorflow::int64 expect_ = 0;
};

class PyGetAttrOp : public HeapGetOp {
 public:
  explicit PyGetAttrOp(OpKernelConstruction* ctx) : HeapGetOp(ctx, false) {}
};
class PyGetSubscrOp : public HeapGetOp {
 public:
  explicit PyGetSubscrOp(OpKernelConstruction* ctx) : HeapGetOp(ctx, true) {}
};
class PySetAttrOp : public HeapSetOp {
 public:
  explicit PySetAttrOp(OpKernelConstruction* ctx) : HeapSetOp(ctx, false) {}
};
class PySetSubscrOp : public HeapSetOp {
 public:
  explicit PySetSubscrOp(OpKernelConstruction* ctx) : HeapSetOp(ctx, true) {}
};

REGISTER_KERNEL_BUILDER(Name("JanusPyGetAttr").Device(DEVICE_CPU), PyGetAttrOp);
REGISTER_KERNEL_BUILDER(Name("JanusPyGetSubscr").Device(DEVICE_CPU), PyGetSubscrOp);
REGISTER_KERNEL_BUILDER(Name("JanusPySetAttr").Device(DEVICE_CPU), PySetAttrOp);
REGISTER_KERNEL_BUILDER(Name("JanusPySetSubscr").Device(DEVICE_CPU), PySetSubscrOp);

}  // namespace janus
