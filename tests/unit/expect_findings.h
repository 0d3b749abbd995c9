// Verdict checks shared by the estimator's tests: the top finding's kind and origin, or none.
#pragma once
#include <gtest/gtest.h>

#include "analysis/analysis.h"

namespace whymiss::testing {
using analysis::Analysis;
using analysis::Kind;
using analysis::Origin;
using analysis::kind_name;
using analysis::origin_name;

inline void expect_top(const Analysis& a, Kind kind, Origin origin) {
  ASSERT_FALSE(a.findings.empty()) << (a.notes.empty() ? "" : a.notes[0]);
  EXPECT_STREQ(kind_name(a.findings[0].kind), kind_name(kind));
  EXPECT_STREQ(origin_name(a.findings[0].origin), origin_name(origin));
}

inline void expect_none(const Analysis& a) {
  EXPECT_TRUE(a.findings.empty()) << kind_name(a.findings[0].kind) << " at level " << a.findings[0].level;
}

}  // namespace whymiss::testing
