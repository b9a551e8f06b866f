# Sourced at the start of every device run: unpack the carried Vulkan/EGL loaders (.gl/*.deb) and
# point the loader at NVIDIA's ICD when it finds no driver by itself.
for f in .gl/*.deb; do dpkg -x "$f" /; done
ldconfig
if [ -f /usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json ]; then
  export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
fi
export XDG_RUNTIME_DIR=${XDG_RUNTIME_DIR:-/tmp}
