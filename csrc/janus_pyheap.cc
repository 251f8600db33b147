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

#include <immintrin.h>

#include <cstring>
#include <map>
#include <mutex>
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
    queued_ = !PyGILState_Check();
    if (queued_) Queue().Lock();
    state_ = PyGILState_Ensure();
  }
  ~GilHold() {
    PyGILState_Release(state_);
    if (queued_) Queue().Unlock();
  }
  GilHold(const GilHold&) = delete;
  GilHold& operator=(const GilHold&) = delete;

 private:
  // TensorFlow's threads reading the heap at once queue here before the GIL: a heap read holds the
  // GIL for a microsecond or two, and a thread that finds it taken otherwise sleeps in the
  // interpreter's condition variable and is woken by a futex call (two system calls and a context
  // switch a contended read). A short spin, then a sleep, as a thread holding this lock may itself
  // wait for a Python thread that keeps the GIL. A thread that already holds the GIL skips it, so
  // no thread ever waits here while holding the GIL.
  class SpinThenBlock {
   public:
    void Lock() {
      for (int i = 0; i < kSpins; ++i) {
        if (mutex_.try_lock()) return;
        _mm_pause();
      }
      mutex_.lock();
    }
    void Unlock() { mutex_.unlock(); }

   private:
    static constexpr int kSpins = 1000;
    std::mutex mutex_;
  };
  static SpinThenBlock& Queue() {
    static SpinThenBlock* queue = new SpinThenBlock;  // never destroyed: pool threads outlive statics
    return *queue;
  }

  PyGILState_STATE state_;
  bool queued_ = false;
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

// janus.ops.pyheap's state that the heap reads' C path uses, looked up once with the GIL held
// (the module is never reloaded and rebinds none of these names).
struct HeapModule {
  PyObject* stores = nullptr;        // _stores: store id -> CallStore
  PyObject* expectations = nullptr;  // _expectations: expectation id -> Expectation
  PyObject* to_kernel = nullptr;     // _to_kernel(value, expectation, store)
  PyObject* objects_name = nullptr;  // "objects", interned
  PyObject* local_name = nullptr;    // "local", interned
};

// Looked up on the first read; where that fails, `stores` stays null and every read takes the
// Python path (which reports the failure).
HeapModule& Heap() {
  static HeapModule heap;  // guarded by the GIL
  static bool tried = false;
  if (tried) return heap;
  tried = true;
  PyObject* module = PyImport_ImportModule("janus.ops.pyheap");
  if (module == nullptr) {
    PyErr_Clear();
    return heap;
  }
  PyObject* stores = PyObject_GetAttrString(module, "_stores");
  heap.expectations = PyObject_GetAttrString(module, "_expectations");
  heap.to_kernel = PyObject_GetAttrString(module, "_to_kernel");
  heap.objects_name = PyUnicode_InternFromString("objects");
  heap.local_name = PyUnicode_InternFromString("local");
  Py_DECREF(module);
  const bool ok = stores != nullptr && PyDict_CheckExact(stores) && heap.expectations != nullptr &&
                  PyDict_CheckExact(heap.expectations) && heap.to_kernel != nullptr &&
                  heap.objects_name != nullptr && heap.local_name != nullptr;
  if (ok) {
    heap.stores = stores;
  } else {
    Py_XDECREF(stores);
    PyErr_Clear();
  }
  return heap;
}

// The object `pointer` that store `store_id` handed out, found only where the call has written
// nothing to the heap (the store's local copies are empty): a new reference, with the store
// (borrowed) in *store and its `objects` dictionary (a new reference) in *objects. Otherwise
// nullptr, holding nothing, with the error cleared. Needs the GIL and `heap.stores`.
PyObject* UnwrittenObject(const HeapModule& heap, long long store_id, long long pointer, PyObject** store,
                          PyObject** objects) {
  PyObject* id = PyLong_FromLongLong(store_id);
  *store = id == nullptr ? nullptr : PyDict_GetItemWithError(heap.stores, id);  // borrowed
  Py_XDECREF(id);
  *objects = *store == nullptr ? nullptr : PyObject_GetAttr(*store, heap.objects_name);
  PyObject* local = *store == nullptr ? nullptr : PyObject_GetAttr(*store, heap.local_name);
  PyObject* obj = nullptr;
  if (*objects != nullptr && local != nullptr && PyDict_Check(*objects) && PyDict_CheckExact(local) &&
      PyDict_GET_SIZE(local) == 0) {
    PyObject* key = PyLong_FromLongLong(pointer);
    obj = key == nullptr ? nullptr : PyDict_GetItemWithError(*objects, key);  // borrowed
    Py_XDECREF(key);
  }
  Py_XDECREF(local);
  if (obj == nullptr) {
    Py_XDECREF(*objects);
    *objects = nullptr;
    PyErr_Clear();
    return nullptr;
  }
  Py_INCREF(obj);
  return obj;
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
      if (subscript_ || !FastAttr(ctx, store, obj, &status)) {
        PyObject* args = subscript_ ? Py_BuildValue("(LLLL)", store, obj, key, static_cast<long long>(expect_))
                                    : Py_BuildValue("(LLsL)", store, obj, name_.c_str(), static_cast<long long>(expect_));
        status = ToOutput(ctx, CallPyheap(subscript_ ? "get_item" : "get_attr", args));
      }
    }
    if (!status.ok()) RecordStepError(ctx, status);  // before the executor cancels the step's other nodes
    OP_REQUIRES_OK(ctx, status);
    PassToken(ctx);
  }

 private:
  // What janus.ops.pyheap._to_kernel hands back (a new reference, or null with a Python error set)
  // written to the value output: scalars (bool, int, float, object pointers) as Python numbers,
  // tensors and optional numbers as arrays.
  tensorflow::Status ToOutput(OpKernelContext* ctx, PyObject* value) {
    tensorflow::Status status = value == nullptr                                 ? PythonError("janus heap read")
                                : PyFloat_Check(value) || PyLong_Check(value) ? ScalarOut(ctx, 1, value, dtype_)
                                                                              : CopyOut(ctx, 1, value, dtype_, shape_);
    Py_XDECREF(value);
    return status;
  }

  // The expectation's kind, class and optionality, read once (expectations are frozen and never
  // dropped or reused: janus.ops.pyheap.expect). Returns false where it cannot be read.
  bool LoadExpectation(PyObject* expectations) {
    if (expectation_ != nullptr) return true;
    PyObject* id = PyLong_FromLongLong(expect_);
    PyObject* expectation = id == nullptr ? nullptr : PyDict_GetItemWithError(expectations, id);  // borrowed
    Py_XDECREF(id);
    if (expectation == nullptr) return false;
    PyObject* kind = PyObject_GetAttrString(expectation, "kind");
    PyObject* cls = PyObject_GetAttrString(expectation, "cls");
    PyObject* optional = PyObject_GetAttrString(expectation, "optional");
    const char* kind_text = kind == nullptr ? nullptr : PyUnicode_AsUTF8(kind);
    bool ok = kind_text != nullptr && cls != nullptr && optional != nullptr;
    if (ok) {
      const std::string k = kind_text;
      kind_ = k == "object" ? kObject : k == "bool" ? kBool : k == "int" ? kInt : k == "float" ? kFloat : kOther;
      optional_ = optional == Py_True;
      cls_ = cls;
      Py_INCREF(cls_);
      Py_INCREF(expectation);
      expectation_ = expectation;
      name_object_ = PyUnicode_InternFromString(name_.c_str());
      ok = name_object_ != nullptr;
    }
    Py_XDECREF(kind);
    Py_XDECREF(cls);
    Py_XDECREF(optional);
    return ok;
  }

  // The read of janus.ops.pyheap.get_attr done in C where it is the common case: an attribute of an
  // object the store handed out, that the call has not written (the store's local copies are
  // empty) and that is not a list's __len__. The value is taken by getattr, as Python's path does;
  // an object of the expected class, a bool, an int within int64 or a float (None where optional)
  // is written here; any other value goes to pyheap._to_kernel, which checks and converts it as the
  // Python path does (raising the assumption for a value of another type). Returns false, having
  // done nothing, where the Python path must run.
  bool FastAttr(OpKernelContext* ctx, long long store_id, long long pointer, tensorflow::Status* status) {
    HeapModule& heap = Heap();
    if (heap.stores == nullptr || pointer == 0 || name_ == "__len__" || !LoadExpectation(heap.expectations)) {
      PyErr_Clear();
      return false;
    }
    PyObject* store = nullptr;
    PyObject* objects = nullptr;
    PyObject* obj = UnwrittenObject(heap, store_id, pointer, &store, &objects);
    if (obj == nullptr) return false;
    PyObject* value = PyObject_GetAttr(obj, name_object_);
    Py_DECREF(obj);
    if (value == nullptr) {
      Py_DECREF(objects);
      *status = PythonError("janus heap read");
      return true;
    }
    if (!WriteKnown(ctx, objects, value, status)) {
      *status = ToOutput(ctx, PyObject_CallFunctionObjArgs(heap.to_kernel, value, expectation_, store, nullptr));
    }
    Py_DECREF(value);
    Py_DECREF(objects);
    return true;
  }

  // Writes a value of the expected kind (see FastAttr); false, with nothing written, for any other.
  bool WriteKnown(OpKernelContext* ctx, PyObject* objects, PyObject* value, tensorflow::Status* status) {
    const bool none = value == Py_None;
    if (kind_ == kObject) {
      if (!(Py_TYPE(value) == reinterpret_cast<PyTypeObject*>(cls_) || (optional_ && none)) ||
          dtype_ != tensorflow::DT_INT64) {
        return false;
      }
      if (!none) {  // CallStore.pointer: the store keeps the object for the call
        PyObject* key = PyLong_FromVoidPtr(value);
        const int failed = key == nullptr ? -1 : PyDict_SetItem(objects, key, value);
        Py_XDECREF(key);
        if (failed != 0) {
          *status = PythonError("janus heap read");
          return true;
        }
      }
      *status = Out<int64_t>(ctx, false, none ? 0 : static_cast<int64_t>(reinterpret_cast<intptr_t>(value)));
      return true;
    }
    if (none && !optional_) return false;
    if (kind_ == kBool && (none || PyBool_Check(value)) && dtype_ == tensorflow::DT_BOOL) {
      *status = Out<bool>(ctx, !none, value == Py_True);
      return true;
    }
    if (kind_ == kInt && (none || PyLong_CheckExact(value)) && dtype_ == tensorflow::DT_INT64) {
      int overflow = 0;
      const long long number = none ? 0 : PyLong_AsLongLongAndOverflow(value, &overflow);
      if (overflow != 0 || (number == -1 && PyErr_Occurred())) {
        PyErr_Clear();
        return false;
      }
      *status = Out<int64_t>(ctx, !none, number);
      return true;
    }
    if (kind_ == kFloat && (none || PyFloat_CheckExact(value)) && dtype_ == tensorflow::DT_DOUBLE) {
      *status = Out<double>(ctx, !none, none ? 0.0 : PyFloat_AS_DOUBLE(value));
      return true;
    }
    return false;
  }

  // A scalar, or for an optional number [present, number] (None: [false, 0]), as pyheap._to_kernel.
  template <typename T>
  tensorflow::Status Out(OpKernelContext* ctx, bool present, T number) {
    const bool pair = optional_ && kind_ != kObject;
    const TensorShape shape = pair ? TensorShape({2}) : TensorShape({});
    if (pair && !shape_.IsCompatibleWith(shape)) {  // as CopyOut (ScalarOut checks no shape)
      return Internal("heap value has shape ", shape.DebugString(), ", expected ", shape_.DebugString());
    }
    Tensor* out = nullptr;
    TF_RETURN_IF_ERROR(ctx->allocate_output(1, shape, &out));
    auto flat = out->flat<T>();
    if (pair) {
      flat(0) = static_cast<T>(present);
      flat(1) = present ? number : static_cast<T>(0);
    } else {
      flat(0) = number;
    }
    return tensorflow::OkStatus();
  }

  enum Kind { kObject, kBool, kInt, kFloat, kOther };

  bool subscript_;
  std::string name_;
  tensorflow::int64 expect_ = 0;
  DataType dtype_;
  PartialTensorShape shape_;
  // Set once, with the GIL held (LoadExpectation); held for the process's lifetime (a kernel may be
  // destroyed without the GIL, at exit).
  PyObject* expectation_ = nullptr;
  PyObject* cls_ = nullptr;
  PyObject* name_object_ = nullptr;
  Kind kind_ = kOther;
  bool optional_ = false;
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

// The forward shortcut of janus_invoke.cc: a recursive function whose body begins by testing a bool
// attribute of its node (`if node.is_leaf:`) has the invocation read that attribute and run the
// branch itself, where the read is certain to give what JanusPyGetAttr would and to run none of the
// program's code.
struct BoolAttrRead {
  std::string name;
  long long expect = 0;
  int expectation = 0;              // 1: a bool, never None; -1: anything else (the op reads); 0: not yet looked up
  PyObject* name_object = nullptr;  // set once with the GIL held; held for the process's lifetime
};

BoolAttrRead* NewBoolAttrRead(const std::string& name, long long expect) {
  auto* read = new BoolAttrRead;
  read->name = name;
  read->expect = expect;
  return read;
}

void DeleteBoolAttrRead(BoolAttrRead* read) { delete read; }

// What JanusPyGetAttr (dtype bool, a scalar, expectation `read->expect`) outputs for attribute
// `read->name` of the object `pointer` of store `store_id`, in its C path's common case: the store
// handed the object out, the call wrote nothing (the store's local copies are empty), and the value
// is True or False. Only an attribute held in the instance's own dictionary is read (the class
// neither defines the name nor customises attribute lookup), so the read runs no property, no
// `__getattr__`, nothing of the program's. Returns false, having changed nothing, where the op
// must read.
bool ReadBoolAttr(BoolAttrRead* read, long long store_id, long long pointer, bool* value) {
  if (read->expectation < 0 || pointer == 0 || read->name == "__len__") return false;
  GilHold gil;
  HeapModule& heap = Heap();
  if (heap.stores == nullptr) {
    PyErr_Clear();
    return false;
  }
  if (read->expectation == 0) {
    PyObject* id = PyLong_FromLongLong(read->expect);
    PyObject* expectation = id == nullptr ? nullptr : PyDict_GetItemWithError(heap.expectations, id);  // borrowed
    Py_XDECREF(id);
    PyObject* kind = expectation == nullptr ? nullptr : PyObject_GetAttrString(expectation, "kind");
    PyObject* optional = expectation == nullptr ? nullptr : PyObject_GetAttrString(expectation, "optional");
    const char* kind_text = kind == nullptr ? nullptr : PyUnicode_AsUTF8(kind);
    const bool plain_bool = kind_text != nullptr && std::strcmp(kind_text, "bool") == 0 && optional == Py_False;
    Py_XDECREF(kind);
    Py_XDECREF(optional);
    PyErr_Clear();
    if (plain_bool) read->name_object = PyUnicode_InternFromString(read->name.c_str());
    read->expectation = plain_bool && read->name_object != nullptr ? 1 : -1;
    PyErr_Clear();
    if (read->expectation < 0) return false;
  }
  PyObject* store = nullptr;
  PyObject* objects = nullptr;
  PyObject* obj = UnwrittenObject(heap, store_id, pointer, &store, &objects);
  bool known = false;
  if (obj != nullptr) {
    PyTypeObject* type = Py_TYPE(obj);
    if (type->tp_getattro == PyObject_GenericGetAttr && _PyType_Lookup(type, read->name_object) == nullptr) {
      PyObject* attr = PyObject_GetAttr(obj, read->name_object);
      known = attr == Py_True || attr == Py_False;
      if (known) *value = attr == Py_True;
      Py_XDECREF(attr);
    }
    Py_DECREF(obj);
  }
  Py_XDECREF(objects);
  PyErr_Clear();
  return known;
}

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
