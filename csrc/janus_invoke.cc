// JanusInvoke / JanusInvokeGrad: call a function of the graph's function library by name.
//
// TensorFlow's own call ops are inlined or specialised at instantiation, which cannot
// terminate for a function that calls itself. JanusInvoke names its function in a `func`
// attribute (so the function stays reachable from the caller's library) and instantiates
// and runs it through the function library runtime when the kernel runs: a recursive user
// function becomes a graph function whose body invokes itself.
//
// Both kernels are asynchronous. The callee runs under TF's single-threaded executor, inline on
// the invoking thread (see "Single-threaded recursion" below: a recursion is C++ recursion, and
// independent recursions invoked from an ordinary graph run in parallel). Where that executor
// refuses a callee, or the op's `single_threaded` attribute is false, the callee's default executor schedules
// its nodes on the inter-op pool and completion arrives by callback: no C++ stack per level, and
// independent invocations (the two subtrees of a node) run in parallel.
//
// Gradients (janus/graphgen/recursion.py): the forward function returns its outputs followed
// by the intermediates its backward function needs. JanusInvoke emits the outputs and packs
// the intermediates into a `JanusFrame` variant, one per invocation, so parallel
// invocations never share cached values. JanusInvokeGrad unpacks a frame and calls the
// backward function with (output gradients..., intermediates...). Nested invocations'
// frames are themselves intermediates of their caller, so the backward pass walks the
// same tree of invocations.
//
// Depth: JanusInvoke's first input is the invocations left; the callee gets one fewer as its own
// first argument, and none left fails the step as the `depth_assumption` attribute's assumption
// broke (janus/graphgen/recursion.py: the call then runs in Python, which raises RecursionError).

#include <pthread.h>

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "tensorflow/core/framework/function.h"
#include "tensorflow/core/framework/op.h"
#include "tensorflow/core/framework/op_kernel.h"
#include "tensorflow/core/framework/resource_mgr.h"
#include "tensorflow/core/framework/shape_inference.h"
#include "tensorflow/core/framework/tensor.h"
#include "tensorflow/core/framework/variant.h"
#include "tensorflow/core/framework/variant_encode_decode.h"
#include "tensorflow/core/framework/variant_op_registry.h"
#include "tensorflow/core/framework/variant_tensor_data.h"
#include "tensorflow/core/platform/mutex.h"
#include "tensorflow/core/platform/threadpool.h"
#include "tsl/platform/cpu_info.h"
#include "xla/tsl/platform/env.h"
#include "xla/tsl/platform/status.h"

namespace janus {

using tensorflow::AsyncOpKernel;
using tensorflow::AttrSlice;
using tensorflow::DataTypeVector;
using tensorflow::DEVICE_CPU;
using tensorflow::FunctionLibraryRuntime;
using tensorflow::NameAttrList;
using tensorflow::OpKernelConstruction;
using tensorflow::OpKernelContext;
using tensorflow::PartialTensorShape;
using tensorflow::Tensor;
using tensorflow::TensorShape;
using tensorflow::Variant;
using tensorflow::VariantTensorData;

// janus_pyheap.cc: a recursive body's leading read of a bool attribute of its node, done by the
// invocation (the forward shortcut below).
struct BoolAttrRead;
BoolAttrRead* NewBoolAttrRead(const std::string& name, long long expect);
void DeleteBoolAttrRead(BoolAttrRead* read);
bool ReadBoolAttr(BoolAttrRead* read, long long store_id, long long pointer, bool* value);

// The intermediates one invocation saved for its backward pass.
struct JanusFrame {
  std::vector<Tensor> tensors;

  std::string TypeName() const { return "JanusFrame"; }
  void Encode(VariantTensorData* data) const {
    for (const Tensor& t : tensors) *data->add_tensors() = t;
  }
  bool Decode(const VariantTensorData& data) {
    tensors = data.tensors();
    return true;
  }
  std::string DebugString() const { return "JanusFrame(" + std::to_string(tensors.size()) + " tensors)"; }
};

namespace {

// TF's gradient machinery treats variant outputs as differentiable: it may build zeros or sums of
// "gradients" of a frame. Those are never used (a frame's gradient is ignored), but must exist.
tensorflow::Status FrameZerosLike(OpKernelContext*, const JanusFrame&, JanusFrame* out) {
  *out = JanusFrame();
  return tensorflow::OkStatus();
}

tensorflow::Status FrameAdd(OpKernelContext*, const JanusFrame&, const JanusFrame&, JanusFrame* out) {
  *out = JanusFrame();
  return tensorflow::OkStatus();
}


tensorflow::Status SetOutputShapes(tensorflow::shape_inference::InferenceContext* c, int first) {
  std::vector<PartialTensorShape> shapes;
  TF_RETURN_IF_ERROR(c->GetAttr("output_shapes", &shapes));
  if (static_cast<int>(shapes.size()) + first > c->num_outputs()) {
    return tensorflow::errors::InvalidArgument("more output_shapes than outputs");
  }
  for (int i = 0; i < c->num_outputs(); ++i) {
    if (i - first >= 0 && i - first < static_cast<int>(shapes.size())) {
      tensorflow::shape_inference::ShapeHandle handle;
      TF_RETURN_IF_ERROR(c->MakeShapeFromPartialTensorShape(shapes[i - first], &handle));
      c->set_output(i, handle);
    } else {
      c->set_output(i, c->Scalar());
    }
  }
  return tensorflow::OkStatus();
}

// The first error of a step that a janus op saw (a JanusAssert's failure, an invocation's callee
// error), kept in the step's container: it lives as long as the step, shared by every function
// the step runs (invocations pass the step container on).
class StepError : public tensorflow::ResourceBase {
 public:
  std::string DebugString() const override { return "JanusStepError"; }
  void Record(const tensorflow::Status& status) {
    tensorflow::mutex_lock lock(mu_);
    if (first_.ok()) first_ = status;
  }
  tensorflow::Status First() {
    tensorflow::mutex_lock lock(mu_);
    return first_;
  }

 private:
  tensorflow::mutex mu_;
  tensorflow::Status first_ TF_GUARDED_BY(mu_);
};

constexpr char kStepError[] = "janus_step_error";

// Single-threaded recursion. TF's default executor spends about a microsecond of CPU on every
// node it runs and several on every function it calls (scheduling, pending counts, a call frame),
// which for a tree node's small arithmetic is most of the node's cost. TF's
// SINGLE_THREADED_EXECUTOR runs a function's kernels in order on the calling thread, with none of
// that. janus instantiates its recursive functions under it: an invocation runs its callee inline,
// on the invoking thread, and so does every `If` of the bodies (TF instantiates a branch with its
// caller's executor type). A recursion is then plain C++ recursion on one thread (about 7 KB of
// stack a level, forward); independent recursions (the trees of a batch), invoked from an
// ordinary graph, still run in parallel on the inter-op threads. Where a thread's stack runs low,
// the callee continues on a thread of janus's own pool, whose stacks are large. A callee that
// executor refuses (TF refuses low-level control flow, send/recv and collectives) runs as before,
// and so does every callee of an op whose `single_threaded` attribute is false
// (janus.config.single_threaded_recursion, an ablation switch).
constexpr char kSingleThreaded[] = "SINGLE_THREADED_EXECUTOR";
constexpr size_t kPoolStackBytes = size_t{1} << 30;  // address space only: pages are touched as used
constexpr size_t kStackMargin = size_t{1} << 20;     // left free below an invocation that runs inline

thread_local bool on_recursion_pool = false;

tsl::thread::ThreadPool* RecursionPool() {
  static tsl::thread::ThreadPool* pool = [] {
    tsl::ThreadOptions options;
    options.stack_size = kPoolStackBytes;
    return new tsl::thread::ThreadPool(tsl::Env::Default(), options, "janus_recursion",
                                       std::max(1, tsl::port::MaxParallelism()));
  }();
  return pool;
}

// Bytes of stack this thread has left below the caller's frame (0 where pthread cannot say).
size_t StackLeft() {
#if defined(__linux__)
  thread_local const char* lowest = [] {
    pthread_attr_t attr;
    void* address = nullptr;
    size_t size = 0;
    if (pthread_getattr_np(pthread_self(), &attr) != 0) return static_cast<const char*>(nullptr);
    const bool known = pthread_attr_getstack(&attr, &address, &size) == 0;
    pthread_attr_destroy(&attr);
    return known ? static_cast<const char*>(address) : nullptr;
  }();
  const char here = 0;
  return lowest != nullptr && &here > lowest ? static_cast<size_t>(&here - lowest) : 0;
#else
  return 0;
#endif
}

std::function<void(std::function<void()>)>* InlineRunner() {
  static auto* runner = new std::function<void(std::function<void()>)>([](std::function<void()> f) { f(); });
  return runner;
}

// Where a thread's stack bounds are known (Linux): elsewhere the callee runs as before.
constexpr bool kSingleThreadedSupported =
#if defined(__linux__)
    true;
#else
    false;
#endif

}  // namespace

// Defined here, declared in janus_assert.cc: a failing JanusAssert records its status before its
// executor cancels the step, so no invocation can see the cancellation first.
void RecordStepError(OpKernelContext* ctx, const tensorflow::Status& status) {
  tensorflow::ScopedStepContainer* step = ctx->step_container();
  tensorflow::ResourceMgr* resources = ctx->resource_manager();
  if (step == nullptr || resources == nullptr) return;
  StepError* error = nullptr;
  auto create = [](StepError** made) {
    *made = new StepError;
    return tensorflow::OkStatus();
  };
  if (!step->LookupOrCreate<StepError>(resources, kStepError, &error, create).ok()) return;
  error->Record(status);
  error->Unref();
}

namespace {

tensorflow::Status FirstStepError(OpKernelContext* ctx) {
  tensorflow::ScopedStepContainer* step = ctx->step_container();
  tensorflow::ResourceMgr* resources = ctx->resource_manager();
  StepError* error = nullptr;
  if (step == nullptr || resources == nullptr || !step->Lookup<StepError>(resources, kStepError, &error).ok()) {
    return tensorflow::OkStatus();
  }
  tensorflow::Status first = error->First();
  error->Unref();
  return first;
}

// An invocation cancelled because another node of the step failed (a sibling invocation's
// JanusAssert) reports that node's error, recorded for the step, where there is one: otherwise the
// executor above could take the cancellation, if it arrives first, as the step's error, and the
// program would see CancelledError instead of eager's exception. Without a record the status is
// marked derived, as TF's executor marks its own nodes'. Any other error is recorded; a failed
// assumption is passed up as its first line only: each level's executor adds its node to the
// message, which then grew with the depth (a failure 700 levels down logged thousands of lines).
tensorflow::Status Derived(OpKernelContext* ctx, const tensorflow::Status& status) {
  tensorflow::CancellationManager* cm = ctx->cancellation_manager();
  if (cm != nullptr && cm->IsCancelled() && (absl::IsCancelled(status) || absl::IsAborted(status))) {
    tensorflow::Status first = FirstStepError(ctx);
    if (!first.ok()) return first;
    return tsl::StatusGroup::IsDerived(status) ? status : tsl::StatusGroup::MakeDerived(status);
  }
  if (tsl::StatusGroup::IsDerived(status)) return status;
  RecordStepError(ctx, status);
  absl::string_view message = status.message();
  if (absl::StartsWith(message, "JANUS_ASSUMPTION_FAILED:")) {
    return tensorflow::Status(status.code(), message.substr(0, message.find('\n')));
  }
  return status;
}

// Runs the callee with the kernel's own step resources (rendezvous, cancellation, runner).
// A callee that is one `If` returning its outputs runs its branch directly: the invocation picks
// the branch itself, which saves a function run and an executor run per invocation. The `If`'s
// predicate is either one of the callee's arguments (a recursive function's backward: TF's
// gradient of the body's `if`) or, forward, a bool attribute of the node the callee reads first
// (`if node.is_leaf:`: a `JanusPyGetAttr` on the callee's store and node arguments, its token a
// constant), which the invocation then reads itself where that read is certain
// (janus_pyheap.cc's ReadBoolAttr); the callee may return that predicate too (the backward needs
// it). Found from the callee's definition when it is instantiated; a predicate other than a bool
// scalar, a read that is not certain, or a callee of any other form takes the plain call.
struct IfShortcut {
  static constexpr int kPredicate = -1;  // in `rets`: the callee returns the predicate it read
  int cond = -1;                         // the callee's argument that is the predicate (-1: read)
  int read_store = -1;                   // where the predicate is read: the callee's store argument
  int read_object = -1;                  // and its node argument
  std::unique_ptr<BoolAttrRead, void (*)(BoolAttrRead*)> read{nullptr, DeleteBoolAttrRead};
  std::vector<int> args;  // branch argument i = callee argument args[i]
  std::vector<int> rets;  // callee output j = branch output rets[j], or the predicate
  FunctionLibraryRuntime::Handle then_handle = tensorflow::kInvalidHandle;
  FunctionLibraryRuntime::Handle else_handle = tensorflow::kInvalidHandle;
};

// The node of `fdef` named `name` (nullptr: none).
const tensorflow::NodeDef* NodeNamed(const tensorflow::FunctionDef& fdef, absl::string_view name) {
  for (const tensorflow::NodeDef& node : fdef.node_def()) {
    if (node.name() == name) return &node;
  }
  return nullptr;
}

// Whether `read` is the forward shortcut's heap read: a scalar bool JanusPyGetAttr whose token is
// a constant of `fdef` and whose store and node are arguments (their indices set in `shortcut`).
bool MatchRead(const tensorflow::FunctionDef& fdef, const tensorflow::NodeDef& read,
               const std::map<std::string, int>& arg_index, IfShortcut* shortcut) {
  if (read.op() != "JanusPyGetAttr" || read.input_size() != 3) return false;
  const auto dtype = read.attr().find("dtype");
  const auto shape = read.attr().find("shape");
  const auto name = read.attr().find("attr_name");
  const auto expect = read.attr().find("expect");
  if (dtype == read.attr().end() || dtype->second.type() != tensorflow::DT_BOOL || shape == read.attr().end() ||
      shape->second.shape().unknown_rank() || shape->second.shape().dim_size() != 0 || name == read.attr().end() ||
      expect == read.attr().end()) {
    return false;
  }
  const std::string token_suffix = ":output:0";
  const std::string& token = read.input(0);
  if (!absl::EndsWith(token, token_suffix)) return false;
  const tensorflow::NodeDef* constant = NodeNamed(fdef, absl::string_view(token).substr(0, token.size() - token_suffix.size()));
  if (constant == nullptr || constant->op() != "Const" || constant->input_size() != 0) return false;
  const auto store = arg_index.find(read.input(1));
  const auto object = arg_index.find(read.input(2));
  if (store == arg_index.end() || object == arg_index.end()) return false;
  shortcut->read_store = store->second;
  shortcut->read_object = object->second;
  shortcut->read.reset(NewBoolAttrRead(name->second.s(), expect->second.i()));
  return true;
}

// Reads `fdef` as the shortcut's form; false, with `shortcut` partly filled, where it is not.
bool MatchIf(const tensorflow::FunctionDef& fdef, IfShortcut* shortcut, NameAttrList* then_f, NameAttrList* else_f) {
  const tensorflow::NodeDef* found_if = nullptr;
  for (const tensorflow::NodeDef& node : fdef.node_def()) {
    if (node.op() == "If" || node.op() == "StatelessIf") {
      if (found_if != nullptr) return false;
      found_if = &node;
    }
  }
  if (found_if == nullptr) return false;
  const tensorflow::NodeDef& node = *found_if;
  const auto tcond = node.attr().find("Tcond");
  const auto then_attr = node.attr().find("then_branch");
  const auto else_attr = node.attr().find("else_branch");
  if (tcond == node.attr().end() || tcond->second.type() != tensorflow::DT_BOOL || then_attr == node.attr().end() ||
      else_attr == node.attr().end() || node.input_size() < 1) {
    return false;
  }
  std::map<std::string, int> arg_index;
  for (int i = 0; i < fdef.signature().input_arg_size(); ++i) arg_index[fdef.signature().input_arg(i).name()] = i;
  for (int i = 1; i < node.input_size(); ++i) {
    const auto found = arg_index.find(node.input(i));  // an argument is named bare; anything else is not one
    if (found == arg_index.end()) return false;
    shortcut->args.push_back(found->second);
  }
  // The predicate: an argument (the callee is the `If` alone), or the heap read (the callee is the
  // `If`, the read and the read's token).
  const tensorflow::NodeDef* read = nullptr;
  const auto cond_arg = arg_index.find(node.input(0));
  if (cond_arg != arg_index.end()) {
    if (fdef.node_def_size() != 1) return false;
    shortcut->cond = cond_arg->second;
  } else {
    const std::string value_suffix = ":value:0";
    const std::string& cond = node.input(0);
    if (fdef.node_def_size() != 3 || !absl::EndsWith(cond, value_suffix)) return false;
    read = NodeNamed(fdef, absl::string_view(cond).substr(0, cond.size() - value_suffix.size()));
    if (read == nullptr || !MatchRead(fdef, *read, arg_index, shortcut)) return false;
  }
  for (const auto& control : fdef.control_ret()) {  // they run either way: the If, and the read
    if (control.second != node.name() && (read == nullptr || control.second != read->name())) return false;
  }
  const std::string prefix = node.name() + ":output:";
  for (const auto& output : fdef.signature().output_arg()) {
    const auto ret = fdef.ret().find(output.name());
    if (ret == fdef.ret().end()) return false;
    if (read != nullptr && ret->second == read->name() + ":value:0") {
      shortcut->rets.push_back(IfShortcut::kPredicate);
      continue;
    }
    if (!absl::StartsWith(ret->second, prefix)) return false;
    int index = 0;
    if (!absl::SimpleAtoi(absl::string_view(ret->second).substr(prefix.size()), &index) || index < 0) return false;
    shortcut->rets.push_back(index);
  }
  *then_f = then_attr->second.func();
  *else_f = else_attr->second.func();
  return true;
}

class InvokeBase : public AsyncOpKernel {
 public:
  explicit InvokeBase(OpKernelConstruction* ctx) : AsyncOpKernel(ctx) {
    OP_REQUIRES_OK(ctx, ctx->GetAttr("f", &func_));
    OP_REQUIRES_OK(ctx, ctx->GetAttr("single_threaded", &single_threaded_));
    single_threaded_ = single_threaded_ && kSingleThreadedSupported;
  }

 protected:
  // The status where neither this thread nor janus's pool has stack left for the callee.
  virtual tensorflow::Status OutOfStack() const = 0;

  void Run(OpKernelContext* ctx, std::vector<Tensor> args, int num_outputs, bool pack_frame, DoneCallback done) {
    // A step cancelled (a sibling failed, an interrupt) stops at its next invocation: TF's
    // single-threaded executor itself runs a function to its end.
    tensorflow::CancellationManager* cancellation = ctx->cancellation_manager();
    if (cancellation != nullptr && cancellation->IsCancelled()) {
      ctx->SetStatus(Derived(ctx, tensorflow::errors::Cancelled("JanusInvoke: the step was cancelled")));
      done();
      return;
    }
    bool single_threaded = single_threaded_;
    FunctionLibraryRuntime::Handle handle;
    const IfShortcut* shortcut = nullptr;
    OP_REQUIRES_OK_ASYNC(ctx, Handle(ctx, &single_threaded, &handle, &shortcut), done);
    FunctionLibraryRuntime::Options opts;
    opts.rendezvous = ctx->rendezvous();
    opts.cancellation_manager = ctx->cancellation_manager();
    opts.step_container = ctx->step_container();
    opts.stats_collector = ctx->stats_collector();
    opts.collective_executor = ctx->collective_executor();
    if (single_threaded) {
      opts.runner = InlineRunner();
      opts.run_all_kernels_inline = true;  // TF's While then loops without a callback an iteration
    } else {
      opts.runner = ctx->runner();
      opts.run_all_kernels_inline = ctx->run_all_kernels_inline();
    }
    auto* rets = new std::vector<Tensor>;
    FunctionLibraryRuntime::DoneCallback finish = [ctx, rets, num_outputs, pack_frame, done,
                                                   name = func_.name()](const tensorflow::Status& status) {
      std::unique_ptr<std::vector<Tensor>> owned(rets);
      if (!status.ok()) {
        ctx->SetStatus(Derived(ctx, status));
      } else if (static_cast<int>(rets->size()) < num_outputs) {
        ctx->SetStatus(tensorflow::errors::Internal("JanusInvoke: ", name, " returned ", rets->size(),
                                                    " values, expected at least ", num_outputs));
      } else {
        for (int i = 0; i < num_outputs; ++i) ctx->set_output(i, (*rets)[i]);
        if (pack_frame) {
          JanusFrame frame;
          frame.tensors.assign(rets->begin() + num_outputs, rets->end());
          Tensor packed(tensorflow::DT_VARIANT, TensorShape({}));
          packed.scalar<Variant>()() = std::move(frame);
          ctx->set_output(num_outputs, packed);
        }
      }
      done();
    };
    bool predicate = false;
    if (shortcut != nullptr && Predicate(*shortcut, args, &predicate)) {
      handle = predicate ? shortcut->then_handle : shortcut->else_handle;
      std::vector<Tensor> branch_args;
      branch_args.reserve(shortcut->args.size());
      for (int i : shortcut->args) branch_args.push_back(args[i]);
      args = std::move(branch_args);
      auto* branch_rets = new std::vector<Tensor>;
      finish = [rets, branch_rets, predicate, picks = shortcut->rets,
                finish = std::move(finish)](const tensorflow::Status& status) {
        std::unique_ptr<std::vector<Tensor>> owned(branch_rets);
        tensorflow::Status picked = status;
        if (picked.ok()) {
          rets->reserve(picks.size());
          for (int k : picks) {
            if (k == IfShortcut::kPredicate) {
              Tensor read(tensorflow::DT_BOOL, TensorShape({}));
              read.scalar<bool>()() = predicate;
              rets->push_back(std::move(read));
              continue;
            }
            if (k >= static_cast<int>(branch_rets->size())) {
              picked = tensorflow::errors::Internal("JanusInvoke: a branch returned ", branch_rets->size(), " values");
              break;
            }
            rets->push_back(std::move((*branch_rets)[k]));
          }
        }
        finish(picked);
      };
      rets = branch_rets;
    }
    FunctionLibraryRuntime* lib = ctx->function_library();
    if (!single_threaded || StackLeft() > kStackMargin) {
      lib->Run(opts, handle, args, rets, std::move(finish));
    } else if (!on_recursion_pool) {
      RecursionPool()->Schedule([lib, opts, handle, args = std::move(args), rets, finish = std::move(finish)]() mutable {
        on_recursion_pool = true;
        lib->Run(opts, handle, args, rets, std::move(finish));
      });
    } else {
      finish(OutOfStack());  // records the step's error and sets it, as a callee's failure
    }
  }

 private:
  using Key = std::pair<FunctionLibraryRuntime*, bool>;

  // The shortcut's predicate for a call with `args`: the argument, or the node's attribute where
  // its read is certain. False where the call must run the callee whole.
  static bool Predicate(const IfShortcut& shortcut, const std::vector<Tensor>& args, bool* predicate) {
    const int n = static_cast<int>(args.size());
    auto scalar = [&](int i, tensorflow::DataType dtype) {
      return i >= 0 && i < n && args[i].dtype() == dtype && args[i].NumElements() == 1;
    };
    if (shortcut.read == nullptr) {
      if (!scalar(shortcut.cond, tensorflow::DT_BOOL)) return false;
      *predicate = args[shortcut.cond].flat<bool>()(0);
      return true;
    }
    if (!scalar(shortcut.read_store, tensorflow::DT_INT64) || !scalar(shortcut.read_object, tensorflow::DT_INT64)) {
      return false;
    }
    return ReadBoolAttr(shortcut.read.get(), args[shortcut.read_store].flat<tensorflow::int64>()(0),
                        args[shortcut.read_object].flat<tensorflow::int64>()(0), predicate);
  }

  // The callee's handle in this function library runtime, under TF's single-threaded executor
  // where `*single_threaded` asks for it and that executor accepts the callee (else false on
  // return, and the default executor's). Instantiated once per key (TF caches it too).
  tensorflow::Status Handle(OpKernelContext* ctx, bool* single_threaded, FunctionLibraryRuntime::Handle* handle,
                            const IfShortcut** shortcut) {
    FunctionLibraryRuntime* lib = ctx->function_library();
    if (lib == nullptr) return tensorflow::errors::Internal("JanusInvoke: no function library runtime");
    {
      tensorflow::mutex_lock lock(mu_);
      if (*single_threaded) {
        auto it = handles_.find(Key{lib, true});
        if (it != handles_.end() && it->second != tensorflow::kInvalidHandle) {
          *handle = it->second;
          auto found = shortcuts_.find(lib);
          if (found != shortcuts_.end()) *shortcut = found->second.get();
          return tensorflow::OkStatus();
        }
        if (it != handles_.end()) *single_threaded = false;  // refused before
      }
      if (!*single_threaded) {
        auto it = handles_.find(Key{lib, false});
        if (it != handles_.end()) {
          *handle = it->second;
          return tensorflow::OkStatus();
        }
      }
    }
    if (*single_threaded) {
      FunctionLibraryRuntime::InstantiateOptions options;
      options.executor_type = kSingleThreaded;
      options.create_kernels_eagerly = true;  // the executor is built, so a refusal shows here
      tensorflow::Status made = lib->Instantiate(func_.name(), AttrSlice(&func_.attr()), options, handle);
      std::unique_ptr<IfShortcut> found = made.ok() ? FindShortcut(lib, options) : nullptr;
      tensorflow::mutex_lock lock(mu_);
      handles_[Key{lib, true}] = made.ok() ? *handle : tensorflow::kInvalidHandle;
      if (made.ok()) {
        if (found != nullptr && shortcuts_.find(lib) == shortcuts_.end()) shortcuts_[lib] = std::move(found);
        auto kept = shortcuts_.find(lib);
        if (kept != shortcuts_.end()) *shortcut = kept->second.get();
        return tensorflow::OkStatus();
      }
      *single_threaded = false;
    }
    TF_RETURN_IF_ERROR(lib->Instantiate(func_.name(), AttrSlice(&func_.attr()), handle));
    tensorflow::mutex_lock lock(mu_);
    handles_[Key{lib, false}] = *handle;
    return tensorflow::OkStatus();
  }

  // The shortcut for the callee where it is one `If` on its arguments and both branches instantiate.
  std::unique_ptr<IfShortcut> FindShortcut(FunctionLibraryRuntime* lib,
                                           const FunctionLibraryRuntime::InstantiateOptions& options) {
    const tensorflow::FunctionLibraryDefinition* library = lib->GetFunctionLibraryDefinition();
    const tensorflow::FunctionDef* fdef = library == nullptr ? nullptr : library->Find(func_.name());
    auto shortcut = std::make_unique<IfShortcut>();
    NameAttrList then_f, else_f;
    if (fdef == nullptr || !func_.attr().empty() || !MatchIf(*fdef, shortcut.get(), &then_f, &else_f)) return nullptr;
    if (!lib->Instantiate(then_f.name(), AttrSlice(&then_f.attr()), options, &shortcut->then_handle).ok() ||
        !lib->Instantiate(else_f.name(), AttrSlice(&else_f.attr()), options, &shortcut->else_handle).ok()) {
      return nullptr;
    }
    return shortcut;
  }

  NameAttrList func_;
  std::map<FunctionLibraryRuntime*, std::unique_ptr<IfShortcut>> shortcuts_ TF_GUARDED_BY(mu_);  // single-threaded only
  bool single_threaded_ = true;  // the `single_threaded` attribute (janus.config.single_threaded_recursion)
  tensorflow::mutex mu_;
  std::map<Key, FunctionLibraryRuntime::Handle> handles_ TF_GUARDED_BY(mu_);
};

class JanusInvokeOp : public InvokeBase {
 public:
  explicit JanusInvokeOp(OpKernelConstruction* ctx) : InvokeBase(ctx) {
    DataTypeVector tout;
    OP_REQUIRES_OK(ctx, ctx->GetAttr("Tout", &tout));
    num_outputs_ = static_cast<int>(tout.size());
    OP_REQUIRES_OK(ctx, ctx->GetAttr("depth_assumption", &depth_assumption_));
  }

  // Input 0 is the invocations left: the callee gets one fewer as its own first argument. None
  // left fails the step as the `depth_assumption` broke (the call then runs in Python, which
  // raises RecursionError where its stack runs out; a cyclic structure ends here, not in memory).
  void ComputeAsync(OpKernelContext* ctx, DoneCallback done) override {
    const Tensor& budget = ctx->input(0);
    OP_REQUIRES_ASYNC(ctx, budget.dtype() == tensorflow::DT_INT64 && budget.NumElements() == 1,
                      tensorflow::errors::InvalidArgument("JanusInvoke: the depth budget must be an int64 scalar"),
                      done);
    const tensorflow::int64 left = budget.scalar<tensorflow::int64>()();
    if (left <= 0) {
      tensorflow::Status failed = tensorflow::errors::FailedPrecondition(
          "JANUS_ASSUMPTION_FAILED:", depth_assumption_, ": the recursion is deeper than Python's recursion limit allows");
      RecordStepError(ctx, failed);
      ctx->SetStatus(failed);
      done();
      return;
    }
    std::vector<Tensor> args;
    args.reserve(ctx->num_inputs());
    Tensor next(tensorflow::DT_INT64, TensorShape({}));
    next.scalar<tensorflow::int64>()() = left - 1;
    args.push_back(std::move(next));
    for (int i = 1; i < ctx->num_inputs(); ++i) args.push_back(ctx->input(i));
    Run(ctx, std::move(args), num_outputs_, /*pack_frame=*/true, std::move(done));
  }

 protected:
  // Fails the depth assumption, as a budget run out does: Python then runs the call.
  tensorflow::Status OutOfStack() const override {
    return tensorflow::errors::FailedPrecondition("JANUS_ASSUMPTION_FAILED:", depth_assumption_,
                                                  ": the recursion is deeper than janus's threads have stack for");
  }

 private:
  int num_outputs_;
  tensorflow::int64 depth_assumption_ = 0;
};

class JanusInvokeGradOp : public InvokeBase {
 public:
  explicit JanusInvokeGradOp(OpKernelConstruction* ctx) : InvokeBase(ctx) {
    DataTypeVector tout;
    OP_REQUIRES_OK(ctx, ctx->GetAttr("Tout", &tout));
    num_outputs_ = static_cast<int>(tout.size());
  }

  void ComputeAsync(OpKernelContext* ctx, DoneCallback done) override {
    const Tensor& packed = ctx->input(0);
    OP_REQUIRES_ASYNC(ctx, packed.dtype() == tensorflow::DT_VARIANT && packed.NumElements() == 1,
                      tensorflow::errors::InvalidArgument("JanusInvokeGrad: frame must be a scalar variant"), done);
    const JanusFrame* frame = packed.scalar<Variant>()().get<JanusFrame>();
    OP_REQUIRES_ASYNC(ctx, frame != nullptr,
                      tensorflow::errors::InvalidArgument("JanusInvokeGrad: input is not a JanusFrame"), done);
    std::vector<Tensor> args;
    args.reserve(ctx->num_inputs() - 1 + frame->tensors.size());
    for (int i = 1; i < ctx->num_inputs(); ++i) args.push_back(ctx->input(i));
    args.insert(args.end(), frame->tensors.begin(), frame->tensors.end());
    Run(ctx, std::move(args), num_outputs_, /*pack_frame=*/false, std::move(done));
  }

 protected:
  tensorflow::Status OutOfStack() const override {
    return tensorflow::errors::ResourceExhausted("JanusInvokeGrad: the recursion is deeper than janus's threads have stack for");
  }

 private:
  int num_outputs_;
};

}  // namespace

REGISTER_OP("JanusInvoke")
    .Input("budget: int64")
    .Input("args: Tin")
    .Output("outputs: Tout")
    .Output("frame: variant")
    .Attr("Tin: list(type) >= 0")
    .Attr("Tout: list(type) >= 0")
    .Attr("output_shapes: list(shape) >= 0")
    .Attr("f: func")
    .Attr("depth_assumption: int")
    .Attr("single_threaded: bool = true")
    .SetIsStateful()
    .SetShapeFn([](tensorflow::shape_inference::InferenceContext* c) { return SetOutputShapes(c, 0); });

REGISTER_OP("JanusInvokeGrad")
    .Input("frame: variant")
    .Input("args: Tin")
    .Output("outputs: Tout")
    .Attr("Tin: list(type) >= 0")
    .Attr("Tout: list(type) >= 0")
    .Attr("output_shapes: list(shape) >= 0")
    .Attr("f: func")
    .Attr("single_threaded: bool = true")
    // Not stateful: a pure function of its inputs (the frame holds every value the backward
    // function reads; recursive functions never write state, janus/graphgen/recursion.py). TF's
    // automatic control dependencies chain stateful ops that take no resource in program order, so
    // as a stateful op it made the gradient `If`s around the top invocations (one a tree of a
    // batch) wait for each other, and the backward recursions ran one after another.
    .SetShapeFn([](tensorflow::shape_inference::InferenceContext* c) { return SetOutputShapes(c, 0); });

REGISTER_KERNEL_BUILDER(Name("JanusInvoke").Device(DEVICE_CPU), JanusInvokeOp);
REGISTER_KERNEL_BUILDER(Name("JanusInvokeGrad").Device(DEVICE_CPU), JanusInvokeGradOp);

}  // namespace janus

namespace tensorflow {  // the registration macros expect to expand inside namespace tensorflow
REGISTER_UNARY_VARIANT_UNARY_OP_FUNCTION(ZEROS_LIKE_VARIANT_UNARY_OP, DEVICE_CPU, janus::JanusFrame,
                                         janus::FrameZerosLike);
REGISTER_UNARY_VARIANT_BINARY_OP_FUNCTION(ADD_VARIANT_BINARY_OP, DEVICE_CPU, janus::JanusFrame, janus::FrameAdd);
}  // namespace tensorflow
