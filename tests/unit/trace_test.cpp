#include "model/trace.h"

#include <gtest/gtest.h>

#include <sstream>
#include <string>
#include <vector>

namespace whymiss {
namespace {

TraceAccess parse_ok(std::string_view line) {
  TraceAccess a;
  Result<bool> r = parse_trace_line(line, &a);
  EXPECT_TRUE(r.ok()) << "line '" << line << "': " << (r.ok() ? "" : r.error());
  EXPECT_TRUE(r.ok() && r.value()) << "line '" << line << "' was not an access";
  return a;
}

std::string parse_err(std::string_view line) {
  TraceAccess a;
  a.addr = 12345;
  Result<bool> r = parse_trace_line(line, &a);
  EXPECT_FALSE(r.ok()) << "line '" << line << "' was accepted";
  EXPECT_EQ(a.addr, 12345u) << "output touched on error";
  return r.ok() ? "" : r.error();
}

bool is_skipped(std::string_view line) {
  TraceAccess a;
  Result<bool> r = parse_trace_line(line, &a);
  return r.ok() && !r.value();
}

TEST(ParseTraceLine, BasicAccess) {
  TraceAccess a = parse_ok("0 W 0x7f0000001000 8");
  EXPECT_EQ(a.thread, 0u);
  EXPECT_TRUE(a.write);
  EXPECT_EQ(a.addr, 0x7f0000001000u);
  EXPECT_EQ(a.size, 8u);
}

TEST(ParseTraceLine, ReadAndWriteAnyCase) {
  EXPECT_FALSE(parse_ok("1 R 10 4").write);
  EXPECT_FALSE(parse_ok("1 r 10 4").write);
  EXPECT_TRUE(parse_ok("1 W 10 4").write);
  EXPECT_TRUE(parse_ok("1 w 10 4").write);
}

TEST(ParseTraceLine, AddressForms) {
  EXPECT_EQ(parse_ok("0 R 0x1f 1").addr, 0x1fu);
  EXPECT_EQ(parse_ok("0 R 0X1F 1").addr, 0x1fu);
  EXPECT_EQ(parse_ok("0 R 1f 1").addr, 0x1fu);
  EXPECT_EQ(parse_ok("0 R aBcDeF 1").addr, 0xabcdefu);
  EXPECT_EQ(parse_ok("0 R 0 1").addr, 0u);
  EXPECT_EQ(parse_ok("0 R 0x0 1").addr, 0u);
  EXPECT_EQ(parse_ok("0 R 0xffffffffffffffff 1").addr, ~uint64_t{0});
  // Leading zeros do not count towards the 16 digits.
  EXPECT_EQ(parse_ok("0 R 0x0000000000000000000000001234 1").addr, 0x1234u);
  EXPECT_EQ(parse_ok("0 R 00000000000000000ffffffffffffffff 1").addr, ~uint64_t{0});
}

TEST(ParseTraceLine, ThreadAndSizeLimits) {
  EXPECT_EQ(parse_ok("1048575 R 0 1").thread, kMaxTraceThread - 1);
  EXPECT_EQ(parse_ok("007 R 0 1").thread, 7u);
  EXPECT_EQ(parse_ok("0 R 0 4096").size, 4096u);
  EXPECT_EQ(parse_ok("0 R 0 1").size, 1u);
  EXPECT_EQ(parse_ok("0 R 0 0004096").size, 4096u);
}

TEST(ParseTraceLine, Whitespace) {
  TraceAccess a = parse_ok("  \t3\t\tw  0x40 \t 16  \t");
  EXPECT_EQ(a.thread, 3u);
  EXPECT_TRUE(a.write);
  EXPECT_EQ(a.addr, 0x40u);
  EXPECT_EQ(a.size, 16u);
  EXPECT_EQ(parse_ok("0 R 0x40 8\r").size, 8u);  // CRLF line ending
}

TEST(ParseTraceLine, Comments) {
  EXPECT_EQ(parse_ok("0 R 0x40 8 # trailing comment").size, 8u);
  EXPECT_EQ(parse_ok("0 R 0x40 8# glued comment").size, 8u);
  EXPECT_EQ(parse_ok("0 R 0x40 8#").size, 8u);
  EXPECT_TRUE(is_skipped("# a comment line"));
  EXPECT_TRUE(is_skipped("   # indented comment 0 R 0 8"));
  EXPECT_TRUE(is_skipped("#0 R 0x40 8"));
}

TEST(ParseTraceLine, BlankLines) {
  EXPECT_TRUE(is_skipped(""));
  EXPECT_TRUE(is_skipped("   "));
  EXPECT_TRUE(is_skipped("\t \t"));
  EXPECT_TRUE(is_skipped("\r"));
}

TEST(ParseTraceLine, MissingFields) {
  EXPECT_EQ(parse_err("0"), "missing R|W field after the thread number");
  EXPECT_EQ(parse_err("0 R"), "missing ADDRESS field");
  EXPECT_EQ(parse_err("0 R 0x10"), "missing SIZE field");
  EXPECT_EQ(parse_err("0 R 0x10 # 8"), "missing SIZE field");
  EXPECT_EQ(parse_err("0 R 0x10\r"), "missing SIZE field");
}

TEST(ParseTraceLine, TrailingField) {
  EXPECT_EQ(parse_err("0 R 0x10 8 foo"), "trailing field 'foo'");
  EXPECT_EQ(parse_err("0 R 0x10 8 9 10"), "trailing field '9'");
  // A bad earlier field is reported before a missing or extra later one.
  EXPECT_EQ(parse_err("0 R zz"), "address 'zz' is not hexadecimal");
  EXPECT_EQ(parse_err("0 R 0x10 0 extra"), "size 0 is out of range 1..4096");
}

TEST(ParseTraceLine, BadReadWrite) {
  EXPECT_EQ(parse_err("0 X 0x10 8"), "expected R or W, got 'X'");
  EXPECT_EQ(parse_err("0 RW 0x10 8"), "expected R or W, got 'RW'");
  EXPECT_EQ(parse_err("0 read 0x10 8"), "expected R or W, got 'read'");
  EXPECT_EQ(parse_err("0 0x10 R 8"), "expected R or W, got '0x10'");
}

TEST(ParseTraceLine, BadThread) {
  EXPECT_EQ(parse_err("x R 0x10 8"), "thread 'x' is not a decimal number");
  EXPECT_EQ(parse_err("-1 R 0x10 8"), "thread '-1' is not a decimal number");
  EXPECT_EQ(parse_err("+1 R 0x10 8"), "thread '+1' is not a decimal number");
  EXPECT_EQ(parse_err("0x1 R 0x10 8"), "thread '0x1' is not a decimal number");
  EXPECT_EQ(parse_err("R 0x10 8"), "thread 'R' is not a decimal number");
  EXPECT_EQ(parse_err("1048576 R 0x10 8"), "thread '1048576' is out of range 0..1048575");
  EXPECT_EQ(parse_err("99999999999999999999999 R 0x10 8"),
            "thread '99999999999999999999999' is out of range 0..1048575");
}

TEST(ParseTraceLine, BadAddress) {
  EXPECT_EQ(parse_err("0 R zz 8"), "address 'zz' is not hexadecimal");
  EXPECT_EQ(parse_err("0 R 0x 8"), "address '0x' is not hexadecimal");
  EXPECT_EQ(parse_err("0 R 0x12g4 8"), "address '0x12g4' is not hexadecimal");
  EXPECT_EQ(parse_err("0 R -10 8"), "address '-10' is not hexadecimal");
  EXPECT_EQ(parse_err("0 R 0x0x10 8"), "address '0x0x10' is not hexadecimal");
  EXPECT_EQ(parse_err("0 R 0x10000000000000000 8"),
            "address '0x10000000000000000' does not fit in 64 bits");
  EXPECT_EQ(parse_err("0 R 0xfffffffffffffffff 8"),
            "address '0xfffffffffffffffff' does not fit in 64 bits");
}

TEST(ParseTraceLine, BadSize) {
  EXPECT_EQ(parse_err("0 R 0x10 0"), "size 0 is out of range 1..4096");
  EXPECT_EQ(parse_err("0 R 0x10 000"), "size 0 is out of range 1..4096");
  EXPECT_EQ(parse_err("0 R 0x10 4097"), "size '4097' is out of range 1..4096");
  EXPECT_EQ(parse_err("0 R 0x10 18446744073709551617"),
            "size '18446744073709551617' is out of range 1..4096");
  EXPECT_EQ(parse_err("0 R 0x10 8b"), "size '8b' is not a decimal number");
  EXPECT_EQ(parse_err("0 R 0x10 0x8"), "size '0x8' is not a decimal number");
  EXPECT_EQ(parse_err("0 R 0x10 -8"), "size '-8' is not a decimal number");
}

TEST(ParseTraceLine, AccessMustNotWrapAddressSpace) {
  EXPECT_EQ(parse_ok("0 R 0xfffffffffffffff8 8").addr, 0xfffffffffffffff8u);
  EXPECT_EQ(parse_ok("0 R 0xffffffffffffffff 1").size, 1u);
  EXPECT_EQ(parse_err("0 R 0xfffffffffffffff9 8"),
            "access of 8 bytes at 0xfffffffffffffff9 runs past the end of the 64-bit address "
            "space");
}

TEST(ParseTraceLine, QuotesUnprintableAndLongTokens) {
  EXPECT_EQ(parse_err(std::string_view("0 \x01\xff 0x10 8")), "expected R or W, got '\\x01\\xff'");
  EXPECT_EQ(parse_err(std::string_view("0 R\0 0x10 8", 11)), "expected R or W, got 'R\\x00'");
  std::string longtok(100, 'q');
  EXPECT_EQ(parse_err("0 R 0x10 8 " + longtok), "trailing field '" + std::string(32, 'q') + "...'");
}

TEST(ParseTraceLine, ErrorsAreOneLine) {
  for (const char* line : {"0", "0 X 1 1", "0 R 1 1 \n", "0 R zz\n 8", "\n\n0 Q 0 0"}) {
    TraceAccess a;
    Result<bool> r = parse_trace_line(line, &a);
    if (!r.ok()) {
      EXPECT_EQ(r.error().find('\n'), std::string::npos) << r.error();
    }
  }
}

// read_trace

struct Collected {
  std::vector<TraceAccess> got;
  Status status = Ok{};
};

Collected read_all(const std::string& text, const std::string& name = "t.trace") {
  std::istringstream in(text);
  Collected c;
  c.status = read_trace(in, name, [&](const TraceAccess& a) { c.got.push_back(a); });
  return c;
}

TEST(ReadTrace, ReadsEveryAccessInOrder) {
  Collected c = read_all(
      "# header\n"
      "0 R 0x10 8\n"
      "\n"
      "1 W 0x20 4  # comment\n"
      "   \n"
      "2 r 30 1\n");
  ASSERT_TRUE(c.status.ok()) << c.status.error();
  ASSERT_EQ(c.got.size(), 3u);
  EXPECT_EQ(c.got[0].addr, 0x10u);
  EXPECT_EQ(c.got[1].thread, 1u);
  EXPECT_TRUE(c.got[1].write);
  EXPECT_EQ(c.got[2].size, 1u);
}

TEST(ReadTrace, EmptyInputs) {
  for (const char* text : {"", "\n", "\n\n\n", "# only a comment", "# c\r\n\r\n"}) {
    Collected c = read_all(text);
    EXPECT_TRUE(c.status.ok()) << c.status.error();
    EXPECT_TRUE(c.got.empty());
  }
}

TEST(ReadTrace, LastLineWithoutNewline) {
  Collected c = read_all("0 R 0x10 8\n1 W 0x20 4");
  ASSERT_TRUE(c.status.ok()) << c.status.error();
  ASSERT_EQ(c.got.size(), 2u);
  EXPECT_EQ(c.got[1].size, 4u);
}

TEST(ReadTrace, CrLfLines) {
  Collected c = read_all("# windows\r\n0 R 0x10 8\r\n\r\n1 W 0x20 4\r\n");
  ASSERT_TRUE(c.status.ok()) << c.status.error();
  EXPECT_EQ(c.got.size(), 2u);
}

TEST(ReadTrace, ErrorNamesFileAndLine) {
  Collected c = read_all("# header\n0 R 0x10 8\n\n0 W 0x10 0\n1 R 0x40 8\n", "app.trace");
  ASSERT_FALSE(c.status.ok());
  EXPECT_EQ(c.status.error(), "app.trace:4: size 0 is out of range 1..4096");
  // The sink saw only the lines before the bad one.
  ASSERT_EQ(c.got.size(), 1u);
  EXPECT_EQ(c.got[0].addr, 0x10u);
}

TEST(ReadTrace, ErrorOnFirstAndLastLine) {
  Collected first = read_all("0 Q 0 8\n0 R 0 8\n", "f");
  EXPECT_EQ(first.status.error(), "f:1: expected R or W, got 'Q'");
  EXPECT_TRUE(first.got.empty());
  Collected last = read_all("0 R 0 8\n0 R 0 8\n0 R 0", "f");
  EXPECT_EQ(last.status.error(), "f:3: missing SIZE field");
  EXPECT_EQ(last.got.size(), 2u);
}

TEST(ReadTrace, LineNumbersCountCrLfAndBlankLines) {
  Collected c = read_all("\r\n\r\n# c\r\n0 R 0 8\r\n7\r\n", "x");
  EXPECT_EQ(c.status.error(), "x:5: missing R|W field after the thread number");
  EXPECT_EQ(c.got.size(), 1u);
}

TEST(ReadTrace, LinesAcrossReadChunks) {
  // Enough lines to cross the 1 MiB read chunk several times at unaligned offsets.
  std::string text;
  const int n = 200000;
  for (int i = 0; i < n; ++i) {
    text += std::to_string(i % 7) + (i % 3 ? " R 0x" : " W 0x") + std::to_string(i) + " " +
            std::to_string(1 + i % 64) + "\n";
  }
  Collected c = read_all(text);
  ASSERT_TRUE(c.status.ok()) << c.status.error();
  ASSERT_EQ(c.got.size(), static_cast<size_t>(n));
  for (int i = 0; i < n; i += 997) {
    EXPECT_EQ(c.got[i].thread, static_cast<uint32_t>(i % 7));
    EXPECT_EQ(c.got[i].addr, std::stoull(std::to_string(i), nullptr, 16));
    EXPECT_EQ(c.got[i].size, static_cast<uint32_t>(1 + i % 64));
  }
  // An error far into the input still gets its exact line number.
  text += "0 R 0x1 8 extra\n";
  Collected bad = read_all(text, "big");
  EXPECT_EQ(bad.status.error(), "big:" + std::to_string(n + 1) + ": trailing field 'extra'");
  EXPECT_EQ(bad.got.size(), static_cast<size_t>(n));
}

TEST(ReadTrace, LongCommentLinesAreFine) {
  std::string text = "# " + std::string(300000, 'c') + "\n0 R 0x10 8\n";
  Collected c = read_all(text);
  ASSERT_TRUE(c.status.ok()) << c.status.error();
  EXPECT_EQ(c.got.size(), 1u);
}

TEST(ReadTrace, OverlongLineIsAnError) {
  std::string text = "0 R 0x10 8\n" + std::string(3u << 20, '#') + "\n0 R 0x10 8\n";
  Collected c = read_all(text, "huge");
  EXPECT_EQ(c.status.error(), "huge:2: line is longer than 1048576 bytes");
  EXPECT_EQ(c.got.size(), 1u);
  // Also without any newline at all.
  Collected d = read_all(std::string(3u << 20, 'a'), "nonl");
  EXPECT_EQ(d.status.error(), "nonl:1: line is longer than 1048576 bytes");
}

TEST(ReadTrace, BinaryGarbageIsAnErrorNotACrash) {
  std::string junk;
  for (int i = 0; i < 4096; ++i) junk += static_cast<char>((i * 131) & 0xff);
  Collected c = read_all(junk, "bin");
  ASSERT_FALSE(c.status.ok());
  EXPECT_EQ(c.status.error().rfind("bin:", 0), 0u) << c.status.error();
  EXPECT_EQ(c.status.error().find('\n'), std::string::npos);
}

TEST(ReadTrace, NulBytesInsideALine) {
  std::string text("0 R 0x10 8\n0 R 0x1\0 8\n", 22);
  Collected c = read_all(text, "z");
  EXPECT_EQ(c.status.error(), "z:2: address '0x1\\x00' is not hexadecimal");
}

}  // namespace
}  // namespace whymiss
