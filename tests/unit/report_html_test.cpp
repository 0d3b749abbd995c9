// The HTML report (--format html) on synthetic profiles: self-contained, everything from the
// program escaped, the hottest lines annotated in their source read from disk (issue #20 item 1).
// tests/integration/html_check.py opens real reports in Chromium.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "analysis/analysis.h"
#include "report/report.h"

namespace whymiss::report {
namespace {

using namespace profile;
constexpr int kCap = 2;

// Names chosen to break out of HTML if they were not escaped.
class HostileNamer : public Namer {
 public:
  explicit HostileNamer(std::string file) : file_(std::move(file)) {}
  CodeLoc code(uint64_t ip) override {
    return {"f<script>alert(1)</script>", file_, uint32_t(ip & 0xff)};
  }
  std::optional<DataName> global(uint64_t) override { return DataName{"g\"><img src=x onerror=alert(2)>", 0x5000, 64}; }
  CodeLoc site(const SiteRecord&) override { return {"make", file_, 1}; }

 private:
  std::string file_;
};

size_t count(const std::string& s, const std::string& what) {
  size_t n = 0;
  for (size_t at = s.find(what); at != std::string::npos; at = s.find(what, at + 1)) ++n;
  return n;
}

class ReportHtml : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() / ("whymiss_html_test_" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir_);
    src_ = (dir_ / "x<y>.c").string();
    std::ofstream(src_) << "int a;\n"
                        << "void f(void) {\n"
                        << "  for (;;) s += v[i]; /* </script><script>alert(3)</script> */\n"
                        << "}\n";
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  // A capacity problem at line 3 of src_ in a program whose arguments try to end the page.
  Profile profile() const {
    Profile p;
    p.meta.mode = uint32_t(Mode::Exact);
    p.meta.exited = 1;
    p.command = "./prog '</title><script>alert(4)</script>'";
    p.geometry.levels = {{"L1", 32 * 1024, 8, 64}, {"L2", 1 << 20, 16, 64}};
    p.counters.resize(2);
    InstructionRecord r{};
    r.ip = 0x401003;
    r.accesses[0] = 1000000;
    r.misses[0][kCap] = 400000;
    r.misses[1][kCap] = 100000;
    p.instructions.push_back(r);
    p.meta.accesses = 1000000;
    p.counters[0].by_kind[0][0] = 600000;
    p.counters[0].by_kind[kCap][0] = 400000;
    p.counters[1].by_kind[0][0] = 300000;
    p.counters[1].by_kind[kCap][0] = 100000;
    return p;
  }

  std::string render(const Profile& p) const {
    analysis::Analysis a = analysis::analyze(p);
    HostileNamer n(src_);
    Options o;
    o.format = Format::Html;
    std::ostringstream out;
    analysis::NoTypes types;
    write_report(out, p, a, n, types, o);
    return out.str();
  }

  std::filesystem::path dir_;
  std::string src_;
};

TEST_F(ReportHtml, EscapesEverythingFromTheProgram) {
  const std::string page = render(profile());
  // The page's own three scripts (chart data, Chart.js, the drawing script), no other.
  EXPECT_EQ(count(page, "<script"), 3u);
  EXPECT_EQ(count(page, "</script>"), 3u);
  for (const char* raw : {"<script>alert", "<img src=x", "</title><script>"})
    EXPECT_EQ(page.find(raw), std::string::npos) << raw;
  EXPECT_NE(page.find("f&lt;script&gt;alert(1)&lt;/script&gt;"), std::string::npos);
  EXPECT_NE(page.find("&lt;/title&gt;&lt;script&gt;alert(4)"), std::string::npos);
  EXPECT_NE(page.find("x&lt;y&gt;.c"), std::string::npos);
  // No inline event handlers, and a policy that forbids any load.
  EXPECT_EQ(page.find(" onerror="), std::string::npos);
  EXPECT_EQ(page.find(" onload="), std::string::npos);
  EXPECT_NE(page.find("Content-Security-Policy\" content=\"default-src 'none'"), std::string::npos);
}

TEST_F(ReportHtml, SelfContainedWithTheMissKindsChart) {
  const std::string page = render(profile());
  EXPECT_EQ(page.find("src=\"http"), std::string::npos);
  EXPECT_EQ(page.find("href=\"http"), std::string::npos);
  EXPECT_NE(page.find("Chart.js v4"), std::string::npos) << "Chart.js is embedded";
  EXPECT_EQ(page.find("sourceMappingURL"), std::string::npos);
  EXPECT_NE(page.find("data-chart=\"miss_kinds\""), std::string::npos);
  // The chart data: per level, the kinds as shares of its misses (L1: all capacity).
  const size_t data = page.find("<script type=\"application/json\" id=\"whymiss-charts\">");
  ASSERT_NE(data, std::string::npos);
  const std::string json = page.substr(data, page.find("</script>", data) - data);
  EXPECT_NE(json.find("\"label\":\"capacity\""), std::string::npos) << json;
  EXPECT_NE(json.find("[100.0,100.0]"), std::string::npos) << json;
}

TEST_F(ReportHtml, FindingsAndAnnotatedSource) {
  const std::string page = render(profile());
  EXPECT_NE(page.find("1. CAPACITY (application) at L1"), std::string::npos) << page.substr(0, 4000);
  EXPECT_NE(page.find("<strong>Fix:</strong>"), std::string::npos);
  // Line 3 read from disk, escaped, marked hot with its misses per level; lines 1-4 around it.
  const size_t row = page.find("<td class=\"ln\">3</td>");
  ASSERT_NE(row, std::string::npos);
  const std::string tr = page.substr(page.rfind("<tr", row), page.find("</tr>", row) - page.rfind("<tr", row));
  EXPECT_NE(tr.find("class=\"hot\""), std::string::npos) << tr;
  EXPECT_NE(tr.find(">400,000<"), std::string::npos) << tr;
  EXPECT_NE(tr.find(">100,000<"), std::string::npos) << tr;
  EXPECT_NE(tr.find("&lt;/script&gt;&lt;script&gt;alert(3)"), std::string::npos) << tr;
  EXPECT_NE(page.find("<td class=\"ln\">1</td>"), std::string::npos);
  EXPECT_NE(page.find("<td class=\"ln\">4</td>"), std::string::npos);
}

TEST_F(ReportHtml, SourceNotOnDiskStillListsTheLines) {
  std::filesystem::remove(src_);
  const std::string page = render(profile());
  EXPECT_NE(page.find("Hottest source lines"), std::string::npos);
  EXPECT_NE(page.find("The source is not readable here"), std::string::npos);
  EXPECT_EQ(page.find("<table class=\"src\">"), std::string::npos);
}

TEST_F(ReportHtml, NothingFoundSaysSo) {
  Profile p = profile();
  p.instructions.clear();
  p.counters[0] = {};
  p.counters[1] = {};
  p.counters[0].by_kind[0][0] = 1000;
  p.counters[1].by_kind[0][0] = 0;
  const std::string page = render(p);
  EXPECT_NE(page.find("No significant cache problem found."), std::string::npos);
  EXPECT_EQ(page.find("Hottest source lines"), std::string::npos);
}

}  // namespace
}  // namespace whymiss::report
