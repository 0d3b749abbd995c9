// pprof's profile format (gzipped profile.proto, see pprof/profile.proto): one sample per
// instruction with its accesses, misses per level and L1 misses per kind, at a location that
// carries the inline chain; labels name the instruction's main L1 miss kind and the allocation
// site of the first heap object it missed on. `go tool pprof -top` then ranks functions by any
// of these values (-sample_index), and continuous-profiling services ingest it as it is.
#include <zlib.h>

#include <map>
#include <string>
#include <unordered_map>
#include <vector>

#include "report/common.h"
#include "pprof/profile.pb.h"  // generated from report/pprof/profile.proto
#include "report/report.h"

namespace whymiss::report {
namespace {

namespace pb = perftools::profiles;

class Strings {
 public:
  explicit Strings(pb::Profile* p) : p_(p) { index(""); }
  int64_t index(const std::string& s) {
    auto [it, fresh] = ids_.emplace(s, int64_t(ids_.size()));
    if (fresh) p_->add_string_table(s);
    return it->second;
  }

 private:
  pb::Profile* p_;
  std::unordered_map<std::string, int64_t> ids_;
};

bool gzip(const std::string& in, std::string* out) {
  z_stream z{};
  if (deflateInit2(&z, Z_DEFAULT_COMPRESSION, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK) return false;
  out->resize(deflateBound(&z, uLong(in.size())) + 32);
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(in.data()));
  z.avail_in = uInt(in.size());
  z.next_out = reinterpret_cast<Bytef*>(out->data());
  z.avail_out = uInt(out->size());
  const int rc = deflate(&z, Z_FINISH);
  out->resize(z.total_out);
  deflateEnd(&z);
  return rc == Z_STREAM_END;
}

}  // namespace

bool write_pprof(std::ostream& out, const profile::Profile& p, Namer& names) {
  pb::Profile prof;
  Strings str(&prof);
  const size_t nlevels = std::min<size_t>(p.geometry.levels.size(), profile::kLevels);
  const char* kinds[] = {"", "compulsory", "capacity", "conflict", "true_sharing", "false_sharing"};
  auto type = [&](const std::string& t) {
    pb::ValueType* v = prof.add_sample_type();
    v->set_type(str.index(t));
    v->set_unit(str.index("count"));
  };
  type("accesses");
  for (size_t l = 0; l < nlevels; ++l) type(p.geometry.levels[l].name + "_misses");
  const std::string l1 = nlevels ? p.geometry.levels[0].name : "L1";
  for (int k = 1; k < profile::kKinds; ++k) type(l1 + "_" + kinds[k]);
  prof.set_default_sample_type(str.index(nlevels ? p.geometry.levels[0].name + "_misses" : "accesses"));
  prof.add_comment(str.index(p.meta.mode == uint32_t(profile::Mode::Exact)
                                 ? "whymiss exact mode: every access simulated; values are counted"
                                 : "whymiss sampled mode: values are estimates from samples, not counts"));
  prof.add_comment(str.index("cache: " + p.geometry.to_spec()));
  prof.add_comment(str.index("command: " + p.command));
  if (p.meta.end_ns > p.meta.start_ns) prof.set_duration_nanos(int64_t(p.meta.end_ns - p.meta.start_ns));

  for (size_t m = 0; m < p.modules.size(); ++m) {
    pb::Mapping* mp = prof.add_mapping();
    mp->set_id(m + 1);
    mp->set_memory_start(p.modules[m].rec.start);
    mp->set_memory_limit(p.modules[m].rec.end);
    mp->set_filename(str.index(p.modules[m].path));
    mp->set_has_functions(true);
    mp->set_has_filenames(true);
    mp->set_has_line_numbers(true);
    mp->set_has_inline_frames(true);
  }
  auto mapping_of = [&](uint64_t ip) -> uint64_t {
    for (size_t m = 0; m < p.modules.size(); ++m)
      if (ip >= p.modules[m].rec.start && ip < p.modules[m].rec.end) return m + 1;
    return 0;
  };
  std::map<std::pair<std::string, std::string>, uint64_t> functions;  // (name, file) -> id
  auto function_id = [&](const CodeLoc& c) {
    auto [it, fresh] = functions.emplace(std::pair{c.function, c.file}, functions.size() + 1);
    if (fresh) {
      pb::Function* f = prof.add_function();
      f->set_id(it->second);
      f->set_name(str.index(c.function));
      f->set_system_name(str.index(c.function));
      f->set_filename(str.index(c.file));
    }
    return it->second;
  };
  std::unordered_map<uint64_t, const profile::ObjectRecord*> objects;
  for (const auto& o : p.objects) objects[o.serial] = &o;

  uint64_t next_location = 1;
  for (const auto& ir : p.instructions) {
    pb::Location* loc = prof.add_location();
    loc->set_id(next_location);
    loc->set_mapping_id(mapping_of(ir.ip));
    loc->set_address(ir.ip);
    for (const CodeLoc& c : names.chain(ir.ip)) {
      pb::Line* ln = loc->add_line();
      ln->set_function_id(function_id(c));
      ln->set_line(c.line);
    }
    pb::Sample* s = prof.add_sample();
    s->add_location_id(next_location++);
    s->add_value(int64_t(ir.accesses[0] + ir.accesses[1]));
    for (size_t l = 0; l < nlevels; ++l) {
      uint64_t m = 0;
      for (int k = 1; k < profile::kKinds; ++k) m += ir.misses[l][k];
      s->add_value(int64_t(m));
    }
    int top = 0;
    for (int k = 1; k < profile::kKinds; ++k) {
      s->add_value(int64_t(ir.misses[0][k]));
      if (k > 1 && ir.misses[0][k] > (top ? ir.misses[0][top] : 0)) top = k;
    }
    if (top) {
      pb::Label* lb = s->add_label();
      lb->set_key(str.index("kind"));
      lb->set_str(str.index(kinds[top]));
    }
    if (auto it = objects.find(ir.objects[0]); ir.objects[0] && it != objects.end()) {
      const profile::ObjectRecord& o = *it->second;
      pb::Label* lb = s->add_label();
      lb->set_key(str.index("object"));
      lb->set_str(str.index(o.site < p.sites.size() ? "heap object from " + where(names.site(p.sites[o.site]))
                                                    : "heap object"));
    }
  }
  std::string raw, packed;
  if (!prof.SerializeToString(&raw) || !gzip(raw, &packed)) return false;
  out.write(packed.data(), std::streamsize(packed.size()));
  return bool(out);
}

}  // namespace whymiss::report
