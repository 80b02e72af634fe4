// OnednnMatmul and OnednnConv: oneDNN's primitives set up once, their reorders untimed.
#include "bench/int8_onednn.h"

namespace ktune::bench {

using dt = dnnl::memory::data_type;
using tag = dnnl::memory::format_tag;

OnednnMatmul::OnednnMatmul(int64_t M, int64_t N, int64_t K, dt src, dt weights, dt dst, void* a,
                           void* b, void* c)
    : eng_(dnnl::engine::kind::cpu, 0), strm_(eng_) {
  const dnnl::memory::desc a_md({M, K}, src, tag::ab), c_md({M, N}, dst, tag::ab);
  const dnnl::matmul::primitive_desc pd(
      dnnl::matmul::desc(a_md, dnnl::memory::desc({K, N}, weights, tag::any), c_md), eng_);
  impl_ = pd.impl_info_str();
  a_ = dnnl::memory(a_md, eng_, a);
  c_ = dnnl::memory(c_md, eng_, c);
  dnnl::memory b_user({{K, N}, weights, tag::ab}, eng_, b);
  b_ = placed_.make(pd.weights_desc(), eng_);
  dnnl::reorder(b_user, b_).execute(strm_, b_user, b_);
  strm_.wait();
  prim_ = dnnl::matmul(pd);
}

void OnednnMatmul::run() {
  prim_.execute(strm_, {{DNNL_ARG_SRC, a_}, {DNNL_ARG_WEIGHTS, b_}, {DNNL_ARG_DST, c_}});
  strm_.wait();
}

OnednnConv::OnednnConv(const dnnl::memory::dims& x_dims, const dnnl::memory::dims& w_dims,
                       const dnnl::memory::dims& o_dims, int64_t stride, int64_t pad, void* x,
                       void* w, void* o)
    : eng_(dnnl::engine::kind::cpu, 0), strm_(eng_) {
  const dnnl::convolution_forward::primitive_desc pd(
      dnnl::convolution_forward::desc(
          dnnl::prop_kind::forward_inference, dnnl::algorithm::convolution_direct,
          dnnl::memory::desc(x_dims, dt::u8, tag::any),
          dnnl::memory::desc(w_dims, dt::s8, tag::any),
          dnnl::memory::desc(o_dims, dt::s32, tag::any), {stride, stride}, {pad, pad}, {pad, pad}),
      eng_);
  impl_ = pd.impl_info_str();
  const tag w_tag = w_dims.size() == 5 ? tag::goihw : tag::oihw;
  dnnl::memory x_user({x_dims, dt::u8, tag::nchw}, eng_, x),
      w_user({w_dims, dt::s8, w_tag}, eng_, w);
  o_user_ = dnnl::memory({o_dims, dt::s32, tag::nchw}, eng_, o);
  x_ = placed_.make(pd.src_desc(), eng_);
  w_ = placed_.make(pd.weights_desc(), eng_);
  o_ = placed_.make(pd.dst_desc(), eng_);
  dnnl::reorder(x_user, x_).execute(strm_, x_user, x_);
  dnnl::reorder(w_user, w_).execute(strm_, w_user, w_);
  strm_.wait();
  prim_ = dnnl::convolution_forward(pd);
}

void OnednnConv::run() {
  prim_.execute(strm_, {{DNNL_ARG_SRC, x_}, {DNNL_ARG_WEIGHTS, w_}, {DNNL_ARG_DST, o_}});
  strm_.wait();
}

void OnednnConv::output_to_user() {
  dnnl::reorder(o_, o_user_).execute(strm_, o_, o_user_);
  strm_.wait();
}

}  // namespace ktune::bench
