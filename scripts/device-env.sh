# Sourced ON the device machine (from the repo root) by the .gl/device-*.sh scripts: installs the
# Vulkan loader from the carried debs and points the loader at NVIDIA's driver and the binaries
# at their carried shared libraries (../shared/device/README.md).
for f in .gl/*.deb; do dpkg -x "$f" /; done
ldconfig
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
export LD_LIBRARY_PATH=$PWD/.gl/lib
