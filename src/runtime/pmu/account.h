// What the pmu collector counted, put where the profile reader and the report look: the meta
// record's sample fields and a one-sentence collector note (lost, throttled, dropped samples),
// so the report can say how complete the sample is. Called once at the end of a run.
#pragma once
#include <string>

#include "model/profile.h"
#include "runtime/pmu/plan.h"
#include "runtime/pmu/ring.h"
#include "runtime/pmu/sample.h"

namespace whymiss::pmu {

// Sets mode Pmu, the sample source of the plan's backend, samples taken, the mean sample period
// (events per sample) and adds dropped samples to `discarded`: ops that were no memory access
// to NotMemory; samples without a usable ip or address, malformed ones and kernel-mode ones to
// NoDecode (none of them can be attributed to an instruction of the program).
void fill_meta(const Plan& plan, const DecoderCounters& d, profile::MetaRecord* m);

// "pmu sampling kept 980 of 1000 samples (20 without a data address); the kernel lost 3
// records and throttled sampling 2 times for 1.5 ms" — empty when there is nothing to say.
std::string describe(const DecoderCounters& d, const RingCounters& r);

}  // namespace whymiss::pmu
