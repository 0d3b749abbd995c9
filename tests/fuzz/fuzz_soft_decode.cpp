// Fuzzes the soft collector's decoder with random code bytes and register states: decode_bytes
// (before execution), decode_after_bytes (after), the boundary heuristic and length decoding
// must never crash or read outside the buffer, and their results must keep their contracts.
#include <sys/ucontext.h>

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "model/profile.h"
#include "runtime/soft/boundary_cache.h"
#include "runtime/soft/decode.h"
#include "runtime/soft/modules.h"

namespace {

void check(bool ok) {
  if (!ok) __builtin_trap();
}

void check_access(whymiss::soft::DecodeStatus st, const whymiss::soft::MemAccess& m,
                  uint64_t ip) {
  using whymiss::soft::DecodeStatus;
  if (st != DecodeStatus::Ok) return;
  check(m.ip == ip && m.length >= 1 && m.length <= 15);
  check(m.count >= 1 && m.count <= whymiss::soft::kMaxMemOperands);
  for (int i = 0; i < m.count; ++i)
    check(m.ops[i].flags != 0 &&
          (m.ops[i].flags & ~(whymiss::profile::kAccessRead | whymiss::profile::kAccessWrite)) == 0);
}

}  // namespace

// The ELF symbol reader on the raw input, with a valid-looking ELF64 header patched in so the
// section table and symbols get exercised: ranges must come out sorted, distinct and non-empty.
static void fuzz_symbols(const uint8_t* data, size_t size) {
  using namespace whymiss::soft::detail;
  if (size < 64) return;
  uint8_t* img = new uint8_t[size];
  std::memcpy(img, data, size);
  const uint8_t ident[] = {0x7f, 'E', 'L', 'F', 2};
  std::memcpy(img, ident, sizeof ident);
  img[58] = 64;  // e_shentsize
  img[59] = 0;
  const size_t n = parse_function_symbols(img, size, 0x1000, 0x100000, nullptr, 0);
  if (n > 0 && n < 100000) {
    FunctionRange* out = new FunctionRange[n];
    const size_t k = parse_function_symbols(img, size, 0x1000, 0x100000, out, n);
    check(k <= n);
    for (size_t i = 0; i < k; ++i) {
      check(out[i].end > out[i].start);
      if (i) check(out[i].start > out[i - 1].start);
    }
    delete[] out;
  }
  delete[] img;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace whymiss::soft;
  fuzz_symbols(data, size);
  // Registers: 16 GPRs, rflags, fs and gs bases, 16 xmm registers (as much as the input gives).
  uint64_t words[19] = {};
  const size_t nw = size < sizeof words ? size : sizeof words;
  std::memcpy(words, data, nw);
  data += nw;
  size -= nw;
  static ucontext_t uc;
  static _libc_fpstate fp;
  std::memset(&uc, 0, sizeof uc);
  std::memset(&fp, 0, sizeof fp);
  const size_t nx = size < sizeof fp._xmm ? size : sizeof fp._xmm;
  std::memcpy(fp._xmm, data, nx);
  data += nx;
  size -= nx;
  for (int i = 0; i < 16; ++i) uc.uc_mcontext.gregs[i] = static_cast<greg_t>(words[i]);
  uc.uc_mcontext.gregs[REG_RIP] = 0;
  uc.uc_mcontext.gregs[REG_EFL] = static_cast<greg_t>(words[16]);
  uc.uc_mcontext.fpregs = (words[16] & 1) ? &fp : nullptr;
  RegisterView view{&uc, words[17], words[18]};

  const uint64_t ip = words[0] ^ words[1];
  // Exactly `size` bytes, in a buffer of its own so any over-read is visible to sanitizers.
  uint8_t* code = new uint8_t[size ? size : 1];
  std::memcpy(code, data, size);
  for (size_t off = 0; off < size && off < 32; ++off) {
    MemAccess m;
    const DecodeStatus a = decode_bytes(code + off, size - off, ip + off, view, &m);
    check_access(a, m, ip + off);
    const DecodeStatus b = decode_after_bytes(code + off, size - off, ip + off, view, &m);
    check_access(b, m, ip + off);
    const uint8_t len = detail::length_at(code + off, size - off);
    check(len <= 15 && len <= size - off);
    if (len == 0) check(a == DecodeStatus::BadBytes && b == DecodeStatus::BadBytes);
  }
  if (size > 0) {
    const unsigned back = detail::heuristic_previous(code, code + size);
    check(back <= 15 && back <= size);
    if (back) check(detail::length_at(code + size - back, back) == back);
  }
  delete[] code;
  return 0;
}
