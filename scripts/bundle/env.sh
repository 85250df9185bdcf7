# shellcheck shell=bash
# Sourced by the bundle's scripts (scripts/bench-bundle): sets $bundle to the bundle's folder,
# makes the Vulkan loader usable and points the binaries at the bundle's shared libraries.
# The loader: the bundle's debs (libvulkan1 and the GL libraries NVIDIA's driver loads; without
# them a bare container's vkCreateInstance fails with -9) are unpacked into / when run as root;
# `scripts/bench-bundle --no-debs` leaves them out for hosts with their own. NVIDIA's ICD file
# is used where a container mounts the driver under /usr/local/nvidia.
bundle=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
if [[ $(id -u) == 0 ]] && compgen -G "$bundle/debs/*.deb" >/dev/null; then
  for f in "$bundle"/debs/*.deb; do dpkg -x "$f" /; done
  ldconfig
fi
nv_icd=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
[[ -z ${VK_DRIVER_FILES:-} && -f $nv_icd ]] && export VK_DRIVER_FILES=$nv_icd
export LD_LIBRARY_PATH=$bundle/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
: "${OUT:=$PWD/bench-out}" && mkdir -p "$OUT"

# The preset's random-weight model of a type (the world vocabulary, so the email is 854 tokens),
# made once per machine: synth_model PRESET TYPE LOG_DIR sets $model to its path.
synth_model() {
  model=${BENCH_MODELS:-/tmp/rwkvd-bench-models}/rwkv7-$1-$2.gguf
  mkdir -p "$(dirname "$model")"
  [[ -f $model ]] || "$bundle/rwkvd" synth --preset "$1" --type "$2" --seed 1 --out "$model" \
    --vocab-file "$bundle/rwkv_vocab_v20230424.txt" 2>"$3/synth-$1-$2.log"
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
