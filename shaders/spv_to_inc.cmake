# cmake -DIN=x.spv -DOUT=x.inc -P spv_to_inc.cmake: a SPIR-V binary as the C initializer list
# glslc -mfmt=num writes (little-endian words, hex), for shaders passed through spirv-opt.
file(READ ${IN} hex HEX)
string(REGEX REPLACE "(..)(..)(..)(..)" "0x\\4\\3\\2\\1,\n" words "${hex}")
file(WRITE ${OUT} "${words}")
