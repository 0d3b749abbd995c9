// The soft collector's decoder (see decode.h): effective addresses from a signal context.
//
// Choices documented here because the header only states the contract:
// - Not memory accesses: lea (address generation), nop with a memory operand, prefetch* (they do
//   not stall the pipeline, so a time-weighted sample on them says nothing about a miss), and
//   MIB operands (bndldx/bndstx). Control flow through registers has no memory operand.
// - Stack operands (push/pop/call/ret/pushf/popf/enter/leave) are 8 bytes (2 with 0x66) at
//   rsp - size for writes and rsp for reads, evaluated on the registers before the instruction.
// - Gathers/scatters report their first element only (index lane 0 of xmm0-15, read from the
//   context's fpregs, sign-extended for dword indices), size one element; the write mask is
//   ignored. AVX-512 masked loads/stores report the full vector width.
// - Conditional accesses (cmov with a memory source, masked moves) are reported as accesses.
// - After the fact (samples), register updates that can be undone are: rsp by push/pop/pushf/
//   popf (pop %rsp is Clobbered), rbp/rsp by leave (the slot read was [rsp - 8]), rsi/rdi by
//   string ops (one element back, or forward when DF is set: a completed rep op reports its last
//   iteration; one that ran zero times is misreported one element early). enter is Clobbered.
//   Any other write, even conditional (cmpxchg's rax, cmov), to a register an address uses means
//   Clobbered; so does a write to a gather's vector index.
// - Not modelled: xlat's al index (reported as [rbx]), pop to a memory operand addressed through
//   rsp (evaluated with rsp before the pop, the CPU uses it after).
#include "runtime/soft/decode.h"

#include <Zydis/Zydis.h>

#include <atomic>
#include <cstring>

#include "model/profile.h"
#include "runtime/soft/boundary_cache.h"
#include "runtime/soft/modules.h"

namespace whymiss::soft {
namespace {

using namespace detail;

static_assert(profile::kAccessRead == 1 && profile::kAccessWrite == 2);

// gregs index of each Zydis GPR64 id (rax rcx rdx rbx rsp rbp rsi rdi r8..r15).
constexpr int kGreg[16] = {REG_RAX, REG_RCX, REG_RDX, REG_RBX, REG_RSP, REG_RBP, REG_RSI, REG_RDI,
                           REG_R8,  REG_R9,  REG_R10, REG_R11, REG_R12, REG_R13, REG_R14, REG_R15};
constexpr int kRcx = 1, kRsp = 4, kRbp = 5;
constexpr uint64_t kDirectionFlag = 1u << 10;

std::atomic<uint64_t> g_no_symbol{0}, g_bad_bytes{0}, g_heuristic{0};
void bump(std::atomic<uint64_t>& c) { c.fetch_add(1, std::memory_order_relaxed); }

struct State {
  uint64_t gpr[16] = {};
  uint64_t rflags = 0;
  const ucontext_t* uc = nullptr;
  uint64_t fs = 0, gs = 0;
};

State load(const RegisterView& v) {
  State s;
  s.uc = v.uc;
  s.fs = v.fs_base;
  s.gs = v.gs_base;
  if (v.uc) {
    for (int i = 0; i < 16; ++i) s.gpr[i] = static_cast<uint64_t>(v.uc->uc_mcontext.gregs[kGreg[i]]);
    s.rflags = static_cast<uint64_t>(v.uc->uc_mcontext.gregs[REG_EFL]);
  }
  return s;
}

bool decode_full(const uint8_t* code, size_t len, ZydisDecodedInstruction* in,
                 ZydisDecodedOperand* ops) {
  ZydisDecoder dec;
  ZydisDecoderInit(&dec, ZYDIS_MACHINE_MODE_LONG_64, ZYDIS_STACK_WIDTH_64);
  return ZYAN_SUCCESS(ZydisDecoderDecodeFull(&dec, code, len < 15 ? len : 15, in, ops));
}

// Zydis GPR64 id of a general-purpose register of any width, or -1.
int gpr_id(ZydisRegister r) {
  switch (ZydisRegisterGetClass(r)) {
    case ZYDIS_REGCLASS_GPR8: case ZYDIS_REGCLASS_GPR16:
    case ZYDIS_REGCLASS_GPR32: case ZYDIS_REGCLASS_GPR64:
      return ZydisRegisterGetId(ZydisRegisterGetLargestEnclosing(ZYDIS_MACHINE_MODE_LONG_64, r));
    default:
      return -1;
  }
}

bool is_vector(ZydisRegister r) {
  const ZydisRegisterClass c = ZydisRegisterGetClass(r);
  return c == ZYDIS_REGCLASS_XMM || c == ZYDIS_REGCLASS_YMM || c == ZYDIS_REGCLASS_ZMM;
}

bool gpr_value(const State& s, ZydisRegister r, uint64_t* v) {
  const int id = gpr_id(r);
  if (id < 0) return false;
  const uint64_t x = s.gpr[id];
  switch (ZydisRegisterGetClass(r)) {
    case ZYDIS_REGCLASS_GPR64: *v = x; return true;
    case ZYDIS_REGCLASS_GPR32: *v = x & 0xffffffffu; return true;
    case ZYDIS_REGCLASS_GPR16: *v = x & 0xffffu; return true;
    default: return false;
  }
}

// Lane 0 of a VSIB index register; dword indices are sign-extended.
bool vsib_index(const State& s, const ZydisDecodedInstruction& in, ZydisRegister r, uint64_t* v) {
  const int id = ZydisRegisterGetId(r);
  if (!s.uc || !s.uc->uc_mcontext.fpregs || id < 0 || id >= 16) return false;
  const uint32_t* lane = s.uc->uc_mcontext.fpregs->_xmm[id].element;
  // The mnemonic says the index width: v(p)gather/scatter + 'd' or 'q' (…dd, …qps, …dps, …).
  const char* m = ZydisMnemonicGetString(in.mnemonic);
  const char* p = m ? std::strstr(m, "gather") : nullptr;
  if (!p && m) p = std::strstr(m, "scatter");
  bool dword = true;
  if (p) {
    p += p[0] == 'g' ? 6 : 7;
    if (p[0] == 'p' && p[1] == 'f') p += 3;  // gather/scatter prefetch: …pf0dps
    dword = *p == 'd';
  }
  *v = dword ? static_cast<uint64_t>(static_cast<int64_t>(static_cast<int32_t>(lane[0])))
             : (static_cast<uint64_t>(lane[1]) << 32 | lane[0]);
  return true;
}

bool is_stack_slot(const ZydisDecodedOperand& op) {
  return op.visibility == ZYDIS_OPERAND_VISIBILITY_HIDDEN && op.mem.segment == ZYDIS_REGISTER_SS &&
         op.mem.base == ZYDIS_REGISTER_RSP;
}

bool rep_string(const ZydisDecodedInstruction& in) {
  return in.meta.category == ZYDIS_CATEGORY_STRINGOP &&
         (in.attributes & (ZYDIS_ATTRIB_HAS_REP | ZYDIS_ATTRIB_HAS_REPE | ZYDIS_ATTRIB_HAS_REPNE));
}

uint64_t rep_count(const ZydisDecodedInstruction& in, const State& s) {
  return in.address_width == 32 ? s.gpr[kRcx] & 0xffffffffu : s.gpr[kRcx];
}

uint8_t step_stop_of(const ZydisDecodedInstruction& in) {
  switch (in.mnemonic) {
    case ZYDIS_MNEMONIC_SYSCALL:
      return kStepSyscall;
    case ZYDIS_MNEMONIC_SYSENTER: case ZYDIS_MNEMONIC_INT: case ZYDIS_MNEMONIC_INT1:
    case ZYDIS_MNEMONIC_INT3: case ZYDIS_MNEMONIC_INTO:
      return kStepKernel;
    case ZYDIS_MNEMONIC_PUSHF: case ZYDIS_MNEMONIC_PUSHFD: case ZYDIS_MNEMONIC_PUSHFQ:
    case ZYDIS_MNEMONIC_POPF: case ZYDIS_MNEMONIC_POPFD: case ZYDIS_MNEMONIC_POPFQ:
    case ZYDIS_MNEMONIC_IRET: case ZYDIS_MNEMONIC_IRETD: case ZYDIS_MNEMONIC_IRETQ:
      return kStepFlags;
    default:
      return kStepFree;
  }
}

// Memory operands of the instruction, evaluated on the registers it reads (its inputs).
DecodeStatus evaluate(const ZydisDecodedInstruction& in, const ZydisDecodedOperand* ops,
                      uint64_t ip, const State& s, bool after, MemAccess* out) {
  out->ip = ip;
  out->length = in.length;
  out->count = 0;
  out->step_stop = step_stop_of(in);
  switch (in.meta.category) {
    case ZYDIS_CATEGORY_NOP: case ZYDIS_CATEGORY_WIDENOP:
    case ZYDIS_CATEGORY_PREFETCH: case ZYDIS_CATEGORY_PREFETCHWT1:
      return DecodeStatus::NotMemory;
    default:
      break;
  }
  // Before a rep string op with a zero count: it will access nothing. (After one, the count is
  // always zero; the caller has rewound rsi/rdi to the last iteration.)
  if (!after && rep_string(in) && rep_count(in, s) == 0) return DecodeStatus::NotMemory;
  for (int i = 0; i < in.operand_count && out->count < kMaxMemOperands; ++i) {
    const ZydisDecodedOperand& op = ops[i];
    if (op.type != ZYDIS_OPERAND_TYPE_MEMORY) continue;
    if (op.mem.type != ZYDIS_MEMOP_TYPE_MEM && op.mem.type != ZYDIS_MEMOP_TYPE_VSIB) continue;
    uint32_t size = op.size / 8;
    if (op.mem.type == ZYDIS_MEMOP_TYPE_VSIB && op.element_size) size = op.element_size / 8;
    uint64_t a = 0, v = 0;
    if (is_stack_slot(op)) {
      a = s.gpr[kRsp] - ((op.actions & ZYDIS_OPERAND_ACTION_MASK_WRITE) ? size : 0);
    } else {
      if (op.mem.base == ZYDIS_REGISTER_RIP || op.mem.base == ZYDIS_REGISTER_EIP) {
        a = ip + in.length;
      } else if (op.mem.base != ZYDIS_REGISTER_NONE) {
        if (!gpr_value(s, op.mem.base, &a)) return DecodeStatus::BadBytes;
      }
      if (op.mem.index != ZYDIS_REGISTER_NONE) {
        const bool ok = op.mem.type == ZYDIS_MEMOP_TYPE_VSIB ? vsib_index(s, in, op.mem.index, &v)
                                                             : gpr_value(s, op.mem.index, &v);
        if (!ok) return DecodeStatus::BadBytes;
        a += v * (op.mem.scale ? op.mem.scale : 1);
      }
      a += static_cast<uint64_t>(op.mem.disp.value);
      if (in.address_width == 32) a &= 0xffffffffu;
    }
    if (op.mem.segment == ZYDIS_REGISTER_FS) a += s.fs;
    if (op.mem.segment == ZYDIS_REGISTER_GS) a += s.gs;
    MemOperand& m = out->ops[out->count++];
    m.stack = is_stack_slot(op);
    m.addr = a;
    m.size = static_cast<uint16_t>(size > UINT16_MAX ? UINT16_MAX : size);
    m.flags = ((op.actions & ZYDIS_OPERAND_ACTION_MASK_READ) ? profile::kAccessRead : 0) |
              ((op.actions & ZYDIS_OPERAND_ACTION_MASK_WRITE) ? profile::kAccessWrite : 0);
  }
  return out->count ? DecodeStatus::Ok : DecodeStatus::NotMemory;
}

// After-the-fact: rewinds the implicit register updates that can be undone, then refuses if the
// instruction overwrote any other register its addresses use.
DecodeStatus evaluate_after(const ZydisDecodedInstruction& in, const ZydisDecodedOperand* ops,
                            uint64_t ip, State s, MemAccess* out) {
  out->ip = ip;
  out->length = in.length;
  out->count = 0;
  out->step_stop = step_stop_of(in);
  switch (in.meta.category) {
    case ZYDIS_CATEGORY_CALL: case ZYDIS_CATEGORY_RET: case ZYDIS_CATEGORY_UNCOND_BR:
    case ZYDIS_CATEGORY_SYSRET:
      return DecodeStatus::NoBoundary;  // execution continued elsewhere, not at the next ip
    default:
      break;
  }
  uint32_t restored = 0;  // bit per GPR id whose pre-instruction value was recomputed
  uint32_t stack = 0;     // size of the stack slot, if any
  for (int i = 0; i < in.operand_count; ++i)
    if (ops[i].type == ZYDIS_OPERAND_TYPE_MEMORY && is_stack_slot(ops[i])) stack = ops[i].size / 8;
  switch (in.mnemonic) {
    case ZYDIS_MNEMONIC_PUSH: case ZYDIS_MNEMONIC_PUSHF: case ZYDIS_MNEMONIC_PUSHFD:
    case ZYDIS_MNEMONIC_PUSHFQ:
      s.gpr[kRsp] += stack;
      restored |= 1u << kRsp;
      break;
    case ZYDIS_MNEMONIC_POP: case ZYDIS_MNEMONIC_POPF: case ZYDIS_MNEMONIC_POPFD:
    case ZYDIS_MNEMONIC_POPFQ:
      s.gpr[kRsp] -= stack;  // pop %rsp is caught below: its explicit destination is rsp
      restored |= 1u << kRsp;
      break;
    case ZYDIS_MNEMONIC_LEAVE:  // rsp = rbp + 8 afterwards; the slot read was [old rbp]
      s.gpr[kRbp] = s.gpr[kRsp] - 8;
      restored |= 1u << kRsp | 1u << kRbp;
      break;
    case ZYDIS_MNEMONIC_ENTER:
      return DecodeStatus::Clobbered;  // rsp moved by an amount we do not model
    default:
      break;
  }
  if (in.meta.category == ZYDIS_CATEGORY_STRINGOP) {
    // rsi/rdi moved by one element per iteration, backwards when DF is set.
    for (int i = 0; i < in.operand_count; ++i) {
      const ZydisDecodedOperand& op = ops[i];
      if (op.type != ZYDIS_OPERAND_TYPE_MEMORY) continue;
      const int id = gpr_id(op.mem.base);
      if (id < 0 || (restored & (1u << id))) continue;
      const uint64_t step = op.size / 8;
      s.gpr[id] = (s.rflags & kDirectionFlag) ? s.gpr[id] + step : s.gpr[id] - step;
      restored |= 1u << id;
    }
  }
  uint32_t needed = 0;  // GPR ids the addresses use
  ZydisRegister vindex = ZYDIS_REGISTER_NONE;
  for (int i = 0; i < in.operand_count; ++i) {
    const ZydisDecodedOperand& op = ops[i];
    if (op.type != ZYDIS_OPERAND_TYPE_MEMORY || op.mem.type == ZYDIS_MEMOP_TYPE_AGEN) continue;
    const int b = gpr_id(op.mem.base), x = gpr_id(op.mem.index);
    if (b >= 0) needed |= 1u << b;
    if (x >= 0) needed |= 1u << x;
    if (op.mem.type == ZYDIS_MEMOP_TYPE_VSIB) vindex = op.mem.index;
  }
  for (int i = 0; i < in.operand_count; ++i) {
    const ZydisDecodedOperand& op = ops[i];
    if (op.type != ZYDIS_OPERAND_TYPE_REGISTER || !(op.actions & ZYDIS_OPERAND_ACTION_MASK_WRITE))
      continue;
    const int id = gpr_id(op.reg.value);
    if (id >= 0) {
      const bool undone = op.visibility == ZYDIS_OPERAND_VISIBILITY_HIDDEN && (restored & (1u << id));
      if (!undone && (needed & (1u << id))) return DecodeStatus::Clobbered;
    } else if (vindex != ZYDIS_REGISTER_NONE && is_vector(op.reg.value) &&
               ZydisRegisterGetId(op.reg.value) == ZydisRegisterGetId(vindex)) {
      return DecodeStatus::Clobbered;
    }
  }
  return evaluate(in, ops, ip, s, /*after=*/true, out);
}

// Cheap test on raw bytes, before a full decode: legacy prefixes with F2/F3, optional REX, then
// a string opcode (movs/cmps/stos/lods/scas).
bool looks_like_rep_string(const uint8_t* p, size_t avail) {
  bool rep = false;
  for (size_t i = 0; i < avail && i < 15; ++i) {
    const uint8_t b = p[i];
    if (b == 0xF2 || b == 0xF3) { rep = true; continue; }
    if (b == 0xF0 || b == 0x2E || b == 0x36 || b == 0x3E || b == 0x26 || b == 0x64 || b == 0x65 ||
        b == 0x66 || b == 0x67 || (b >= 0x40 && b <= 0x4F))
      continue;
    return rep && ((b >= 0xA4 && b <= 0xA7) || (b >= 0xAA && b <= 0xAF));
  }
  return false;
}

}  // namespace

bool init(size_t arena_bytes) {
  g_no_symbol = g_bad_bytes = g_heuristic = 0;
  return load_modules() && cache_init(arena_bytes);
}

void refresh_modules() { load_modules(); }

DecodeStatus decode_bytes(const uint8_t* code, size_t len, uint64_t ip, const RegisterView& regs,
                          MemAccess* out) {
  ZydisDecodedInstruction in;
  ZydisDecodedOperand ops[ZYDIS_MAX_OPERAND_COUNT];
  if (!decode_full(code, len, &in, ops)) return DecodeStatus::BadBytes;
  return evaluate(in, ops, ip, load(regs), /*after=*/false, out);
}

DecodeStatus decode_after_bytes(const uint8_t* code, size_t len, uint64_t ip,
                                const RegisterView& regs, MemAccess* out) {
  ZydisDecodedInstruction in;
  ZydisDecodedOperand ops[ZYDIS_MAX_OPERAND_COUNT];
  if (!decode_full(code, len, &in, ops)) return DecodeStatus::BadBytes;
  return evaluate_after(in, ops, ip, load(regs), out);
}

namespace {

// jcc condition codes (the low nibble of the short form's opcode 0x70-0x7F), or -1.
int jcc_condition(ZydisMnemonic m) {
  switch (m) {
    case ZYDIS_MNEMONIC_JO: return 0;    case ZYDIS_MNEMONIC_JNO: return 1;
    case ZYDIS_MNEMONIC_JB: return 2;    case ZYDIS_MNEMONIC_JNB: return 3;
    case ZYDIS_MNEMONIC_JZ: return 4;    case ZYDIS_MNEMONIC_JNZ: return 5;
    case ZYDIS_MNEMONIC_JBE: return 6;   case ZYDIS_MNEMONIC_JNBE: return 7;
    case ZYDIS_MNEMONIC_JS: return 8;    case ZYDIS_MNEMONIC_JNS: return 9;
    case ZYDIS_MNEMONIC_JP: return 10;   case ZYDIS_MNEMONIC_JNP: return 11;
    case ZYDIS_MNEMONIC_JL: return 12;   case ZYDIS_MNEMONIC_JNL: return 13;
    case ZYDIS_MNEMONIC_JLE: return 14;  case ZYDIS_MNEMONIC_JNLE: return 15;
    default: return -1;
  }
}

bool relative_target(const ZydisDecodedInstruction& in, const ZydisDecodedOperand* ops,
                     uint64_t ip, uint64_t* target) {
  if (in.operand_count_visible != 1 || ops[0].type != ZYDIS_OPERAND_TYPE_IMMEDIATE ||
      !ops[0].imm.is_relative)
    return false;
  ZyanU64 t = 0;
  if (!ZYAN_SUCCESS(ZydisCalcAbsoluteAddress(&in, &ops[0], ip, &t))) return false;
  *target = t;
  return true;
}

uint8_t run_role(const ZydisDecodedInstruction& in, const ZydisDecodedOperand* ops, uint64_t ip,
                 RunInfo* run) {
  if (step_stop_of(in) != kStepFree || rep_string(in)) return kRunStop;
  switch (in.mnemonic) {
    case ZYDIS_MNEMONIC_UD0: case ZYDIS_MNEMONIC_UD1: case ZYDIS_MNEMONIC_UD2:
    case ZYDIS_MNEMONIC_HLT: case ZYDIS_MNEMONIC_XBEGIN: case ZYDIS_MNEMONIC_XABORT:
    case ZYDIS_MNEMONIC_XEND: case ZYDIS_MNEMONIC_WRFSBASE: case ZYDIS_MNEMONIC_WRGSBASE:
    case ZYDIS_MNEMONIC_ENCLU: case ZYDIS_MNEMONIC_UIRET:
      return kRunStop;
    default:
      break;
  }
  if (in.address_width != 64) return kRunStop;  // a 32-bit rip or stack would need care
  // A 66h prefix on a near transfer: Intel ignores it, AMD truncates rip (and the stack slot)
  // to 16 bits; compilers never emit it, so it is stepped rather than guessed.
  // (With REX.W, as in the TLS call `66 66 48 e8`, both ignore it.)
  if ((in.attributes & ZYDIS_ATTRIB_HAS_OPERANDSIZE) && !in.raw.rex.W &&
      (in.meta.category == ZYDIS_CATEGORY_COND_BR || in.meta.category == ZYDIS_CATEGORY_UNCOND_BR ||
       in.meta.category == ZYDIS_CATEGORY_CALL || in.meta.category == ZYDIS_CATEGORY_RET))
    return kRunStop;
  // Far transfers (lret, ljmp, lcall: Zydis names them RET/JMP/CALL) change cs too. (Short and
  // near ones are both fine: `jmp rel8` is SHORT.)
  if ((in.mnemonic == ZYDIS_MNEMONIC_RET || in.mnemonic == ZYDIS_MNEMONIC_JMP ||
       in.mnemonic == ZYDIS_MNEMONIC_CALL) && in.meta.branch_type == ZYDIS_BRANCH_TYPE_FAR)
    return kRunStop;
  const int cond = jcc_condition(in.mnemonic);
  if (cond >= 0 || in.mnemonic == ZYDIS_MNEMONIC_JMP) {
    if (in.operand_width != 64 || !relative_target(in, ops, ip, &run->target)) return kRunStop;
    run->cond = cond >= 0 ? uint8_t(cond) : 16;
    return kRunBranch;
  }
  if (in.mnemonic == ZYDIS_MNEMONIC_CALL)
    return in.operand_width == 64 && relative_target(in, ops, ip, &run->target) ? kRunCall : kRunStop;
  if (in.mnemonic == ZYDIS_MNEMONIC_RET) {
    if (in.operand_width != 64 || in.operand_count_visible > 1) return kRunStop;
    if (in.operand_count_visible == 1) {
      if (ops[0].type != ZYDIS_OPERAND_TYPE_IMMEDIATE) return kRunStop;
      run->pop = uint16_t(ops[0].imm.value.u);
    }
    return kRunRet;
  }
  // Any other transfer (jrcxz, loop, indirect): stepped. (Not by ZYDIS_ATTRIB_IS_RELATIVE:
  // Zydis sets it for rip-relative data operands too.)
  if (in.meta.category == ZYDIS_CATEGORY_COND_BR ||
      in.meta.category == ZYDIS_CATEGORY_UNCOND_BR || in.meta.category == ZYDIS_CATEGORY_CALL ||
      in.meta.category == ZYDIS_CATEGORY_RET)
    return kRunStop;
  for (int i = 0; i < in.operand_count; ++i) {
    const ZydisDecodedOperand& op = ops[i];
    if (op.type == ZYDIS_OPERAND_TYPE_MEMORY && op.mem.type == ZYDIS_MEMOP_TYPE_VSIB) return kRunStop;
    if (op.type != ZYDIS_OPERAND_TYPE_REGISTER || !(op.actions & ZYDIS_OPERAND_ACTION_MASK_WRITE))
      continue;
    const ZydisRegisterClass c = ZydisRegisterGetClass(op.reg.value);
    if (c == ZYDIS_REGCLASS_IP || c == ZYDIS_REGCLASS_SEGMENT) return kRunStop;
  }
  return kRunPlain;
}

}  // namespace

DecodeStatus decode_step(const uint8_t* code, size_t len, uint64_t ip, const RegisterView& regs,
                         MemAccess* out, RunInfo* run) {
  *run = RunInfo{};
  ZydisDecodedInstruction in;
  ZydisDecodedOperand ops[ZYDIS_MAX_OPERAND_COUNT];
  if (!decode_full(code, len, &in, ops)) {
    out->ip = ip;
    out->length = 0;
    out->count = 0;
    out->step_stop = 0;
    return DecodeStatus::BadBytes;
  }
  run->role = run_role(in, ops, ip, run);
  for (int i = 0; i < in.operand_count; ++i) {
    const ZydisDecodedOperand& op = ops[i];
    if (op.type == ZYDIS_OPERAND_TYPE_MEMORY &&
        (op.mem.base == ZYDIS_REGISTER_RIP || op.mem.base == ZYDIS_REGISTER_EIP))
      run->rip_relative = true;
    // An implicit stack slot's address is never recorded (MemOperand::stack), so it needs no
    // register the stretch must know: push; push runs as one stretch.
    if (op.type == ZYDIS_OPERAND_TYPE_MEMORY && op.mem.type != ZYDIS_MEMOP_TYPE_AGEN && !is_stack_slot(op)) {
      const int b = gpr_id(op.mem.base), x = gpr_id(op.mem.index);
      if (b >= 0) run->address_regs |= 1u << b;
      if (x >= 0) run->address_regs |= 1u << x;
    } else if (op.type == ZYDIS_OPERAND_TYPE_REGISTER && (op.actions & ZYDIS_OPERAND_ACTION_MASK_WRITE)) {
      const int id = gpr_id(op.reg.value);
      if (id >= 0) run->written_regs |= 1u << id;
    }
  }
  return evaluate(in, ops, ip, load(regs), /*after=*/false, out);
}

void set_patched_byte(bool (*fn)(uint64_t, uint8_t*)) { set_patched_byte_hook(fn); }

bool branch_taken(uint8_t cond, uint64_t f) {
  if (cond >= 16) return true;
  const bool cf = f & 1, pf = f >> 2 & 1, zf = f >> 6 & 1, sf = f >> 7 & 1, of = f >> 11 & 1;
  bool t = false;
  switch (cond >> 1) {
    case 0: t = of; break;
    case 1: t = cf; break;
    case 2: t = zf; break;
    case 3: t = cf || zf; break;
    case 4: t = sf; break;
    case 5: t = pf; break;
    case 6: t = sf != of; break;
    default: t = zf || sf != of; break;
  }
  return (cond & 1) ? !t : t;
}

DecodeStatus decode_at(uint64_t ip, const RegisterView& regs, MemAccess* out) {
  size_t avail = 15;
  if (const ModuleTable* t = current_modules())
    if (const CodeSegment* seg = find_segment(*t, ip)) avail = seg->hi - ip < 15 ? seg->hi - ip : 15;
  const DecodeStatus st = decode_bytes(reinterpret_cast<const uint8_t*>(ip), avail, ip, regs, out);
  if (st == DecodeStatus::BadBytes) bump(g_bad_bytes);
  return st;
}

uint8_t instruction_length(uint64_t ip) {
  size_t avail = 15;
  if (const ModuleTable* t = current_modules())
    if (const CodeSegment* seg = find_segment(*t, ip)) avail = seg->hi - ip < 15 ? seg->hi - ip : 15;
  return length_at(reinterpret_cast<const uint8_t*>(ip), avail);
}

DecodeStatus decode_previous(uint64_t next_ip, const RegisterView& regs, MemAccess* out) {
  const ModuleTable* t = current_modules();
  const CodeSegment* seg = t ? find_segment(*t, next_ip - 1) : nullptr;
  if (!seg) {
    bump(g_no_symbol);
    return DecodeStatus::NoBoundary;
  }
  // An interrupted rep string op: next_ip is the instruction itself (see decode.h).
  const size_t ahead = next_ip < seg->hi ? seg->hi - next_ip : 0;
  const auto* at = reinterpret_cast<const uint8_t*>(next_ip);
  if (ahead && looks_like_rep_string(at, ahead)) {
    ZydisDecodedInstruction in;
    ZydisDecodedOperand ops[ZYDIS_MAX_OPERAND_COUNT];
    const State s = load(regs);
    if (decode_full(at, ahead, &in, ops) && rep_string(in) && rep_count(in, s) != 0)
      return evaluate(in, ops, next_ip, s, /*after=*/false, out);
  }
  const Module& m = t->modules[seg->module];
  FunctionRange f;
  uint64_t prev = 0;
  if (find_function(m, *seg, next_ip - 1, &f)) {
    bool hit = false;
    const Lookup r = cache_previous(f.start, f.end, m.id, next_ip, &prev, &hit);
    if (r == Lookup::Full) return DecodeStatus::NoBoundary;
    if (r == Lookup::NotBoundary) {
      bump(g_bad_bytes);
      return DecodeStatus::NoBoundary;
    }
  } else {
    bump(g_no_symbol);
    const uint64_t lo = next_ip - seg->lo > kHeuristicWindow ? next_ip - kHeuristicWindow : seg->lo;
    const unsigned back = heuristic_previous(reinterpret_cast<const uint8_t*>(lo), at);
    if (back == 0) return DecodeStatus::NoBoundary;
    bump(g_heuristic);
    prev = next_ip - back;
  }
  ZydisDecodedInstruction in;
  ZydisDecodedOperand ops[ZYDIS_MAX_OPERAND_COUNT];
  uint8_t copy[15];
  const uint8_t* bytes = program_bytes(reinterpret_cast<const uint8_t*>(prev), next_ip - prev, copy);
  if (!decode_full(bytes, next_ip - prev, &in, ops) || in.length != next_ip - prev) {
    bump(g_bad_bytes);
    return DecodeStatus::BadBytes;
  }
  return evaluate_after(in, ops, prev, load(regs), out);
}

DecodeStats stats() {
  const CacheCounters c = cache_counters();
  return {c.functions_cached, c.full, g_no_symbol.load(std::memory_order_relaxed),
          g_bad_bytes.load(std::memory_order_relaxed), c.hits,
          g_heuristic.load(std::memory_order_relaxed)};
}

}  // namespace whymiss::soft
