// whymiss-cc's GCC plugin: runs GCC's ThreadSanitizer instrumentation late, after the loop and
// string optimisations, instead of early in the optimisation pipeline where GCC puts it.
//
// Why: exact mode should see the program as it runs natively. GCC 12 instruments accesses (pass
// "tsan", first instance) before loop distribution ("ldist") and before the string pass
// ("strlen") that turns malloc followed by a zeroing loop into calloc: the instrumented calls in
// the loop body then keep both from happening, so a whymiss-cc build zeroes the memory itself
// (65,537 L1 misses on tests/workloads/zero_init.c:40) where the native build calls calloc and
// touches nothing. Instrumenting after "strlen" (first instance) sees the loops as the native
// build keeps them: distributed, vectorised, unrolled. The early instance is replaced by a pass
// that never runs; -O0 and -Og keep GCC's own placement (their instances are not touched).
//
// Contract: loaded only by the GCC whose plugin headers it was built against (whymiss-cc checks
// the plugin directory; GCC refuses a plugin of another version anyway). Adds no pass of its
// own besides moving the existing one: the instrumentation itself, its ABI and its flags
// (--param=tsan-*) are GCC's.
#include "gcc-plugin.h"
#include "plugin-version.h"
#include "context.h"
#include "tree-pass.h"

// GCC loads only plugins that declare their licence compatible with the GPL. This one file is
// offered under the MIT licence, which is.
__attribute__((visibility("default"))) int plugin_is_GPL_compatible;

namespace {

const pass_data kNeverData = {
    GIMPLE_PASS, "whymiss_tsan_moved", OPTGROUP_NONE, TV_NONE, PROP_ssa | PROP_cfg, 0, 0, 0, 0};

// Stands where the early instrumentation was: its gate is always false.
class NeverPass : public gimple_opt_pass {
 public:
  explicit NeverPass(gcc::context* c) : gimple_opt_pass(kNeverData, c) {}
  bool gate(function*) final override { return false; }
};

}  // namespace

__attribute__((visibility("default"))) int plugin_init(plugin_name_args* info,
                                                       plugin_gcc_version* version) {
  if (!plugin_default_version_check(version, &gcc_version)) return 1;
  static register_pass_info early{new NeverPass(g), "tsan", 1, PASS_POS_REPLACE};
  register_callback(info->base_name, PLUGIN_PASS_MANAGER_SETUP, nullptr, &early);
  static register_pass_info late{make_pass_tsan(g), "strlen", 1, PASS_POS_INSERT_AFTER};
  register_callback(info->base_name, PLUGIN_PASS_MANAGER_SETUP, nullptr, &late);
  return 0;
}
