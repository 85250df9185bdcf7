// The integer dot product mvq.comp multiplies int8 inputs (q8.glsl) with. Its own file: a shader
// that includes it declares the capability, and devices without shaderIntegerDotProduct reject
// any shader that does (so the shifts and wkv, which write the int8 form, must not).
#extension GL_EXT_spirv_intrinsics : require

// OpSDot (SPV_KHR_integer_dot_product; Vulkan's shaderIntegerDotProduct): the dot product of two
// words read as four signed bytes each. glslang 11.13 has no GL_EXT_integer_dot_product, so the
// instruction is declared through GL_EXT_spirv_intrinsics (capabilities DotProduct and
// DotProductInput4x8BitPacked; the last operand 0 is PackedVectorFormat4x8Bit).
spirv_instruction(extensions = ["SPV_KHR_integer_dot_product"], capabilities = [6019, 6018],
                  id = 4450) int sdot4(uint a, uint b, spirv_literal int fmt);

int dot16(uvec4 a, uvec4 b) {
  return sdot4(a.x, b.x, 0) + sdot4(a.y, b.y, 0) + sdot4(a.z, b.z, 0) + sdot4(a.w, b.w, 0);
}
