// Shared by the data views (types_view.cpp, fields_view.cpp, view_flow.cpp,
// view_working_set.cpp): how a count prints, in text and JSON, by the profile's mode, and how a
// group of objects is named. Internal to the report library.
#pragma once
#include <string>

#include "analysis/data_types.h"
#include "model/profile.h"
#include "report/json.h"
#include "report/report.h"

namespace whymiss::report::datatypes {

inline constexpr const char* kKindNames[profile::kKinds] = {
    "hit", "compulsory", "capacity", "conflict", "true_sharing", "false_sharing"};

// "12,345" (exact) or "~12,000" (sampled modes).
std::string count(const profile::Profile& p, double v);
// "45.6%" (exact) or "~46%".
std::string share(const profile::Profile& p, double f);
// "capacity 90.0%, compulsory 10.0%": the kinds of `misses` (by kind, kind 0 unused) as shares,
// largest first, at most `max` of them, those under 0.05% left out.
std::string kind_split(const profile::Profile& p, const double* misses, int max = 5);
// {"compulsory": n, ...} for kinds 1..5.
void json_kinds(JsonWriter& w, const double* misses);
// The header sentence: how the counts were obtained and how they were placed on data.
std::string basis(const profile::Profile& p);

// A group of heap objects: "struct row (allocated at main  phases.c:16)", "struct row (3
// sites)", or without a type "objects allocated at main  phases.c:16 (type unknown)".
std::string group_name(const std::string& type, size_t sites, uint32_t site, const profile::Profile& p, Namer& n);
// An allocation site as JSON {"function", "file", "line"}, or null when unknown.
void site_json(JsonWriter& w, uint32_t site, const profile::Profile& p, Namer& n);

}  // namespace whymiss::report::datatypes
