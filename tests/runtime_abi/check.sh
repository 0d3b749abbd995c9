#!/usr/bin/env bash
# Proof that whymiss's tsan ABI layer (src/runtime/exact/tsan_abi.cpp) stands in for libtsan with
# both GCC and Clang: compiles the C and C++ test programs with -fsanitize=thread using each
# compiler at -O0 and -O2 (plus option variants), links them WITHOUT -fsanitize=thread against the
# ABI archive and the recording sink, and runs them.
#
# Fails (exit 1) if any compile or link fails, if an object references a __tsan_* symbol the
# archive does not define, if an executable still has an undefined __tsan_* symbol or needs libtsan,
# if the entry/exit-disable flag does not take effect, or if any test program reports a failure.
#
# usage: check.sh <libwhymiss_tsan_abi.a> <recording_sink.o> <source dir> <work dir>
set -uo pipefail

if [[ $# -ne 4 ]]; then
  echo "usage: $0 <abi archive> <sink object> <source dir> <work dir>" >&2
  exit 2
fi
ABI_LIB=$1
SINK_OBJ=$2
SRC=$3
WORK=$4
mkdir -p "$WORK"

fail=0
ok() { printf '  ok    %s\n' "$*"; }
bad() {
  printf '  FAIL  %s\n' "$*"
  fail=1
}

for tool in gcc g++ clang clang++ nm readelf; do
  command -v "$tool" >/dev/null || { echo "missing tool: $tool" >&2; exit 1; }
done
[[ -f $ABI_LIB ]] || { echo "missing $ABI_LIB" >&2; exit 1; }
[[ -f $SINK_OBJ ]] || { echo "missing $SINK_OBJ" >&2; exit 1; }

# The recommended instrumentation flags (docs/tsan-abi.md).
COMMON=(-fsanitize=thread -mcx16 -g -pthread -I"$SRC")
GCC_FLAGS=(--param=tsan-instrument-func-entry-exit=0
  -fno-builtin-memcpy -fno-builtin-memset -fno-builtin-memmove -Wno-tsan)
CLANG_FLAGS=(-mllvm -tsan-instrument-func-entry-exit=0 -mllvm -tsan-instrument-read-before-write=1
  -mprefer-vector-width=128)
WRAP=(-Wl,--wrap=memcpy,--wrap=memset,--wrap=memmove,--wrap=__memcpy_chk,--wrap=__memset_chk,--wrap=__memmove_chk)

DEFINED=$(nm --defined-only "$ABI_LIB" 2>/dev/null | awk '$2 == "T" {print $3}' | grep '^__tsan_' | sort -u)

# build <name> <compiler> <source> "<compile flags>" "<link flags>" [expect-entry-exit]
build() {
  local name=$1 cc=$2 src=$3 cflags=$4 lflags=$5 entry_exit=${6:-no}
  local obj=$WORK/$name.o exe=$WORK/$name
  # shellcheck disable=SC2086
  if ! $cc ${COMMON[*]} $cflags -c "$SRC/$src" -o "$obj" 2>"$WORK/$name.compile.log"; then
    bad "$name: compile failed"; sed 's/^/        /' "$WORK/$name.compile.log"; return 1
  fi
  local used
  used=$(nm -u "$obj" | awk '{print $2}' | grep '^__tsan_' | sort -u)
  echo "$used" >"$WORK/$name.tsan-symbols"
  local missing
  missing=$(comm -23 <(echo "$used") <(echo "$DEFINED"))
  if [[ -n $missing ]]; then bad "$name: symbols not defined by the ABI archive: $missing"; fi
  if [[ $entry_exit == no ]] && grep -q -E '__tsan_func_(entry|exit)' <<<"$used"; then
    bad "$name: entry/exit instrumentation not disabled"
  fi
  if [[ $entry_exit == yes ]] && ! grep -q '__tsan_func_entry' <<<"$used"; then
    bad "$name: expected __tsan_func_entry references in this variant"
  fi
  # Link WITHOUT -fsanitize=thread: the archive replaces libtsan.
  # shellcheck disable=SC2086
  if ! $cc "$obj" "$SINK_OBJ" "$ABI_LIB" -pthread $lflags -o "$exe" 2>"$WORK/$name.link.log"; then
    bad "$name: link failed"; sed 's/^/        /' "$WORK/$name.link.log"; return 1
  fi
  # (Outputs captured first: with pipefail, `producer | grep -q` can fail on SIGPIPE.)
  local undef needed
  undef=$(nm "$exe" | grep -E ' [Uw] __tsan_')
  if [[ -n $undef ]]; then bad "$name: executable has undefined __tsan_ symbols: $(echo $undef)"; fi
  needed=$(readelf -d "$exe" | grep NEEDED | grep -i -E 'tsan|atomic')
  if [[ -n $needed ]]; then bad "$name: executable needs libtsan/libatomic: $needed"; fi
  return 0
}

# run <name> [env assignments...]
run() {
  local name=$1
  shift
  local out rc
  out=$(env "$@" timeout 120 "$WORK/$name" 2>&1)
  rc=$?
  if [[ $rc -eq 0 && $out == *PASS* ]]; then
    ok "$name"
  else
    bad "$name (exit $rc)"
    printf '%s\n' "$out" | sed 's/^/        /'
  fi
}

flags_for() {
  case $1 in
    gcc | g++) echo "${GCC_FLAGS[*]}" ;;
    *) echo "${CLANG_FLAGS[*]}" ;;
  esac
}

echo "== main matrix (recommended flags)"
for opt in -O0 -O2; do
  for cc in gcc clang; do
    n=c-$cc$opt
    build "$n" "$cc" abi_test_c.c "-std=c11 -Wall -Wextra $opt $(flags_for $cc)" "${WRAP[*]}" && run "$n"
  done
  for cxx in g++ clang++; do
    n=cpp-$cxx$opt
    build "$n" "$cxx" abi_test_cpp.cpp "-std=c++20 -Wall -Wextra $opt $(flags_for $cxx)" "${WRAP[*]}" &&
      run "$n"
  done
done

echo "== variants"
# Entry/exit instrumentation left on: the no-op __tsan_func_entry/exit must satisfy it.
build c-gcc-entryexit gcc abi_test_c.c "-std=c11 -O2 -Wno-tsan -fno-builtin-memcpy -fno-builtin-memset -fno-builtin-memmove" \
  "${WRAP[*]}" yes && run c-gcc-entryexit
build c-clang-entryexit clang abi_test_c.c "-std=c11 -O2" "${WRAP[*]}" yes && run c-clang-entryexit
build cpp-clang++-entryexit clang++ abi_test_cpp.cpp "-std=c++20 -O1" "${WRAP[*]}" yes && run cpp-clang++-entryexit
# Distinguished volatile accesses (__tsan_volatile_*).
build c-gcc-volatile gcc abi_test_c.c "-std=c11 -O2 $(flags_for gcc) --param=tsan-distinguish-volatile=1" \
  "${WRAP[*]}" && run c-gcc-volatile
build c-clang-volatile clang abi_test_c.c "-std=c11 -O2 $(flags_for clang) -mllvm -tsan-distinguish-volatile=1" \
  "${WRAP[*]}" && run c-clang-volatile
# Clang's compound read-write instrumentation (__tsan_read_write*, __tsan_unaligned_read_write*) and
# un-elided reads before writes.
build c-clang-compound clang abi_test_c.c \
  "-std=c11 -O2 $(flags_for clang) -mllvm -tsan-compound-read-before-write=1" "${WRAP[*]}" &&
  run c-clang-compound
# Clang's default elision of a read followed by a write of the same location.
build cpp-clang++-elide clang++ abi_test_cpp.cpp \
  "-std=c++20 -O2 -mllvm -tsan-instrument-func-entry-exit=0" "${WRAP[*]}" && run cpp-clang++-elide
# _FORTIFY_SOURCE: memcpy & co. with a known destination size become __mem*_chk (wrapped too).
build c-gcc-fortify gcc abi_test_c.c "-std=c11 -O2 $(flags_for gcc) -D_FORTIFY_SOURCE=2" "${WRAP[*]}" &&
  run c-gcc-fortify
build c-clang-fortify clang abi_test_c.c "-std=c11 -O2 $(flags_for clang) -D_FORTIFY_SOURCE=2" \
  "${WRAP[*]}" && run c-clang-fortify
for n in c-gcc-fortify c-clang-fortify; do
  chk=$(nm -u "$WORK/$n.o" | grep '__mem[a-z]*_chk')
  [[ -n $chk ]] || bad "$n: expected references to __mem*_chk"
done
# Without --wrap the archive still links; memcpy & co. just go unreported.
build c-gcc-nowrap gcc abi_test_c.c "-std=c11 -O2 $(flags_for gcc)" "" && run c-gcc-nowrap WHYMISS_ABI_NO_WRAP=1
build c-clang-nowrap clang abi_test_c.c "-std=c11 -O2 $(flags_for clang)" "" && run c-clang-nowrap WHYMISS_ABI_NO_WRAP=1
# AVX2: Clang would drop 32-byte vector accesses without -mprefer-vector-width=128 (in CLANG_FLAGS).
if grep -q -w avx2 /proc/cpuinfo 2>/dev/null; then
  build c-clang-avx2 clang abi_test_c.c "-std=c11 -O3 -mavx2 $(flags_for clang)" "${WRAP[*]}" && run c-clang-avx2
  build c-gcc-avx2 gcc abi_test_c.c "-std=c11 -O3 -mavx2 $(flags_for gcc)" "${WRAP[*]}" && run c-gcc-avx2
fi
# PIE is not required (libtsan needs it; we do not), and static linking works.
build c-gcc-nopie gcc abi_test_c.c "-std=c11 -O2 $(flags_for gcc)" "${WRAP[*]} -no-pie" && run c-gcc-nopie
build cpp-clang++-nopie clang++ abi_test_cpp.cpp "-std=c++20 -O2 $(flags_for clang++)" "${WRAP[*]} -no-pie" &&
  run cpp-clang++-nopie
build c-clang-static clang abi_test_c.c "-std=c11 -O2 $(flags_for clang)" "${WRAP[*]} -static" && run c-clang-static

echo "== symbol coverage probes (compile only): every referenced __tsan_* must be defined"
# probe_c.c/probe_cpp.cpp exercise every construct known to select a distinct entry point. Compiled
# with default options (entry/exit on), with and without -mcx16, and with the option variants.
mkdir -p "$WORK/probe"
for cc in gcc clang g++ clang++; do
  case $cc in
    gcc | clang) src=probe_c.c std=-std=c11 ;;
    *) src=probe_cpp.cpp std=-std=c++20 ;;
  esac
  case $cc in
    gcc | g++) variants=("" "--param=tsan-distinguish-volatile=1") ;;
    *) variants=("" "-mllvm -tsan-distinguish-volatile=1" "-mllvm -tsan-compound-read-before-write=1") ;;
  esac
  : >"$WORK/probe/$cc.symbols"
  for opt in -O0 -O2; do
    for cx in "" -mcx16; do
      for v in "${variants[@]}"; do
        obj=$WORK/probe/$cc.o
        # shellcheck disable=SC2086
        if ! $cc $std $opt $cx $v -fsanitize=thread -w -c "$SRC/$src" -o "$obj" 2>"$WORK/probe/log"; then
          bad "probe $cc $opt $cx $v: compile failed"; sed 's/^/        /' "$WORK/probe/log"; continue
        fi
        nm -u "$obj" | awk '{print $2}' | grep '^__tsan_' >>"$WORK/probe/$cc.symbols"
      done
    done
  done
  sort -u -o "$WORK/probe/$cc.symbols" "$WORK/probe/$cc.symbols"
  missing=$(comm -23 "$WORK/probe/$cc.symbols" <(echo "$DEFINED"))
  if [[ -n $missing ]]; then
    bad "probe $cc: not defined by the ABI archive: $(echo $missing)"
  else
    ok "probe $cc: $(wc -l <"$WORK/probe/$cc.symbols") distinct __tsan_* symbols, all defined"
  fi
done
echo "  (lists: $WORK/probe/<compiler>.symbols)"

if [[ $fail -ne 0 ]]; then
  echo "runtime ABI check: FAILED"
  exit 1
fi
echo "runtime ABI check: all passed"
exit 0
