/* vit.h: the model 'vit' built by `ktune build --model` for llvm -mtriple=x86_64-pc-linux-gnu
 * -mcpu=rocketlake
 * -mattr=+amx-bf16,+amx-int8,+amx-tile,+avx10.1-256,+avx512bf16,+avx512fp16,+avxvnni,+cldemote,+clwb,+movdir64b,+movdiri,+prefetchi,+rtm,+serialize,+tsxldtrk,-pku.
 * Link libvit.a and ktune's runtime (`ktune build --model ... --runtime FILE`, or any
 * other ktune-built library's runtime). Buffers are float32, NCHW, 64-byte aligned
 * (aligned_alloc(64, ...)); buffers that start on a page (aligned_alloc(4096, ...)) are
 * laid out as ktune timed them. Contexts are independent: threads may each run their own. */
#ifndef KTUNE_MODEL_VIT_H
#define KTUNE_MODEL_VIT_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Scratch memory of one context (intermediate tensors, reused by liveness). */
#define vit_ARENA_BYTES 1536640
#define vit_WEIGHTS_BYTES 5075136
#define vit_NUM_INPUTS 1
#define vit_NUM_OUTPUTS 1
/* INPUT 0: "input", float32 1x3x224x224 */
#define vit_INPUT0_ELEMENTS 150528
static const int64_t vit_INPUT0_shape[4] = {1, 3, 224, 224};
/* OUTPUT 0: "output", float32 1x1000 */
#define vit_OUTPUT0_ELEMENTS 1000
static const int64_t vit_OUTPUT0_shape[2] = {1, 1000};

/* A context with its own arena and its own copy of the weights (buffers of 2 MiB or more on huge
 * pages); NULL when out of memory. */
void* vit_create(void);
/* Runs the model: 0, or a kernel's non-zero status (1 = out of memory), or 2 when a buffer is
 * not 64-byte aligned. */
int32_t vit_run(void* ctx, const float* INPUT0, float* OUTPUT0);
void vit_destroy(void* ctx);

/* The runtime's threads for parallel loops (the caller counts as one): 0, or -1 when n < 1. */
int ktune_set_num_threads(int n);
/* 1 (the default): the runtime's workers are bound to CPUs of their own; 0: anywhere in the
 * affinity mask (as KTUNE_BIND_THREADS=0 in the environment). Returns the previous. */
int ktune_set_thread_binding(int on);

/* Steps marked [1 thread] below run on one thread whatever ktune_set_num_threads says:
 * timed in the model's order at 2 threads and at one, they ran clearly faster on one
 * (the wake-up of a worker on another core cost more than their share of the work).
 * So they need a runtime with ktune_set_thread_cap (any runtime of this ktune). */
#define vit_STEP_THREADS_MEASURED_AT 2

/* Layers (31 kernels):
 *   vit_0_to_nchw3c: layout input
 *   vit_0_conv2d_nchwc: /patch_embed/proj/Conv =
 * conv2d_nchwc(N=1,C=3,H=224,W=224,K=192,R=16,S=16,stride=16,pad=0,dilation=1,ic_block=3,oc_block=16,epilogue=bias,dtype=float32)
 * [tuned] vit_2_to_nchw: layout /patch_embed/proj/Conv_output_0 vit_3_transpose:
 * /patch_embed/Transpose [1 thread] vit_4_concat: /Concat_1 [1 thread] vit_5_add: /Add
 *   vit_6_layer_norm: /blocks/blocks.0/norm1/LayerNormalization
 *   vit_7_matmul: /blocks/blocks.0/attn/qkv/MatMul+/blocks/blocks.0/attn/qkv/Add =
 * matmul(M=197,N=576,K=192,layout=nn,epilogue=bias,dtype=float32) [tuned] vit_8_transpose:
 * /blocks/blocks.0/attn/Transpose vit_9_batch_matmul:
 * /blocks/blocks.0/attn/MatMul+/blocks/blocks.0/attn/Transpose_1 =
 * batch_matmul(batch=3,M=197,N=197,K=64,layout=nt,dtype=float32) [tuned] vit_10_softmax:
 * /blocks/blocks.0/attn/Mul+/blocks/blocks.0/attn/Softmax vit_11_batch_matmul:
 * /blocks/blocks.0/attn/MatMul_1 = batch_matmul(batch=3,M=197,N=64,K=197,layout=nn,dtype=float32)
 * [tuned] vit_12_transpose: /blocks/blocks.0/attn/Transpose_2 vit_13_matmul:
 * /blocks/blocks.0/attn/proj/MatMul+/blocks/blocks.0/attn/proj/Add+/blocks/blocks.0/Add =
 * matmul(M=197,N=192,K=192,layout=nn,epilogue=bias_add,dtype=float32) [tuned] vit_14_layer_norm:
 * /blocks/blocks.0/norm2/LayerNormalization vit_15_matmul:
 * /blocks/blocks.0/mlp/fc1/MatMul+/blocks/blocks.0/mlp/fc1/Add+/blocks/blocks.0/mlp/act/Div+/blocks/blocks.0/mlp/act/Erf+/blocks/blocks.0/mlp/act/Add+/blocks/blocks.0/mlp/act/Mul+/blocks/blocks.0/mlp/act/Mul_1
 * = matmul(M=197,N=768,K=192,layout=nn,epilogue=bias_gelu_erf,dtype=float32) [tuned] vit_16_matmul:
 * /blocks/blocks.0/mlp/fc2/MatMul+/blocks/blocks.0/mlp/fc2/Add+/blocks/blocks.0/Add_1 =
 * matmul(M=197,N=192,K=768,layout=nn,epilogue=bias_add,dtype=float32) [tuned] vit_17_layer_norm:
 * /blocks/blocks.1/norm1/LayerNormalization vit_18_matmul:
 * /blocks/blocks.1/attn/qkv/MatMul+/blocks/blocks.1/attn/qkv/Add =
 * matmul(M=197,N=576,K=192,layout=nn,epilogue=bias,dtype=float32) [tuned] vit_19_transpose:
 * /blocks/blocks.1/attn/Transpose vit_20_batch_matmul:
 * /blocks/blocks.1/attn/MatMul+/blocks/blocks.1/attn/Transpose_1 =
 * batch_matmul(batch=3,M=197,N=197,K=64,layout=nt,dtype=float32) [tuned] vit_21_softmax:
 * /blocks/blocks.1/attn/Mul+/blocks/blocks.1/attn/Softmax vit_22_batch_matmul:
 * /blocks/blocks.1/attn/MatMul_1 = batch_matmul(batch=3,M=197,N=64,K=197,layout=nn,dtype=float32)
 * [tuned] vit_23_transpose: /blocks/blocks.1/attn/Transpose_2 vit_24_matmul:
 * /blocks/blocks.1/attn/proj/MatMul+/blocks/blocks.1/attn/proj/Add+/blocks/blocks.1/Add =
 * matmul(M=197,N=192,K=192,layout=nn,epilogue=bias_add,dtype=float32) [tuned] vit_25_layer_norm:
 * /blocks/blocks.1/norm2/LayerNormalization vit_26_matmul:
 * /blocks/blocks.1/mlp/fc1/MatMul+/blocks/blocks.1/mlp/fc1/Add+/blocks/blocks.1/mlp/act/Div+/blocks/blocks.1/mlp/act/Erf+/blocks/blocks.1/mlp/act/Add+/blocks/blocks.1/mlp/act/Mul+/blocks/blocks.1/mlp/act/Mul_1
 * = matmul(M=197,N=768,K=192,layout=nn,epilogue=bias_gelu_erf,dtype=float32) [tuned] vit_27_matmul:
 * /blocks/blocks.1/mlp/fc2/MatMul+/blocks/blocks.1/mlp/fc2/Add+/blocks/blocks.1/Add_1 =
 * matmul(M=197,N=192,K=768,layout=nn,epilogue=bias_add,dtype=float32) [tuned] vit_28_layer_norm:
 * /norm/LayerNormalization vit_29_matmul: /head/Gemm =
 * matmul(M=1,N=1000,K=192,layout=nt,epilogue=bias,dtype=float32) [tuned] vit_30_copy: output output
 */

#ifdef __cplusplus
}
#endif

#endif
