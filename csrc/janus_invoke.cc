// JanusInvoke / JanusInvokeGrad: call a function of the graph's function library by name.
//
// TensorFlow's own call ops are inlined or specialised at instantiation, which cannot
// terminate for a function that calls itself. JanusInvoke names its function in a `func`
// attribute (so the function stays reachable from the caller's library) and instantiates
// and runs it through the function library runtime when the kernel runs: a recursive user
// function becomes a graph function whose body invokes itself.
//
// Both kernels are asynchronous: the callee's executor schedules its nodes on the
// inter-op pool and completion arrives by callback, so a deep recursion holds no C++ stack
// (and no thread) per level, and independent invocations (the two subtrees of a node) run
// in parallel.
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

#include <memory>
#include <string>
#include <vector>

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
class InvokeBase : public AsyncOpKernel {
 public:
  explicit InvokeBase(OpKernelConstruction* ctx) : AsyncOpKernel(ctx) {
    OP_REQUIRES_OK(ctx, ctx->GetAttr("f", &func_));
  }

 protected:
  // Instantiates the callee once per function library runtime (instantiation is cached by TF).
  tensorflow::Status Handle(OpKernelContext* ctx, FunctionLibraryRuntime::Handle* handle) {
    FunctionLibraryRuntime* lib = ctx->function_library();
    if (lib == nullptr) return tensorflow::errors::Internal("JanusInvoke: no function library runtime");
    {
      tensorflow::mutex_lock lock(mu_);
      auto it = handles_.find(lib);
      if (it != handles_.end()) {
        *handle = it->second;
        return tensorflow::OkStatus();
      }
    }
    TF_RETURN_IF_ERROR(lib->Instantiate(func_.name(), AttrSlice(&func_.attr()), handle));
    tensorflow::mutex_lock lock(mu_);
    handles_[lib] = *handle;
    return tensorflow::OkStatus();
  }

  void Run(OpKernelContext* ctx, std::vector<Tensor> args, int num_outputs, bool pack_frame, DoneCallback done) {
    FunctionLibraryRuntime::Handle handle;
    OP_REQUIRES_OK_ASYNC(ctx, Handle(ctx, &handle), done);
    FunctionLibraryRuntime::Options opts;
    opts.rendezvous = ctx->rendezvous();
    opts.cancellation_manager = ctx->cancellation_manager();
    opts.step_container = ctx->step_container();
    opts.stats_collector = ctx->stats_collector();
    opts.runner = ctx->runner();
    opts.run_all_kernels_inline = ctx->run_all_kernels_inline();
    opts.collective_executor = ctx->collective_executor();
    auto* rets = new std::vector<Tensor>;
    ctx->function_library()->Run(
        opts, handle, args, rets, [ctx, rets, num_outputs, pack_frame, done, name = func_.name()](const tensorflow::Status& status) {
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
        });
  }

 private:
  NameAttrList func_;
  tensorflow::mutex mu_;
  std::map<FunctionLibraryRuntime*, FunctionLibraryRuntime::Handle> handles_ TF_GUARDED_BY(mu_);
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
    .SetIsStateful()
    .SetShapeFn([](tensorflow::shape_inference::InferenceContext* c) { return SetOutputShapes(c, 0); });

REGISTER_KERNEL_BUILDER(Name("JanusInvoke").Device(DEVICE_CPU), JanusInvokeOp);
REGISTER_KERNEL_BUILDER(Name("JanusInvokeGrad").Device(DEVICE_CPU), JanusInvokeGradOp);

}  // namespace janus

namespace tensorflow {  // the registration macros expect to expand inside namespace tensorflow
REGISTER_UNARY_VARIANT_UNARY_OP_FUNCTION(ZEROS_LIKE_VARIANT_UNARY_OP, DEVICE_CPU, janus::JanusFrame,
                                         janus::FrameZerosLike);
REGISTER_UNARY_VARIANT_BINARY_OP_FUNCTION(ADD_VARIANT_BINARY_OP, DEVICE_CPU, janus::JanusFrame, janus::FrameAdd);
}  // namespace tensorflow
