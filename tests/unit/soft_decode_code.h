// Shared by the soft decoder tests: code assembled into the test binary (soft_decode_code.cpp;
// global labels mark instruction boundaries, the functions are decoded, only wm_spin is ever
// called) and helpers that build register states.
#pragma once
#include <gtest/gtest.h>
#include <ucontext.h>

#include <cstdint>
#include <iterator>

#include "runtime/soft/decode.h"

extern "C" {
extern const uint8_t wm_fn[], wm_fn_end[], wm_i1[], wm_i2[], wm_i3[], wm_i4[], wm_i5[], wm_i6[],
    wm_i7[], wm_i8[], wm_i9[], wm_i10[], wm_i11[], wm_i12[], wm_i13[], wm_i14[], wm_i15[],
    wm_i16[], wm_i17[], wm_i18[], wm_i19[], wm_i20[], wm_i21[], wm_i22[], wm_i23[], wm_i24[],
    wm_i25[], wm_i26[], wm_i27[], wm_i28[], wm_i29[], wm_i30[];
void wm_spin(volatile uint64_t* flag);
extern const uint8_t wm_spin_load[];
extern const uint8_t wm_pad[], wm_big[], wm_small[], wm_small_mid[], wm_data[], wm_nosym[],
    wm_nosym_1[];
}

namespace whymiss::soft::test {

inline uint64_t u(const uint8_t* p) { return reinterpret_cast<uint64_t>(p); }

struct Regs {
  ucontext_t uc{};
  _libc_fpstate fp{};
  RegisterView view;
  Regs() {
    uc.uc_mcontext.fpregs = &fp;
    view.uc = &uc;
  }
  Regs& set(int reg, uint64_t v) {
    uc.uc_mcontext.gregs[reg] = static_cast<greg_t>(v);
    return *this;
  }
};

inline DecodeStatus at(const uint8_t* ip, const Regs& r, MemAccess* m) {
  return decode_at(u(ip), r.view, m);
}
// The instruction starting at ip has just run and `r` is the state after it.
inline DecodeStatus after(const uint8_t* ip, const Regs& r, MemAccess* m) {
  return decode_after_bytes(ip, 15, u(ip), r.view, m);
}

class SoftDecode : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { ASSERT_TRUE(init(1 << 20)); }
};

// Every instruction boundary of wm_fn, in order, and its end.
inline const uint8_t* const kLabels[] = {
    wm_fn,  wm_i1,  wm_i2,  wm_i3,  wm_i4,  wm_i5,  wm_i6,  wm_i7,  wm_i8,  wm_i9,  wm_i10,
    wm_i11, wm_i12, wm_i13, wm_i14, wm_i15, wm_i16, wm_i17, wm_i18, wm_i19, wm_i20, wm_i21,
    wm_i22, wm_i23, wm_i24, wm_i25, wm_i26, wm_i27, wm_i28, wm_i29, wm_i30, wm_fn_end};

}  // namespace whymiss::soft::test
