#version 450
// C = A * B through VK_KHR_cooperative_matrix, for tests/vk/khr_coopmat_test.cpp: A is rows x
// depth, B depth x cols, both fp16 and row-major; C is rows x cols, row-major, of ACC (float or
// float16_t, -DACC_F16). One subgroup per workgroup computes one M x N tile of C, walking depth in
// steps of K. The fragment's shape and the subgroup's size are specialization constants, so one
// build runs every shape the device offers; the sizes are multiples of the fragment's.
#extension GL_KHR_cooperative_matrix : require
#extension GL_KHR_memory_scope_semantics : require
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require
#ifdef ACC_F16
#define ACC float16_t
#else
#define ACC float
#endif
layout(local_size_x_id = 0) in;
layout(constant_id = 1) const uint M = 16;
layout(constant_id = 2) const uint N = 16;
layout(constant_id = 3) const uint K = 16;
layout(push_constant) uniform Sizes { uint rows, cols, depth; } p;
layout(binding = 0) readonly buffer A { float16_t a[]; };
layout(binding = 1) readonly buffer B { float16_t b[]; };
layout(binding = 2) writeonly buffer C { ACC c[]; };
void main() {
  const uint row = gl_WorkGroupID.y * M, col = gl_WorkGroupID.x * N;
  coopmat<ACC, gl_ScopeSubgroup, M, N, gl_MatrixUseAccumulator> acc =
      coopmat<ACC, gl_ScopeSubgroup, M, N, gl_MatrixUseAccumulator>(0.0);
  for (uint k = 0; k < p.depth; k += K) {
    coopmat<float16_t, gl_ScopeSubgroup, M, K, gl_MatrixUseA> ma;
    coopmat<float16_t, gl_ScopeSubgroup, K, N, gl_MatrixUseB> mb;
    coopMatLoad(ma, a, row * p.depth + k, p.depth, gl_CooperativeMatrixLayoutRowMajor);
    coopMatLoad(mb, b, k * p.cols + col, p.cols, gl_CooperativeMatrixLayoutRowMajor);
    acc = coopMatMulAdd(ma, mb, acc);
  }
  coopMatStore(acc, c, row * p.cols + col, p.cols, gl_CooperativeMatrixLayoutRowMajor);
}
