/* Included first into every translation unit whymiss-cc compiles with GCC (-include): keeps the
 * code GCC generates for memcpy/memmove/memset calls what it is natively wherever that code is
 * reported to exact mode anyway, and a reported call elsewhere. docs/tsan-abi.md, "memcpy".
 *
 * whymiss-cc compiles with -fno-builtin-memcpy/-memmove/-memset: otherwise GCC expands a copy or
 * fill of constant size inline, after its TSan pass, and exact mode never sees those accesses.
 * That flag also undoes two native transformations, which this header restores:
 *  - memcpy/memmove of 1, 2, 4, 8 or 16 constant bytes (the unaligned-load idiom
 *    `memcpy(&v, p, 8)`) is folded into a load and a store before the TSan pass, which
 *    instruments them: __builtin_memcpy here, as natively, instead of a call and a stack round trip;
 *  - memset of a size that is not constant, or (unless optimising for size) larger than 8 KiB, is
 *    the builtin again: GCC calls memset for it under every -mtune (reported through --wrap), and
 *    turns malloc followed by memset(p, 0, n) into calloc, as natively. (-Os expands large
 *    constant fills inline as rep stosb: there they stay calls.)
 * Everything else calls the library function under its own name, reported through --wrap.
 * The functions are extern inline (gnu_inline): never emitted, so a program's own definition of
 * memcpy elsewhere is not disturbed, and taking &memcpy gives the library's. */
#if !defined(__ASSEMBLER__) && defined(__GNUC__) && !defined(__clang__) && defined(__OPTIMIZE__)
#ifdef __cplusplus
extern "C" {
#define WHYMISS_NOTHROW_PRE
#define WHYMISS_NOTHROW noexcept(true)
#else
#define WHYMISS_NOTHROW_PRE __attribute__((__nothrow__))
#define WHYMISS_NOTHROW
#endif
#define WHYMISS_MEMOP \
  WHYMISS_NOTHROW_PRE __attribute__((__always_inline__, __gnu_inline__, __artificial__))

extern WHYMISS_NOTHROW_PRE void* __whymiss_memcpy_call(void*, const void*, __SIZE_TYPE__) WHYMISS_NOTHROW
    __asm__("memcpy");
extern WHYMISS_NOTHROW_PRE void* __whymiss_memmove_call(void*, const void*, __SIZE_TYPE__) WHYMISS_NOTHROW
    __asm__("memmove");

#define WHYMISS_FOLDED(n)                                                                  \
  (__builtin_constant_p(n) && ((n) == 1 || (n) == 2 || (n) == 4 || (n) == 8 || (n) == 16))

WHYMISS_MEMOP extern __inline void* memcpy(void* __restrict __whymiss_d,
                                           const void* __restrict __whymiss_s,
                                           __SIZE_TYPE__ __whymiss_n) WHYMISS_NOTHROW {
  if (WHYMISS_FOLDED(__whymiss_n)) return __builtin_memcpy(__whymiss_d, __whymiss_s, __whymiss_n);
  return __whymiss_memcpy_call(__whymiss_d, __whymiss_s, __whymiss_n);
}

WHYMISS_MEMOP extern __inline void* memmove(void* __whymiss_d, const void* __whymiss_s,
                                            __SIZE_TYPE__ __whymiss_n) WHYMISS_NOTHROW {
  if (WHYMISS_FOLDED(__whymiss_n)) return __builtin_memmove(__whymiss_d, __whymiss_s, __whymiss_n);
  return __whymiss_memmove_call(__whymiss_d, __whymiss_s, __whymiss_n);
}

extern WHYMISS_NOTHROW_PRE void* __whymiss_memset_call(void*, int, __SIZE_TYPE__) WHYMISS_NOTHROW __asm__("memset");

WHYMISS_MEMOP extern __inline void* memset(void* __whymiss_d, int __whymiss_c,
                                           __SIZE_TYPE__ __whymiss_n) WHYMISS_NOTHROW {
#ifdef __OPTIMIZE_SIZE__
  if (!__builtin_constant_p(__whymiss_n)) {
#else
  if (!__builtin_constant_p(__whymiss_n) || __whymiss_n > 8192) {
#endif
    return __builtin_memset(__whymiss_d, __whymiss_c, __whymiss_n);
  }
  return __whymiss_memset_call(__whymiss_d, __whymiss_c, __whymiss_n);
}

#undef WHYMISS_FOLDED
#undef WHYMISS_MEMOP
#undef WHYMISS_NOTHROW
#undef WHYMISS_NOTHROW_PRE
#ifdef __cplusplus
}
#endif
#endif
