#!/bin/sh
# Runs a Vulkan test program ("$@") under the Khronos validation layer, with synchronization
# validation: any validation error or warning fails the test, whatever the program's own result.
# Skips (77) with the reason when the layer is not installed (Debian: vulkan-validationlayers) or
# when the program itself skips.
settings=$(mktemp -d) || exit 1
log="$settings/log"
trap 'rm -rf "$settings"' EXIT
# Errors and warnings, and the layer's info line at vkCreateInstance, which shows it is active.
# No shader validation cache: the layer keeps it in ~/.cache, and where the file is missing (a
# fresh home: the first validation run of a machine) it reports UNASSIGNED-cache-file-error at
# info level, which failed that run.
cat > "$settings/vk_layer_settings.txt" <<SETTINGS
khronos_validation.debug_action = VK_DBG_LAYER_ACTION_LOG_MSG
khronos_validation.report_flags = error,warn,info
khronos_validation.log_filename = stdout
khronos_validation.enables = VK_VALIDATION_FEATURE_ENABLE_SYNCHRONIZATION_VALIDATION_EXT
khronos_validation.disables = VK_VALIDATION_FEATURE_DISABLE_SHADER_VALIDATION_CACHE_EXT
SETTINGS
# Under AddressSanitizer, no leak check in these runs: the layer (Debian's 1.3.239) leaves about
# a hundred of its own objects allocated when vkDestroyInstance unloads it (LeakSanitizer then
# shows them from an "<unknown module>": the layer is gone). The same programs run without the
# layer in their own tests (vulkan_plugin, vulkan_core, conformance_vulkan), with the leak check.
ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0"
export ASAN_OPTIONS
# stdout, not a file: the layer opens its file anew (truncated) for each instance.
VK_LAYER_SETTINGS_PATH="$settings" VK_INSTANCE_LAYERS=VK_LAYER_KHRONOS_validation "$@" > "$log" 2>&1
rc=$?
grep -v "createinstance-status-message\|^Validation Information\|^    Objects:\|^        \[0\]\|^$" "$log" | tail -n 60
[ $rc -eq 77 ] && exit 77
if ! grep -q "createinstance-status-message" "$log" 2>/dev/null; then
  echo "SKIPPED: the Khronos validation layer did not load (install vulkan-validationlayers)"
  exit 77
fi
if grep -E "VUID-|SYNC-|Validation (Error|Warning)|UNASSIGNED-" "$log" |
   grep -v "createinstance-status-message" > "$settings/found"; then
  echo "the Vulkan validation layer reported:"
  sort "$settings/found" | uniq -c | head -n 40
  exit 1
fi
echo "validation layer: no error or warning ($(grep -c createinstance-status-message "$log") instances checked)"
exit $rc
