// JanusAssert: the runtime check behind every speculative assumption.
//
// The op takes a scalar boolean `condition` and an `assumption_id` attribute.
// When the condition is false it fails the graph run with a FAILED_PRECONDITION
// status whose message starts with the marker "JANUS_ASSUMPTION_FAILED:<id>:".
// The executor recognises that marker and treats the run as "assumption <id>
// broke" (re-run imperatively, relax, regenerate), which is distinct from a
// real error raised by the user's math.
//
// The op is stateful so that TensorFlow never prunes or reorders it away, and
// so that stateful updates can be given control dependencies on it.
//
// Two checks that also compute the value they check, one node where the condition and the
// value would take four or more (a recursive function runs them at every leaf, and TF's
// executor costs about 0.3 us a node whatever the kernel):
// * JanusUnwrap: the number of an optional heap read ([present, number]), failing where the
//   location held None (eager would raise a TypeError where the number is used);
// * JanusNarrowInt32: an int64 as the int32 eager's convert_to_tensor makes of a Python int,
//   failing where it lies outside int32 (eager makes an int64 tensor there).
// Both fail exactly as JanusAssert does, with their own assumption's id.

#include <limits>
#include <string>

#include "tensorflow/core/framework/common_shape_fns.h"
#include "tensorflow/core/framework/op.h"
#include "tensorflow/core/framework/op_kernel.h"
#include "tensorflow/core/framework/shape_inference.h"

namespace janus {

using tensorflow::DEVICE_CPU;
using tensorflow::OpKernel;
using tensorflow::OpKernelConstruction;
using tensorflow::OpKernelContext;
using tensorflow::Tensor;
using tensorflow::TensorShapeUtils;

REGISTER_OP("JanusAssert")
    .Input("condition: bool")
    .Attr("assumption_id: int")
    .SetIsStateful()
    .SetShapeFn([](tensorflow::shape_inference::InferenceContext* c) {
      tensorflow::shape_inference::ShapeHandle unused;
      TF_RETURN_IF_ERROR(c->WithRank(c->input(0), 0, &unused));
      return tensorflow::OkStatus();
    })
    .Doc(R"doc(
Fails the run with "JANUS_ASSUMPTION_FAILED:<assumption_id>:" when condition is false.
)doc");

// janus_invoke.cc: the step's first error, which an invocation cancelled because of it reports.
void RecordStepError(OpKernelContext* ctx, const tensorflow::Status& status);

namespace {

// Fails the step with assumption `id`'s marker, as a false JanusAssert does.
void FailAssumption(OpKernelContext* ctx, tensorflow::int64 id) {
  tensorflow::Status failed =
      tensorflow::errors::FailedPrecondition("JANUS_ASSUMPTION_FAILED:", id, ": a speculative assumption did not hold");
  RecordStepError(ctx, failed);  // before the executor cancels the step's other nodes
  ctx->SetStatus(failed);
}

}  // namespace

class JanusAssertOp : public OpKernel {
 public:
  explicit JanusAssertOp(OpKernelConstruction* ctx) : OpKernel(ctx) {
    OP_REQUIRES_OK(ctx, ctx->GetAttr("assumption_id", &assumption_id_));
  }

  void Compute(OpKernelContext* ctx) override {
    const Tensor& condition = ctx->input(0);
    OP_REQUIRES(ctx, TensorShapeUtils::IsScalar(condition.shape()),
                tensorflow::errors::InvalidArgument(
                    "JanusAssert expects a scalar condition, got shape ",
                    condition.shape().DebugString()));
    if (!condition.scalar<bool>()()) FailAssumption(ctx, assumption_id_);
  }

 private:
  tensorflow::int64 assumption_id_ = 0;
};

REGISTER_KERNEL_BUILDER(Name("JanusAssert").Device(DEVICE_CPU), JanusAssertOp);

REGISTER_OP("JanusUnwrap")
    .Input("pair: T")
    .Output("value: T")
    .Attr("T: {int64, double, bool}")
    .Attr("assumption_id: int")
    .SetIsStateful()
    .SetShapeFn([](tensorflow::shape_inference::InferenceContext* c) {
      tensorflow::shape_inference::ShapeHandle pair;
      TF_RETURN_IF_ERROR(c->WithRank(c->input(0), 1, &pair));
      tensorflow::shape_inference::DimensionHandle two;
      TF_RETURN_IF_ERROR(c->WithValue(c->Dim(pair, 0), 2, &two));
      c->set_output(0, c->Scalar());
      return tensorflow::OkStatus();
    })
    .Doc(R"doc(
pair[1] where pair[0] is nonzero (the location held a number); else fails the run with
"JANUS_ASSUMPTION_FAILED:<assumption_id>:".
)doc");

template <typename T>
class JanusUnwrapOp : public OpKernel {
 public:
  explicit JanusUnwrapOp(OpKernelConstruction* ctx) : OpKernel(ctx) {
    OP_REQUIRES_OK(ctx, ctx->GetAttr("assumption_id", &assumption_id_));
  }

  void Compute(OpKernelContext* ctx) override {
    const Tensor& pair = ctx->input(0);
    OP_REQUIRES(ctx, pair.dims() == 1 && pair.dim_size(0) == 2,
                tensorflow::errors::InvalidArgument("JanusUnwrap expects a [2] pair, got shape ",
                                                    pair.shape().DebugString()));
    auto flat = pair.flat<T>();
    if (!static_cast<bool>(flat(0))) return FailAssumption(ctx, assumption_id_);
    Tensor* out = nullptr;
    OP_REQUIRES_OK(ctx, ctx->allocate_output(0, tensorflow::TensorShape({}), &out));
    out->scalar<T>()() = flat(1);
  }

 private:
  tensorflow::int64 assumption_id_ = 0;
};

REGISTER_KERNEL_BUILDER(Name("JanusUnwrap").Device(DEVICE_CPU).TypeConstraint<tensorflow::int64>("T"),
                        JanusUnwrapOp<tensorflow::int64>);
REGISTER_KERNEL_BUILDER(Name("JanusUnwrap").Device(DEVICE_CPU).TypeConstraint<double>("T"), JanusUnwrapOp<double>);
REGISTER_KERNEL_BUILDER(Name("JanusUnwrap").Device(DEVICE_CPU).TypeConstraint<bool>("T"), JanusUnwrapOp<bool>);

REGISTER_OP("JanusNarrowInt32")
    .Input("x: int64")
    .Output("y: int32")
    .Attr("assumption_id: int")
    .SetIsStateful()
    .SetShapeFn(tensorflow::shape_inference::UnchangedShape)
    .Doc(R"doc(
x as int32 where every element fits int32; else fails the run with
"JANUS_ASSUMPTION_FAILED:<assumption_id>:".
)doc");

class JanusNarrowInt32Op : public OpKernel {
 public:
  explicit JanusNarrowInt32Op(OpKernelConstruction* ctx) : OpKernel(ctx) {
    OP_REQUIRES_OK(ctx, ctx->GetAttr("assumption_id", &assumption_id_));
  }

  void Compute(OpKernelContext* ctx) override {
    const Tensor& x = ctx->input(0);
    auto in = x.flat<tensorflow::int64>();
    for (tensorflow::int64 i = 0; i < in.size(); ++i) {
      if (in(i) < std::numeric_limits<tensorflow::int32>::min() || in(i) > std::numeric_limits<tensorflow::int32>::max()) {
        return FailAssumption(ctx, assumption_id_);
      }
    }
    Tensor* out = nullptr;
    OP_REQUIRES_OK(ctx, ctx->allocate_output(0, x.shape(), &out));
    auto y = out->flat<tensorflow::int32>();
    for (tensorflow::int64 i = 0; i < in.size(); ++i) y(i) = static_cast<tensorflow::int32>(in(i));
  }

 private:
  tensorflow::int64 assumption_id_ = 0;
};

REGISTER_KERNEL_BUILDER(Name("JanusNarrowInt32").Device(DEVICE_CPU), JanusNarrowInt32Op);

}  // namespace janus
