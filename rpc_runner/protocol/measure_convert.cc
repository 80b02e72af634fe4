// tuner::MeasureOptions <-> rpc::MeasureSpec, field by field.
#include "rpc_runner/protocol/measure_convert.h"

namespace ktune::rpc_runner {

void to_proto(const tuner::MeasureOptions& m, rpc::MeasureSpec* out) {
  out->set_number(m.number);
  out->set_repeat(m.repeat);
  out->set_min_repeat_ms(m.min_repeat_ms);
  out->set_cooldown_s(m.cooldown_s);
  out->set_flush_cache(m.flush_cache);
  out->set_check_correctness(m.check_correctness);
  out->set_rtol(m.rtol);
  out->set_atol(m.atol);
  out->set_build_timeout_s(m.build_timeout_s);
  out->set_run_timeout_s(m.run_timeout_s);
  out->set_threads(m.run_threads);
  out->set_data_seed(m.data_seed);
  out->set_return_outputs(m.return_outputs);
}

tuner::MeasureOptions from_proto(const rpc::MeasureSpec& m) {
  tuner::MeasureOptions o;
  o.number = m.number();
  o.repeat = m.repeat();
  o.min_repeat_ms = m.min_repeat_ms();
  o.cooldown_s = m.cooldown_s();
  o.flush_cache = m.flush_cache();
  o.check_correctness = m.check_correctness();
  o.rtol = m.rtol();
  o.atol = m.atol();
  o.build_timeout_s = m.build_timeout_s();
  o.run_timeout_s = m.run_timeout_s();
  o.run_threads = m.threads();
  o.data_seed = m.data_seed();
  o.return_outputs = m.return_outputs();
  return o;
}

}  // namespace ktune::rpc_runner
