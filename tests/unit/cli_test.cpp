// Tests of the CLI layer: argument parsing, the JSON writer, the simulate report, and
// `whymiss simulate` end to end through simulate_main with string streams.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "cli/args.h"
#include "cli/output.h"
#include "cli/simulate_cmd.h"
#include "report/json.h"
#include "report/sim_report.h"

namespace whymiss {
namespace {

namespace fs = std::filesystem;

const char* const kSpec3 = "L1=32K:8:64,L2=256K:8:64,L3=1M:16:64";

// ---- A minimal JSON reader, enough to check the reports (and that they are valid JSON). ----

struct Json {
  enum Type { Null, Bool, Number, String, Array, Object } type = Null;
  bool b = false;
  std::string text;  // number literal or string value
  std::vector<Json> items;
  std::vector<std::string> keys;  // of an object, parallel to values
  std::vector<Json> values;

  const Json& operator[](std::string_view k) const {
    for (size_t i = 0; i < keys.size(); ++i) {
      if (keys[i] == k) return values[i];
    }
    ADD_FAILURE() << "no key '" << k << "'";
    static const Json kNull;
    return kNull;
  }
  const Json& operator[](size_t i) const { return items.at(i); }
  uint64_t u() const {
    EXPECT_EQ(type, Number);
    return std::stoull(text);
  }
  double d() const {
    EXPECT_EQ(type, Number);
    return std::stod(text);
  }
  const std::string& s() const {
    EXPECT_EQ(type, String);
    return text;
  }
};

class JsonParser {
 public:
  explicit JsonParser(std::string_view s) : s_(s) {}
  // Parses exactly one value followed only by whitespace; false on any syntax error.
  bool parse(Json* out) {
    if (!value(out, 0)) return false;
    ws();
    return i_ == s_.size();
  }

 private:
  void ws() {
    while (i_ < s_.size() && (s_[i_] == ' ' || s_[i_] == '\n' || s_[i_] == '\t' || s_[i_] == '\r'))
      ++i_;
  }
  bool lit(std::string_view w) {
    if (s_.substr(i_, w.size()) != w) return false;
    i_ += w.size();
    return true;
  }
  bool string(std::string* out) {
    if (i_ >= s_.size() || s_[i_] != '"') return false;
    ++i_;
    while (i_ < s_.size()) {
      unsigned char c = static_cast<unsigned char>(s_[i_++]);
      if (c == '"') return true;
      if (c < 0x20) return false;  // raw control characters are invalid JSON
      if (c != '\\') {
        out->push_back(static_cast<char>(c));
        continue;
      }
      if (i_ >= s_.size()) return false;
      char e = s_[i_++];
      switch (e) {
        case '"':
          out->push_back('"');
          break;
        case '\\':
          out->push_back('\\');
          break;
        case '/':
          out->push_back('/');
          break;
        case 'b':
          out->push_back('\b');
          break;
        case 'f':
          out->push_back('\f');
          break;
        case 'n':
          out->push_back('\n');
          break;
        case 'r':
          out->push_back('\r');
          break;
        case 't':
          out->push_back('\t');
          break;
        case 'u': {
          if (i_ + 4 > s_.size()) return false;
          unsigned cp = std::stoul(std::string(s_.substr(i_, 4)), nullptr, 16);
          i_ += 4;
          if (cp >= 0x80) return false;  // the writer only escapes ASCII control characters
          out->push_back(static_cast<char>(cp));
          break;
        }
        default:
          return false;
      }
    }
    return false;
  }
  bool value(Json* out, int depth) {
    if (depth > 64) return false;
    ws();
    if (i_ >= s_.size()) return false;
    char c = s_[i_];
    if (c == '{') {
      out->type = Json::Object;
      ++i_;
      ws();
      if (i_ < s_.size() && s_[i_] == '}') return ++i_, true;
      while (true) {
        ws();
        std::string k;
        if (!string(&k)) return false;
        ws();
        if (!lit(":")) return false;
        Json v;
        if (!value(&v, depth + 1)) return false;
        out->keys.push_back(std::move(k));
        out->values.push_back(std::move(v));
        ws();
        if (lit("}")) return true;
        if (!lit(",")) return false;
      }
    }
    if (c == '[') {
      out->type = Json::Array;
      ++i_;
      ws();
      if (i_ < s_.size() && s_[i_] == ']') return ++i_, true;
      while (true) {
        Json v;
        if (!value(&v, depth + 1)) return false;
        out->items.push_back(std::move(v));
        ws();
        if (lit("]")) return true;
        if (!lit(",")) return false;
      }
    }
    if (c == '"') {
      out->type = Json::String;
      return string(&out->text);
    }
    if (lit("true")) return out->type = Json::Bool, out->b = true, true;
    if (lit("false")) return out->type = Json::Bool, out->b = false, true;
    if (lit("null")) return out->type = Json::Null, true;
    size_t start = i_;
    if (i_ < s_.size() && s_[i_] == '-') ++i_;
    size_t digits = i_;
    while (i_ < s_.size() && std::isdigit(static_cast<unsigned char>(s_[i_]))) ++i_;
    if (i_ == digits) return false;
    if (s_[digits] == '0' && i_ - digits > 1) return false;  // no leading zeros
    if (i_ < s_.size() && s_[i_] == '.') {
      ++i_;
      size_t frac = i_;
      while (i_ < s_.size() && std::isdigit(static_cast<unsigned char>(s_[i_]))) ++i_;
      if (i_ == frac) return false;
    }
    if (i_ < s_.size() && (s_[i_] == 'e' || s_[i_] == 'E')) {
      ++i_;
      if (i_ < s_.size() && (s_[i_] == '+' || s_[i_] == '-')) ++i_;
      size_t exp = i_;
      while (i_ < s_.size() && std::isdigit(static_cast<unsigned char>(s_[i_]))) ++i_;
      if (i_ == exp) return false;
    }
    out->type = Json::Number;
    out->text = std::string(s_.substr(start, i_ - start));
    return true;
  }

  std::string_view s_;
  size_t i_ = 0;
};

Json parse_json(const std::string& s) {
  Json j;
  EXPECT_TRUE(JsonParser(s).parse(&j)) << "invalid JSON:\n" << s;
  return j;
}

// ---- Running `whymiss simulate` ----

class TempDir {
 public:
  TempDir() {
    std::random_device rd;
    path_ = fs::temp_directory_path() / ("whymiss-cli-test-" + std::to_string(rd()));
    fs::create_directories(path_);
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  std::string write(const std::string& name, const std::string& text) const {
    std::string p = (path_ / name).string();
    std::ofstream(p, std::ios::binary) << text;
    return p;
  }
  std::string file(const std::string& name) const { return (path_ / name).string(); }
  const fs::path& path() const { return path_; }
  std::vector<std::string> entries() const {
    std::vector<std::string> v;
    for (const auto& e : fs::directory_iterator(path_)) v.push_back(e.path().filename().string());
    std::sort(v.begin(), v.end());
    return v;
  }

 private:
  fs::path path_;
};

struct RunResult {
  int rc = -1;
  std::string out, err;
};

RunResult simulate(std::vector<std::string> args, const std::string& stdin_text = "") {
  args.insert(args.begin(), "simulate");
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  std::istringstream in(stdin_text);
  std::ostringstream out, err;
  RunResult r;
  r.rc = cli::simulate_main(static_cast<int>(args.size()), argv.data(), in, out, err);
  r.out = out.str();
  r.err = err.str();
  return r;
}

// The error contract: exit 2, nothing on out, exactly one "whymiss: ..." line on err.
void expect_error(const RunResult& r, const std::string& fragment) {
  EXPECT_EQ(r.rc, 2);
  EXPECT_EQ(r.out, "");
  EXPECT_EQ(r.err.rfind("whymiss: ", 0), 0u) << r.err;
  ASSERT_FALSE(r.err.empty());
  EXPECT_EQ(r.err.back(), '\n');
  EXPECT_EQ(r.err.find('\n'), r.err.size() - 1) << "more than one line: " << r.err;
  EXPECT_NE(r.err.find(fragment), std::string::npos) << "'" << fragment << "' not in: " << r.err;
}

const Json& level(const Json& report, size_t i) {
  return report["totals"]["levels"][i];
}

uint64_t kind(const Json& lv, const char* k, const char* rw = "total") {
  return lv["misses_by_kind"][k][rw].u();
}

// ---- args ----

std::vector<cli::OptionSpec> test_specs() {
  return {{"cache"}, {"output", 'o'}, {"help", 'h', false}, {"verbose", 'v', false}};
}

TEST(Args, LongShortAndPositional) {
  auto r =
      cli::parse_args({"a.trace", "--cache", "X", "--output=out.json", "-v", "b"}, test_specs());
  ASSERT_TRUE(r.ok()) << r.error();
  EXPECT_EQ(r->positional, (std::vector<std::string>{"a.trace", "b"}));
  EXPECT_EQ(*r->get("cache"), "X");
  EXPECT_EQ(*r->get("output"), "out.json");
  EXPECT_TRUE(r->has("verbose"));
  EXPECT_FALSE(r->has("help"));
  EXPECT_EQ(r->get("help"), nullptr);
}

TEST(Args, ShortForms) {
  auto r = cli::parse_args({"-o", "f1"}, test_specs());
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(*r->get("output"), "f1");
  r = cli::parse_args({"-of2"}, test_specs());
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(*r->get("output"), "f2");
  r = cli::parse_args({"-vho", "f3"}, test_specs());  // bundled flags, then one with a value
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(r->has("verbose"));
  EXPECT_TRUE(r->has("help"));
  EXPECT_EQ(*r->get("output"), "f3");
}

TEST(Args, DoubleDashAndStdin) {
  auto r = cli::parse_args({"-", "--", "--cache", "-o"}, test_specs());
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->positional, (std::vector<std::string>{"-", "--cache", "-o"}));
  EXPECT_TRUE(r->options.empty());
}

TEST(Args, LastValueWinsAndEmptyValue) {
  auto r = cli::parse_args({"--cache=A", "--cache", "B", "--output="}, test_specs());
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(*r->get("cache"), "B");
  EXPECT_EQ(*r->get("output"), "");
  EXPECT_EQ(r->options.size(), 3u);
}

TEST(Args, Errors) {
  auto r = cli::parse_args({"--frobnicate"}, test_specs());
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error(), "unknown option '--frobnicate'");
  EXPECT_EQ(cli::parse_args({"--frob=1"}, test_specs()).error(), "unknown option '--frob'");
  EXPECT_EQ(cli::parse_args({"-x"}, test_specs()).error(), "unknown option '-x'");
  EXPECT_EQ(cli::parse_args({"-vx"}, test_specs()).error(), "unknown option '-x' in '-vx'");
  EXPECT_EQ(cli::parse_args({"--cache"}, test_specs()).error(), "option '--cache' needs a value");
  EXPECT_EQ(cli::parse_args({"-o"}, test_specs()).error(), "option '-o' needs a value");
  EXPECT_EQ(cli::parse_args({"--help=yes"}, test_specs()).error(),
            "option '--help' does not take a value");
}

// ---- JsonWriter ----

std::string compact(const std::function<void(JsonWriter&)>& f) {
  std::ostringstream s;
  JsonWriter w(s, 0);
  f(w);
  EXPECT_TRUE(w.done());
  return s.str();
}

std::string escaped(std::string_view in) {
  std::string s;
  JsonWriter::escape(in, &s);
  return s;
}

TEST(JsonWriter, Structure) {
  EXPECT_EQ(compact([](JsonWriter& w) {
              w.begin_object().field("a", 1).key("b").begin_array();
              w.value(true).value(false).null().begin_object().end_object();
              w.begin_array().end_array().end_array().field("c", "x").end_object();
            }),
            R"({"a":1,"b":[true,false,null,{},[]],"c":"x"})");
  EXPECT_EQ(compact([](JsonWriter& w) { w.value(7); }), "7");
  EXPECT_EQ(compact([](JsonWriter& w) { w.begin_array().end_array(); }), "[]");
}

TEST(JsonWriter, Integers) {
  EXPECT_EQ(compact([](JsonWriter& w) {
              w.begin_array().value(0).value(-42).value(std::numeric_limits<uint64_t>::max());
              w.value(std::numeric_limits<int64_t>::min()).value(uint8_t{200}).end_array();
            }),
            "[0,-42,18446744073709551615,-9223372036854775808,200]");
}

TEST(JsonWriter, Doubles) {
  // Rounded to the given decimals, then written in the shortest form that reads back as that
  // number (nlohmann-json's); 0 decimals give an integer where one fits in 64 bits.
  EXPECT_EQ(compact([](JsonWriter& w) {
              w.begin_array().value(0.5, 3).value(2.0 / 3, 4).value(-1.25, 1).value(1234.56, 0);
              w.value(-3.7, 0).value(1e20, 0).value(-0.0001, 2).value(std::nan(""), 2);
              w.value(std::numeric_limits<double>::infinity()).end_array();
            }),
            "[0.5,0.6667,-1.3,1235,-4,1e+20,0.0,null,null]");
  std::string big = compact([](JsonWriter& w) { w.value(std::numeric_limits<double>::max(), 2); });
  EXPECT_EQ(std::stod(big), std::numeric_limits<double>::max());
}

TEST(JsonWriter, StringEscaping) {
  EXPECT_EQ(escaped("plain"), R"("plain")");
  EXPECT_EQ(escaped("q\"b\\s/"), R"("q\"b\\s/")");
  EXPECT_EQ(escaped("\n\r\t\b\f"), R"("\n\r\t\b\f")");
  EXPECT_EQ(escaped(std::string_view("\x00\x01\x1f\x7f", 4)), "\"\\u0000\\u0001\\u001f\x7f\"");  // DEL needs none
}

TEST(JsonWriter, Utf8) {
  // Valid UTF-8 passes through unchanged: 2, 3 and 4-byte sequences.
  EXPECT_EQ(escaped("caf\xC3\xA9 \xE2\x82\xAC \xF0\x9F\x98\x80"),
            "\"caf\xC3\xA9 \xE2\x82\xAC \xF0\x9F\x98\x80\"");
  const std::string kBad = "\xEF\xBF\xBD";  // U+FFFD
  EXPECT_EQ(escaped("a\xFF"
                    "b"),
            "\"a" + kBad + "b\"");                 // invalid byte
  EXPECT_EQ(escaped("\x80"), "\"" + kBad + "\"");  // lone continuation
  EXPECT_EQ(escaped("\xC3"), "\"" + kBad + "\"");  // truncated at the end
  EXPECT_EQ(escaped("\xC3"
                    "A"),
            "\"" + kBad + "A\"");                                        // truncated in the middle
  EXPECT_EQ(escaped("\xC0\xAF"), "\"" + kBad + kBad + "\"");             // overlong '/'
  EXPECT_EQ(escaped("\xE0\x80\xAF"), "\"" + kBad + kBad + kBad + "\"");  // overlong, 3 bytes
  EXPECT_EQ(escaped("\xED\xA0\x80"), "\"" + kBad + kBad + kBad + "\"");  // surrogate U+D800
  EXPECT_EQ(escaped("\xF4\x90\x80\x80"), "\"" + kBad + kBad + kBad + kBad + "\"");  // > U+10FFFF
  EXPECT_EQ(escaped("\xF4\x8F\xBF\xBF"), "\"\xF4\x8F\xBF\xBF\"");  // U+10FFFF is fine
}

TEST(JsonWriter, PrettyOutputParses) {
  std::ostringstream s;
  JsonWriter w(s);
  w.begin_object().field("name", std::string("x\001\xff")).key("list").begin_array();
  for (int i = 0; i < 3; ++i) w.begin_object().field("i", i).field("r", i / 3.0, 2).end_object();
  w.end_array().key("empty").begin_object().end_object().end_object();
  EXPECT_TRUE(w.done());
  Json j = parse_json(s.str());
  EXPECT_EQ(j["name"].s(), "x\001\xEF\xBF\xBD");
  EXPECT_EQ(j["list"].items.size(), 3u);
  EXPECT_EQ(j["list"][2]["r"].text, "0.67");
  EXPECT_EQ(s.str().back(), '\n');
}

// ---- sim report ----

SimReport sample_report(uint64_t big) {
  SimReport r;
  r.trace = "big.trace";
  r.threads = 3;
  r.geometry = CacheGeometry{{{"L1", 48 << 10, 12, 64}, {"L2", 1 << 20, 16, 64}}, "--cache"};
  r.knobs.cores = 3;
  r.counters.accesses = big;
  r.counters.line_accesses = big;
  for (size_t l = 0; l < 2; ++l) {
    for (int k = 0; k < sim::kNumOutcomes; ++k) {
      r.counters.level[l].by_outcome[k][0] = big / 7;
      r.counters.level[l].by_outcome[k][1] = big / 11;
    }
    r.counters.level[l].writebacks = big;
    r.counters.level[l].upgrades = big;
    r.counters.level[l].coherence_invalidations = big;
    r.counters.level[l].back_invalidations = big;
  }
  return r;
}

TEST(SimReport, TextFitsIn100ColumnsWithLargeCounts) {
  std::ostringstream s;
  write_sim_report_text(s, sample_report(999'999'999'999ull));
  std::istringstream lines(s.str());
  std::string line;
  int n = 0;
  while (std::getline(lines, line)) {
    ++n;
    EXPECT_LE(line.size(), 100u) << line;
  }
  EXPECT_GT(n, 10);
  EXPECT_NE(s.str().find("COUNTED"), std::string::npos);
  EXPECT_NE(s.str().find("shared inclusive L2"), std::string::npos) << s.str();
  EXPECT_NE(s.str().find("999,999,999,999"), std::string::npos);
}

TEST(SimReport, JsonOnlyHasGeometryLevels) {
  std::ostringstream s;
  write_sim_report_json(s, sample_report(1000));
  Json j = parse_json(s.str());
  EXPECT_EQ(j["cache"]["levels"].items.size(), 2u);
  EXPECT_EQ(j["totals"]["levels"].items.size(), 2u);
  EXPECT_TRUE(j["cache"]["levels"][1]["shared"].b);
  EXPECT_FALSE(j["cache"]["levels"][0]["shared"].b);
  EXPECT_EQ(j["cache"]["levels"][0]["sets"].u(), 64u);
  EXPECT_EQ(j["cache"]["source"].s(), "--cache");
  const Json& l1 = level(j, 0);
  EXPECT_EQ(kind(l1, "conflict", "read"), 1000u / 7);
  EXPECT_EQ(kind(l1, "conflict", "write"), 1000u / 11);
  EXPECT_EQ(kind(l1, "conflict"), 1000u / 7 + 1000u / 11);
  EXPECT_EQ(l1["misses"].u(), 5 * (1000u / 7 + 1000u / 11));
}

TEST(SimReport, ZeroAccessesHaveZeroMissRatio) {
  SimReport r = sample_report(0);
  std::ostringstream s;
  write_sim_report_json(s, r);
  Json j = parse_json(s.str());
  EXPECT_EQ(level(j, 0)["miss_ratio"].d(), 0.0);
}

// ---- simulate ----

TEST(Simulate, JsonCountsByHand) {
  TempDir dir;
  // Three accesses; the first two touch the same line, the third another line.
  std::string trace = dir.write("three.trace",
                                "# three accesses\n"
                                "0 R 0x1000 8\n"
                                "0 W 0x1008 8\n"
                                "0 R 0x2000 4\n");
  RunResult r = simulate({trace, "--cache", kSpec3, "--format", "json"});
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_EQ(r.err, "");
  Json j = parse_json(r.out);
  EXPECT_EQ(j["tool"].s(), "whymiss");
  EXPECT_EQ(j["command"].s(), "simulate");
  EXPECT_EQ(j["how"].s(), "counted");
  EXPECT_EQ(j["schema_version"].u(), 1u);
  EXPECT_EQ(j["trace"].s(), trace);
  EXPECT_EQ(j["cores"].u(), 1u);
  EXPECT_EQ(j["policy"].s(), "lru");
  EXPECT_TRUE(j["inclusive_llc"].b);
  EXPECT_EQ(j["cache"]["source"].s(), "--cache");
  ASSERT_EQ(j["cache"]["levels"].items.size(), 3u);
  EXPECT_EQ(j["cache"]["levels"][0]["name"].s(), "L1");
  EXPECT_EQ(j["cache"]["levels"][0]["size"].u(), 32768u);
  EXPECT_EQ(j["cache"]["levels"][0]["ways"].u(), 8u);
  EXPECT_EQ(j["cache"]["levels"][0]["line"].u(), 64u);
  EXPECT_EQ(j["cache"]["levels"][0]["sets"].u(), 64u);
  EXPECT_EQ(j["cache"]["levels"][2]["sets"].u(), 1024u);
  EXPECT_FALSE(j["cache"]["levels"][1]["shared"].b);
  EXPECT_TRUE(j["cache"]["levels"][2]["shared"].b);

  EXPECT_EQ(j["totals"]["accesses"].u(), 3u);
  EXPECT_EQ(j["totals"]["line_accesses"].u(), 3u);
  ASSERT_EQ(j["totals"]["levels"].items.size(), 3u);
  const Json& l1 = level(j, 0);
  EXPECT_EQ(l1["name"].s(), "L1");
  EXPECT_EQ(l1["accesses"].u(), 3u);
  EXPECT_EQ(l1["hits"].u(), 1u);  // the write to the line just read
  EXPECT_EQ(l1["misses"].u(), 2u);
  EXPECT_EQ(l1["miss_ratio"].text, "0.666667");
  EXPECT_EQ(kind(l1, "compulsory", "read"), 2u);
  EXPECT_EQ(kind(l1, "compulsory", "write"), 0u);
  EXPECT_EQ(kind(l1, "compulsory"), 2u);
  for (const char* k : {"capacity", "conflict", "true_sharing", "false_sharing"}) {
    EXPECT_EQ(kind(l1, k), 0u) << k;
  }
  for (size_t i = 1; i < 3; ++i) {  // each L1 miss goes to L2, and each L2 miss to L3
    EXPECT_EQ(level(j, i)["accesses"].u(), 2u);
    EXPECT_EQ(kind(level(j, i), "compulsory"), 2u);
  }
  EXPECT_EQ(l1["writebacks"].u(), 0u);
  EXPECT_EQ(l1["coherence_invalidations"].u(), 0u);
  EXPECT_EQ(l1["back_invalidations"].u(), 0u);
  EXPECT_EQ(l1["upgrades"].u(), 0u);
}

TEST(Simulate, StraddlingAccessIsTwoLineAccesses) {
  TempDir dir;
  std::string trace = dir.write("s.trace", "0 R 0x103c 8\n");
  RunResult r = simulate({trace, "--cache", "L1=1K:2:64", "--format=json"});
  ASSERT_EQ(r.rc, 0) << r.err;
  Json j = parse_json(r.out);
  EXPECT_EQ(j["totals"]["accesses"].u(), 1u);
  EXPECT_EQ(j["totals"]["line_accesses"].u(), 2u);
  EXPECT_EQ(level(j, 0)["accesses"].u(), 2u);
  EXPECT_EQ(j["totals"]["levels"].items.size(), 1u);  // only levels of the geometry
  EXPECT_FALSE(j["cache"]["levels"][0]["shared"].b);  // a single level is private
}

TEST(Simulate, MalformedTraceReportsFileAndLineAndPrintsNothing) {
  TempDir dir;
  std::string trace = dir.write("bad.trace", "0 R 0x10 8\n# ok so far\n0 R 0x10\n0 R 0x20 8\n");
  for (const char* fmt : {"text", "json"}) {
    RunResult r = simulate({trace, "--cache", kSpec3, "--format", fmt});
    expect_error(r, trace + ":3: missing SIZE field");
    EXPECT_EQ(r.err, "whymiss: " + trace + ":3: missing SIZE field\n");
  }
}

TEST(Simulate, MalformedLastLineStillPrintsNothing) {
  // The bad line is the very last: a streaming design would already have simulated the rest.
  TempDir dir;
  std::string body;
  for (int i = 0; i < 1000; ++i) body += "0 R " + std::to_string(i * 64) + " 8\n";
  std::string trace = dir.write("late.trace", body + "0 R 0x10 8 oops");
  RunResult r = simulate({trace, "--cache", kSpec3});
  expect_error(r, trace + ":1001: trailing field 'oops'");
}

TEST(Simulate, Stdin) {
  RunResult r = simulate({"-", "--cache", kSpec3, "--format", "json"}, "0 R 0x40 8\n1 R 0x40 8\n");
  ASSERT_EQ(r.rc, 0) << r.err;
  Json j = parse_json(r.out);
  EXPECT_EQ(j["trace"].s(), "-");
  EXPECT_EQ(j["cores"].u(), 2u);
  EXPECT_EQ(level(j, 0)["accesses"].u(), 2u);

  // The text report names standard input as error sentences do.
  RunResult text = simulate({"-", "--cache", kSpec3}, "0 R 0x40 8\n");
  EXPECT_EQ(text.out.rfind("whymiss simulate: <stdin>: ", 0), 0u) << text.out;

  RunResult bad = simulate({"-", "--cache", kSpec3}, "0 R 0x40 8\n1 Z 0x40 8\n");
  expect_error(bad, "<stdin>:2: expected R or W, got 'Z'");
}

TEST(Simulate, EmptyTraceIsAnEmptyReport) {
  RunResult r = simulate({"-", "--cache", kSpec3, "--format", "json"}, "# nothing\n");
  ASSERT_EQ(r.rc, 0) << r.err;
  Json j = parse_json(r.out);
  EXPECT_EQ(j["totals"]["accesses"].u(), 0u);
  EXPECT_EQ(j["cores"].u(), 1u);
  EXPECT_EQ(j["threads"].u(), 0u);
}

TEST(Simulate, OneCorePerThreadByDefault) {
  RunResult r = simulate({"-", "--cache", kSpec3, "--format", "json"},
                         "5 R 0 8\n9 R 0 8\n5 R 0 8\n1048575 R 0 8\n");
  ASSERT_EQ(r.rc, 0) << r.err;
  Json j = parse_json(r.out);
  EXPECT_EQ(j["cores"].u(), 3u);
  EXPECT_EQ(j["threads"].u(), 3u);
}

// Threads 0 and `partner` alternately write one line; thread 1 touches another line once.
std::string ping_pong(int partner, bool partner_first) {
  std::string t = partner_first ? "0 W 0x1000 8\n" + std::to_string(partner) + " W 0x1008 8\n"
                                : "0 W 0x1000 8\n";
  t += "1 W 0x9000 8\n";
  for (int i = 0; i < 20; ++i) t += "0 W 0x1000 8\n" + std::to_string(partner) + " W 0x1008 8\n";
  return t;
}

TEST(Simulate, CoresFoldThreadsByOrderOfFirstAppearance) {
  auto sharing_misses = [](const RunResult& r) {
    EXPECT_EQ(r.rc, 0) << r.err;
    Json j = parse_json(r.out);
    return kind(level(j, 0), "false_sharing") + kind(level(j, 0), "true_sharing");
  };
  // Default: three threads on three cores; the ping-pong between 0 and 2 is false sharing.
  RunResult three = simulate({"-", "--cache", kSpec3, "--format", "json"}, ping_pong(2, false));
  EXPECT_EQ(parse_json(three.out)["cores"].u(), 3u);
  EXPECT_GT(sharing_misses(three), 30u);

  // --cores 1: everything on one core, no coherence at all.
  RunResult one =
      simulate({"-", "--cache", kSpec3, "--format", "json", "--cores", "1"}, ping_pong(2, false));
  EXPECT_EQ(parse_json(one.out)["cores"].u(), 1u);
  EXPECT_EQ(sharing_misses(one), 0u);
  EXPECT_EQ(level(parse_json(one.out), 0)["misses"].u(), 2u);  // two lines, first touches

  // --cores 2, thread order 0, 1, 2: dense indexes 0, 1, 2 -> cores 0, 1, 0. Threads 0 and 2
  // share core 0, so no sharing misses.
  RunResult folded =
      simulate({"-", "--cache", kSpec3, "--format", "json", "--cores", "2"}, ping_pong(2, false));
  EXPECT_EQ(parse_json(folded.out)["cores"].u(), 2u);
  EXPECT_EQ(sharing_misses(folded), 0u);

  // --cores 2, thread order 0, 2, 1: thread 2 is second, so it gets core 1 and the ping-pong
  // between cores 0 and 1 is back.
  RunResult apart =
      simulate({"-", "--cache", kSpec3, "--format", "json", "--cores", "2"}, ping_pong(2, true));
  EXPECT_GT(sharing_misses(apart), 30u);
}

TEST(Simulate, TextReport) {
  RunResult r = simulate(
      {"-", "--cache", kSpec3, "--cores", "2", "--policy", "plru", "--llc", "non-inclusive"},
      "0 W 0x40 8\n1 W 0x48 8\n0 W 0x40 8\n");
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_EQ(r.err, "");
  for (const char* s : {"COUNTED", "L1", "L2", "L3", "2 cores", "plru", "non-inclusive",
                        "false sharing", "compulsory", "writebacks", "back-invalidations",
                        "coherence invalidations", "miss ratio", "32K 8-way"}) {
    EXPECT_NE(r.out.find(s), std::string::npos) << "'" << s << "' missing from:\n" << r.out;
  }
  std::istringstream lines(r.out);
  for (std::string line; std::getline(lines, line);) EXPECT_LE(line.size(), 100u) << line;
}

TEST(Simulate, KnobsReachTheReport) {
  RunResult r =
      simulate({"-", "--cache", kSpec3, "--policy=random", "--llc=non-inclusive", "--format=json"},
               "0 R 0 8\n");
  ASSERT_EQ(r.rc, 0) << r.err;
  Json j = parse_json(r.out);
  EXPECT_EQ(j["policy"].s(), "random");
  EXPECT_FALSE(j["inclusive_llc"].b);
}

TEST(Simulate, BadOptionValues) {
  TempDir dir;
  std::string trace = dir.write("ok.trace", "0 R 0x10 8\n");
  expect_error(simulate({trace, "--cache", "L1=banana"}), "invalid --cache 'L1=banana': ");
  expect_error(simulate({trace, "--cache", ""}), "invalid --cache");
  expect_error(simulate({trace, "--cores", "0"}), "--cores '0' is not a whole number from 1 to");
  expect_error(simulate({trace, "--cores", "abc"}), "--cores 'abc'");
  expect_error(simulate({trace, "--cores", "99999999999999999999"}), "--cores");
  expect_error(simulate({trace, "--cores", "1025"}), "--cores '1025'");
  expect_error(simulate({trace, "--policy", "fifo"}), "fifo");
  expect_error(simulate({trace, "--llc", "exclusive"}),
               "unknown --llc 'exclusive'; expected inclusive or non-inclusive");
  expect_error(simulate({trace, "--format", "xml"}),
               "unknown --format 'xml'; expected text or json");
  expect_error(simulate({trace, "--frobnicate"}), "unknown option '--frobnicate'");
  expect_error(simulate({trace, "--cache"}), "option '--cache' needs a value");
}

TEST(Simulate, BadTraceArguments) {
  TempDir dir;
  expect_error(simulate({}), "simulate needs a TRACE");
  expect_error(simulate({"--cache", kSpec3}), "simulate needs a TRACE");
  std::string a = dir.write("a.trace", "0 R 0 8\n");
  expect_error(simulate({a, a}), "simulate takes one TRACE");
  std::string missing = dir.file("missing.trace");
  expect_error(simulate({missing, "--cache", kSpec3}),
               "cannot open trace '" + missing + "': no such file");
  expect_error(simulate({dir.path().string(), "--cache", kSpec3}), "it is a directory");
}

TEST(Simulate, TooManyThreadsNeedsCores) {
  std::string t;
  for (int i = 0; i < 1100; ++i) t += std::to_string(i) + " R 0 8\n";
  expect_error(simulate({"-", "--cache", kSpec3}, t), "--cores");
  RunResult r = simulate({"-", "--cache", kSpec3, "--cores", "16", "--format", "json"}, t);
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_EQ(parse_json(r.out)["threads"].u(), 1100u);
}

TEST(Simulate, Help) {
  RunResult r = simulate({"--help"});
  EXPECT_EQ(r.rc, 0);
  EXPECT_NE(r.out.find("usage: whymiss simulate TRACE"), std::string::npos);
  EXPECT_EQ(r.err, "");
}

TEST(Simulate, OutputFileIsWrittenWhole) {
  TempDir dir;
  std::string trace = dir.write("t.trace", "0 R 0x10 8\n");
  std::string report = dir.file("report.json");
  RunResult r = simulate({trace, "--cache", kSpec3, "--format", "json", "--output", report});
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_EQ(r.out, "");
  std::ifstream f(report);
  std::string text((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  EXPECT_EQ(parse_json(text)["totals"]["accesses"].u(), 1u);
  // No temporary file is left next to it.
  EXPECT_EQ(dir.entries(), (std::vector<std::string>{"report.json", "t.trace"}));
  auto perms = fs::status(report).permissions();
  EXPECT_NE(perms & fs::perms::owner_read, fs::perms::none);

  // -o overwrites.
  RunResult text_run = simulate({trace, "--cache", kSpec3, "-o", report});
  ASSERT_EQ(text_run.rc, 0) << text_run.err;
  std::ifstream g(report);
  std::string text2((std::istreambuf_iterator<char>(g)), std::istreambuf_iterator<char>());
  EXPECT_NE(text2.find("COUNTED"), std::string::npos);
}

TEST(Simulate, OutputFileNotCreatedOrReplacedOnError) {
  TempDir dir;
  std::string bad = dir.write("bad.trace", "0 R 0x10 8\n0 R\n");
  std::string report = dir.file("report.json");
  expect_error(simulate({bad, "--cache", kSpec3, "--output", report}), ":2: missing ADDRESS");
  EXPECT_FALSE(fs::exists(report));
  EXPECT_EQ(dir.entries(), (std::vector<std::string>{"bad.trace"}));

  // An existing report survives a failed run untouched.
  dir.write("report.json", "old");
  expect_error(simulate({bad, "--cache", kSpec3, "--output", report}), ":2:");
  std::ifstream f(report);
  std::string text((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  EXPECT_EQ(text, "old");
}

TEST(Simulate, OutputPathProblemsAreReportedBeforeSimulating) {
  TempDir dir;
  std::string trace = dir.write("t.trace", "0 R 0x10 8\n");
  expect_error(simulate({trace, "--cache", kSpec3, "-o", dir.file("no/such/dir/r.json")}),
               "does not exist");
  expect_error(simulate({trace, "--cache", kSpec3, "-o", dir.path().string()}),
               "it is a directory");
  EXPECT_EQ(dir.entries(), (std::vector<std::string>{"t.trace"}));
}

TEST(Output, WriteFileAtomically) {
  TempDir dir;
  std::string p = dir.file("x.txt");
  ASSERT_TRUE(cli::write_file_atomically(p, "hello").ok());
  ASSERT_TRUE(cli::write_file_atomically(p, "bye").ok());
  std::ifstream f(p);
  std::string text((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  EXPECT_EQ(text, "bye");
  EXPECT_EQ(dir.entries(), (std::vector<std::string>{"x.txt"}));
  EXPECT_FALSE(cli::write_file_atomically(dir.file("nope/x.txt"), "x").ok());
}

// The bundled examples show the kind of miss they are named after.
TEST(Examples, EachShowsItsKind) {
  struct Case {
    const char* file;
    const char* cores;
    const char* kind;
  };
  const std::string kZen5 = "L1=48K:12:64,L2=1M:16:64,L3=32M:16:64";
  for (const Case& c :
       {Case{"false-sharing", "2", "false_sharing"}, Case{"true-sharing", "2", "true_sharing"},
        Case{"conflict", "1", "conflict"}, Case{"capacity", "1", "capacity"}}) {
    std::string path = std::string(WHYMISS_SOURCE_DIR) + "/examples/" + c.file + ".trace";
    RunResult r = simulate({path, "--cache", kZen5, "--cores", c.cores, "--format", "json"});
    ASSERT_EQ(r.rc, 0) << r.err;
    const Json j = parse_json(r.out);
    const Json& l1 = level(j, 0);
    uint64_t repeat_misses = l1["misses"].u() - kind(l1, "compulsory");
    EXPECT_GT(repeat_misses, 500u) << c.file;
    EXPECT_GT(kind(l1, c.kind), repeat_misses * 9 / 10) << c.file << ": " << r.out;
  }
}

}  // namespace
}  // namespace whymiss
