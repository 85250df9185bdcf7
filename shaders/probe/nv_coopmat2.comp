#version 450
// Configure-time probe: the shader compiler must compile GL_NV_cooperative_matrix2 (tensor
// layouts and workgroup-scope matrices). Never part of the binary.
#extension GL_KHR_cooperative_matrix : require
#extension GL_NV_cooperative_matrix2 : require
#extension GL_KHR_memory_scope_semantics : require
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require
layout(local_size_x = 128) in;
layout(binding = 0) readonly buffer A { float16_t a[]; };
layout(binding = 1) writeonly buffer C { float c[]; };
void main() {
  tensorLayoutNV<2> t = createTensorLayoutNV(2);
  t = setTensorLayoutDimensionNV(t, 64, 64);
  coopmat<float16_t, gl_ScopeWorkgroup, 64, 16, gl_MatrixUseA> ma;
  coopmat<float16_t, gl_ScopeWorkgroup, 16, 64, gl_MatrixUseB> mb;
  coopmat<float, gl_ScopeWorkgroup, 64, 64, gl_MatrixUseAccumulator> mc =
      coopmat<float, gl_ScopeWorkgroup, 64, 64, gl_MatrixUseAccumulator>(0.0);
  coopMatLoadTensorNV(ma, a, 0, sliceTensorLayoutNV(t, 0, 64, 0, 16));
  coopMatLoadTensorNV(mb, a, 0, sliceTensorLayoutNV(t, 0, 16, 0, 64));
  mc = coopMatMulAdd(ma, mb, mc);
  coopMatStore(mc, c, 0, 64, gl_CooperativeMatrixLayoutRowMajor);
}
