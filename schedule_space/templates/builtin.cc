// Registers every built-in template (called once by TemplateRegistry::global()).
#include "schedule_space/template_registry.h"

namespace ktune::schedule_space {
namespace templates {
void register_gemm_templates(TemplateRegistry& r);
void register_conv_templates(TemplateRegistry& r);
void register_conv_nchwc_template(TemplateRegistry& r);
void register_conv_winograd_nchwc_template(TemplateRegistry& r);
void register_depthwise_nchwc_template(TemplateRegistry& r);
void register_matmul_int8_template(TemplateRegistry& r);
void register_conv_nchwc_int8_template(TemplateRegistry& r);
void register_matmul_bf16_template(TemplateRegistry& r);
void register_conv_nchwc_bf16_template(TemplateRegistry& r);
void register_depthwise_nchwc_int8_template(TemplateRegistry& r);
void register_fma_peak_template(TemplateRegistry& r);
}  // namespace templates

void register_builtin_templates(TemplateRegistry& registry) {
  templates::register_gemm_templates(registry);
  templates::register_conv_templates(registry);
  templates::register_conv_nchwc_template(registry);
  templates::register_conv_winograd_nchwc_template(registry);
  templates::register_depthwise_nchwc_template(registry);
  templates::register_matmul_int8_template(registry);
  templates::register_conv_nchwc_int8_template(registry);
  templates::register_matmul_bf16_template(registry);
  templates::register_conv_nchwc_bf16_template(registry);
  templates::register_depthwise_nchwc_int8_template(registry);
  templates::register_fma_peak_template(registry);
}

}  // namespace ktune::schedule_space
