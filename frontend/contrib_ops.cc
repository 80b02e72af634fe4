// register_contrib_schemas(): the two schemas as ONNX Runtime defines them (domain com.microsoft,
// since version 1), with the shape inference ONNX's checker and InferShapes run on them.
#include "frontend/contrib_ops.h"

#include <mutex>

#include <onnx/defs/schema.h>
#include <onnx/defs/shape_inference.h>

namespace ktune::frontend {
namespace {

constexpr const char* kDomain = "com.microsoft";

// QLinearAdd(A, A_scale, A_zero_point, B, B_scale, B_zero_point, C_scale, C_zero_point) -> C: the
// type of A, the shape A and B broadcast to.
onnx::OpSchema qlinear_add() {
  onnx::OpSchema s;
  s.SetName("QLinearAdd")
      .SetDomain(kDomain)
      .SinceVersion(1)
      .SetDoc("C = quantize(dequantize(A) + dequantize(B)), every scale and zero point per tensor")
      .Input(0, "A", "", "T")
      .Input(1, "A_scale", "", "tensor(float)")
      .Input(2, "A_zero_point", "", "T", onnx::OpSchema::Optional)
      .Input(3, "B", "", "T")
      .Input(4, "B_scale", "", "tensor(float)")
      .Input(5, "B_zero_point", "", "T", onnx::OpSchema::Optional)
      .Input(6, "C_scale", "", "tensor(float)")
      .Input(7, "C_zero_point", "", "T", onnx::OpSchema::Optional)
      .Output(0, "C", "", "T")
      .TypeConstraint("T", {"tensor(uint8)", "tensor(int8)"}, "quantized data")
      .TypeAndShapeInferenceFunction([](onnx::InferenceContext& ctx) {
        onnx::propagateElemTypeFromInputToOutput(ctx, 0, 0);
        if (onnx::hasInputShape(ctx, 0) && onnx::hasInputShape(ctx, 3))
          onnx::bidirectionalBroadcastShapeInference(onnx::getInputShape(ctx, 0),
                                                     onnx::getInputShape(ctx, 3),
                                                     *onnx::getOutputShape(ctx, 0));
      });
  return s;
}

// QLinearGlobalAveragePool(X, x_scale, x_zero_point, y_scale, y_zero_point) -> Y: the mean over
// the spatial axes, [N, C, 1, ...] (channels_last = 0) or [N, 1, ..., C].
onnx::OpSchema qlinear_global_average_pool() {
  onnx::OpSchema s;
  s.SetName("QLinearGlobalAveragePool")
      .SetDomain(kDomain)
      .SinceVersion(1)
      .SetDoc("Y = quantize(mean over the spatial axes of dequantize(X)), per tensor")
      .Attr("channels_last", "", onnx::AttributeProto::INT, static_cast<int64_t>(0))
      .Input(0, "X", "", "T")
      .Input(1, "x_scale", "", "tensor(float)")
      .Input(2, "x_zero_point", "", "T", onnx::OpSchema::Optional)
      .Input(3, "y_scale", "", "tensor(float)")
      .Input(4, "y_zero_point", "", "T", onnx::OpSchema::Optional)
      .Output(0, "Y", "", "T")
      .TypeConstraint("T", {"tensor(uint8)", "tensor(int8)"}, "quantized data")
      .TypeAndShapeInferenceFunction([](onnx::InferenceContext& ctx) {
        onnx::propagateElemTypeFromInputToOutput(ctx, 0, 0);
        if (!onnx::hasInputShape(ctx, 0)) return;
        const auto& in = onnx::getInputShape(ctx, 0);
        if (in.dim_size() < 3)
          fail_shape_inference("X needs a batch, a channel and a spatial axis");
        const bool last = onnx::getAttribute(ctx, "channels_last", 0) != 0;
        auto* out = onnx::getOutputShape(ctx, 0);
        for (int i = 0; i < in.dim_size(); ++i) {
          const bool kept = i == 0 || i == (last ? in.dim_size() - 1 : 1);
          if (kept)
            *out->add_dim() = in.dim(i);
          else
            out->add_dim()->set_dim_value(1);
        }
      });
  return s;
}

}  // namespace

void register_contrib_schemas() {
  static std::once_flag once;
  std::call_once(once, [] {
    auto& domains = onnx::OpSchemaRegistry::DomainToVersionRange::Instance();
    if (!domains.Map().count(kDomain)) domains.AddDomainToVersion(kDomain, 1, 1);
    onnx::RegisterSchema(qlinear_add());
    onnx::RegisterSchema(qlinear_global_average_pool());
  });
}

}  // namespace ktune::frontend
