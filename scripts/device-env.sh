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

# A variant's settings (comma-separated KEY=VALUE words, in a subshell): names in capitals are
# environment variables (RWKVD_VK_PROFILE=0, ...), lower-case ones tuning values (mc_split=1,
# fuse_lora=false: engine/vk/tuning.h's fields), which go to one JSON file per variant that
# RWKVD_VK_TUNING names (docs/VULKAN.md, "Tuning"). apply_variant NAME SETTINGS
apply_variant() {
  local json="" kv k v
  IFS=, read -ra kvs <<<"$2"
  for kv in "${kvs[@]}"; do
    [[ -n $kv ]] || continue
    k=${kv%%=*} v=${kv#*=}
    if [[ $k =~ ^[A-Z][A-Z0-9_]*$ ]]; then
      export "$k=$v"
    else
      [[ $v =~ ^([0-9]+|true|false)$ ]] || v="\"$v\""
      json+="${json:+, }\"$k\": $v"
    fi
  done
  if [[ -n $json ]]; then
    echo "{$json}" >"/tmp/tuning-$1.json"
    export RWKVD_VK_TUNING=/tmp/tuning-$1.json
  fi
}
