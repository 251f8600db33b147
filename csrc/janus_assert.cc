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

#include <string>

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
    if (!condition.scalar<bool>()()) {
      tensorflow::Status failed = tensorflow::errors::FailedPrecondition(
          "JANUS_ASSUMPTION_FAILED:", assumption_id_,
          ": a speculative assumption did not hold");
      RecordStepError(ctx, failed);  // before the executor cancels the step's other nodes
      ctx->SetStatus(failed);
    }
  }

 private:
  tensorflow::int64 assumption_id_ = 0;
};

REGISTER_KERNEL_BUILDER(Name("JanusAssert").Device(DEVICE_CPU), JanusAssertOp);

}  // namespace janus
