# Sourced ON the device machine (from the repo root) by the .gl/device-*.sh scripts: installs the
# Vulkan loader from the carried debs and points the loader at NVIDIA's driver and the binaries
# at their carried shared libraries (../shared/device/README.md).
for f in .gl/*.deb; do dpkg -x "$f" /; done
ldconfig
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
export LD_LIBRARY_PATH=$PWD/.gl/lib

# The preset's random-weight model of a type (the world vocabulary, so the email is the anchors'
# 854 tokens), made once per machine: synth_model PRESET TYPE LOG_DIR sets $model to its path.
synth_model() {
  model=/tmp/models/rwkv7-$1-$2.gguf
  mkdir -p /tmp/models
  [[ -f $model ]] || .gl/rwkvd synth --preset "$1" --type "$2" --seed 1 --out "$model" \
    --vocab-file .gl/rwkv_vocab_v20230424.txt 2>"$3/synth-$1-$2.log"
}
