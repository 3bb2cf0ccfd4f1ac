// fastdynamo_kernels.h: the runtime header of every C++ kernel the CPU backend generates.
//
// Scalar functions that compute what eager PyTorch (ATen, CPU) computes, written so that gcc
// vectorizes a loop calling them:
//
//     #pragma omp simd
//     for (int64_t i = 0; i < n; ++i) out[i] = fd_exp(in0[i] * 1.5f);
//
// Every function is branch-free (selects, bit casts through memcpy, integer arithmetic on the
// bits), reads no table and calls nothing in libm but fabs/floor/trunc (single instructions
// from SSE4.1 on), so inside such a loop it becomes vector code: checked per function, for
// AVX2 and AVX-512, by tests/cpp/test_kernel_math.py. The few that call libm say "scalar"
// below; a loop calling one stays a scalar loop.
//
// Build flags: -O3 -std=c++17 -fno-math-errno -fno-trapping-math -ffp-contract=off, never
// -ffast-math (it breaks the rounding tricks and NaN handling here).
//   -fno-trapping-math: without it gcc 12 leaves 15 of the test's 56 loops scalar on AVX-512
//     and 31 on AVX2 (log, tanh, sin, division, half loads...): it will not evaluate both arms
//     of a `?:` whose arithmetic might raise an FP exception, nor inline floor/trunc. ATen is
//     compiled with it too; it changes no result.
//   -ffp-contract=off: makes a generated `a * b + c` round twice, as eager's two kernels do;
//     g++ contracts it into an fma by default in C++, -std=c++17 or not. The fmas here come
//     from fd_detail::fmadd: a real fma where the target has one (FMA or AVX-512F), a
//     multiply-add otherwise; both are within the accuracy below (tests compile both).
// gcc 12 also fails to vectorize a few spellings; where the code below looks roundabout (masks
// instead of selects, `&` instead of `&&`, NaN or-ed in), a comment says which.
//
// Only <cstdint> <cmath> <cstring> <limits> <algorithm>: ATen headers make a compile 10x slower.
//
// Contents, float and double unless noted (ulp: max distance in units in the last place to
// the correctly rounded result, over the whole range, measured by the tests):
//   fd_exp fd_exp2 fd_log fd_log2    float <= 1 ulp; double <= 1 ulp
//   fd_sigmoid                       ATen's 1 / (1 + exp(-x)), float and double: <= 2 ulp from
//                                    the true value, 0 where exp(-x) overflows (x <= -88.72)
//   fd_erf                           float <= 1 ulp (2 without fma hardware); double: std::erf
//                                    (scalar)
//   fd_tanh                          float <= 1 ulp (computed in double, rounded once);
//                                    double <= 2 ulp (1 on 10^5 samples)
//   fd_sin fd_cos                    float <= 1 ulp (computed in double, rounded once), any
//                                    argument; double: std:: (scalar; double kernels are rare)
//   fd_fmod fd_remainder fd_div_floor fd_div_trunc: ATen's division semantics, ints and floats
//   fd_maximum fd_minimum fd_clamp fd_clamp_min fd_clamp_max fd_relu: ATen's NaN and signed-zero
//                                    behaviour (see "Maximum, minimum, clamp")
//   fd_half fd_bfloat16 fd_to_float fd_float_to_half fd_float_to_bfloat16 fd_bool_load/store
//   fd_float_to_int32 fd_float_to_int64 (and int16/int8/uint8): tensor.to(int) semantics;
//   fd_integer_to<T>: an integer to float or double (a signed zero g++ would fold in)
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

#if defined(__GNUC__)
#define FD_INLINE static inline __attribute__((always_inline))
#else
#define FD_INLINE static inline
#endif

#if defined(__FMA__) || defined(__AVX512F__) || defined(__aarch64__)
#define FD_HAS_FMA 1
#else
#define FD_HAS_FMA 0
#endif

namespace fd_detail {

FD_INLINE uint32_t bits(float x) { uint32_t u; std::memcpy(&u, &x, sizeof u); return u; }
FD_INLINE uint64_t bits(double x) { uint64_t u; std::memcpy(&u, &x, sizeof u); return u; }
FD_INLINE float f32(uint32_t u) { float x; std::memcpy(&x, &u, sizeof x); return x; }
FD_INLINE double f64(uint64_t u) { double x; std::memcpy(&x, &u, sizeof x); return x; }

// A fused multiply-add where the target has one; the algorithms below are accurate either way
// (their exact products come from constants with trailing zeros, not from the fma).
FD_INLINE float fmadd(float a, float b, float c) {
#if FD_HAS_FMA
  return __builtin_fmaf(a, b, c);
#else
  return a * b + c;
#endif
}
FD_INLINE double fmadd(double a, double b, double c) {
#if FD_HAS_FMA
  return __builtin_fma(a, b, c);
#else
  return a * b + c;
#endif
}

// 2^k for k in [-126, 127] (float) and [-1022, 1023] (double), from the exponent bits.
FD_INLINE float pow2i(int32_t k) { return f32(static_cast<uint32_t>(k + 127) << 23); }
FD_INLINE double pow2i(int64_t k) { return f64(static_cast<uint64_t>(k + 1023) << 52); }

// x * 2^k for k in [-150, 128] (float) and [-1076, 1024] (double) with one rounding: the first
// product is exact (it stays normal), the second rounds into the denormals or overflows.
FD_INLINE float scale(float x, int32_t k) {
  int32_t half = k >> 1;
  return x * pow2i(half) * pow2i(k - half);
}
FD_INLINE double scale(double x, int64_t k) {
  int64_t half = k >> 1;
  return x * pow2i(half) * pow2i(k - half);
}

// Round to the nearest integer (ties to even) for |x| < 2^22 (float) / 2^51 (double) under the
// default rounding mode: the integer comes back as a float and in the low bits of `magic + x`.
constexpr float kRoundF = 0x1.8p23f;
constexpr double kRoundD = 0x1.8p52;
// An integer below 2^51 in magnitude (two's complement in k) as a double, through the bits of
// kRoundD + k: AVX2 has no packed int64 -> double conversion, so gcc would not vectorize one.
FD_INLINE double small_int_to_double(uint64_t k) { return f64(bits(kRoundD) + k) - kRoundD; }

FD_INLINE float copysign_bits(float magnitude, float sign_of) {
  return f32((bits(magnitude) & 0x7fffffffu) | (bits(sign_of) & 0x80000000u));
}
// -y where x is negative (sin is odd)
FD_INLINE float flip_sign_by(float y, float x) { return f32(bits(y) ^ (bits(x) & 0x80000000u)); }

// ---- exp: x = n ln2 + r, |r| <= ln2/2; exp(r) = 1 + r + r^2 P(r); exp(x) = exp(r) 2^n.
// ln2 is split so that n * kLn2Hi is exact for |n| < 2^8 (float) / 2^11 (double).
constexpr float kLog2eF = 0x1.715476p+0f;
constexpr float kLn2HiF = 0x1.62e400p-1f;
constexpr float kLn2LoF = 0x1.7f7d1cp-20f;
constexpr double kLog2eD = 0x1.71547652b82fep+0;
constexpr double kLn2HiD = 0x1.62e42fee00000p-1;
constexpr double kLn2LoD = 0x1.a39ef35793c76p-33;

// exp(r) - 1 - r over r^2, |r| <= ln2/2: relative error of exp(r) 2^-28.3 (float coefficients).
FD_INLINE float exp_poly(float r) {
  float p = fmadd(r, 0x1.6a4f28p-10f, 0x1.123982p-7f);
  p = fmadd(p, r, 0x1.5558aep-5f);
  p = fmadd(p, r, 0x1.555492p-3f);
  p = fmadd(p, r, 0x1.fffffcp-2f);
  return p;
}
// The same in double to 2^-56.4 (for the double fd_exp).
FD_INLINE double exp_poly(double r) {
  double p = fmadd(r, 0x1.ad7f7138a016bp-26, 0x1.28ad732fc1200p-22);
  p = fmadd(p, r, 0x1.71df25516f2e1p-19);
  p = fmadd(p, r, 0x1.a0199a0bf0ec9p-16);
  p = fmadd(p, r, 0x1.a01a012a57af1p-13);
  p = fmadd(p, r, 0x1.6c16c1842a428p-10);
  p = fmadd(p, r, 0x1.1111111127be7p-7);
  p = fmadd(p, r, 0x1.555555555087bp-5);
  p = fmadd(p, r, 0x1.55555555554fap-3);
  p = fmadd(p, r, 0x1.000000000000ap-1);
  return p;
}
// exp in double to 2^-34 relative, for |a| < 700 and no special values: the inner exp of
// fd_tanh(float), computed in double and rounded to float.
FD_INLINE double exp_for_float(double a) {
  double z = fmadd(a, kLog2eD, kRoundD);
  double n = z - kRoundD;
  int64_t ni = static_cast<int64_t>(bits(z) - bits(kRoundD));
  double r = fmadd(n, -kLn2HiD, a);
  r = fmadd(n, -kLn2LoD, r);
  double p = fmadd(r, 0x1.9f081f10a3cf6p-13, 0x1.6d8db32c46075p-10);
  p = fmadd(p, r, 0x1.111271f571e9bp-7);
  p = fmadd(p, r, 0x1.55548d0d111d7p-5);
  p = fmadd(p, r, 0x1.55555441be832p-3);
  p = fmadd(p, r, 0x1.0000003a735cfp-1);
  double e = fmadd(r * r, p, r) + 1.0;
  return e * pow2i(ni);
}

// ---- log: x = 2^k m, m in [sqrt(1/2), sqrt(2)), f = m - 1 (exact), s = f / (2 + f);
// log(m) = f - f^2/2 + s (f^2/2 + R(s^2)) (the fdlibm arrangement), R(z) = z (L1 + L2 z + ...).
struct LogParts {
  float f, s, hfsq, r, k;
};
struct LogPartsD {
  double f, s, hfsq, r, k;
};

FD_INLINE LogParts log_parts(float x) {
  bool tiny = x < 0x1p-126f;  // denormals (and zero): scale into the normals first
  float xs = tiny ? x * 0x1p23f : x;
  int32_t kadj = tiny ? -23 : 0;
  uint32_t u = bits(xs) + (0x3f800000u - 0x3f3504f3u);  // exponent steps at sqrt(1/2)
  int32_t k = static_cast<int32_t>(u >> 23) - 127 + kadj;
  float m = f32((u & 0x007fffffu) + 0x3f3504f3u);
  LogParts p;
  p.f = m - 1.0f;
  p.s = p.f / (2.0f + p.f);
  float z = p.s * p.s;
  // R(z), absolute error 2^-29.2 on z in [0, 0.0295]
  p.r = z * fmadd(fmadd(z, 0x1.31e3b0p-2f, 0x1.995ec4p-2f), z, 0x1.55557ap-1f);
  p.hfsq = 0.5f * p.f * p.f;
  p.k = static_cast<float>(k);
  return p;
}
FD_INLINE LogPartsD log_parts(double x) {
  bool tiny = x < 0x1p-1022;
  double xs = tiny ? x * 0x1p54 : x;
  int64_t kadj = tiny ? -54 : 0;
  uint64_t u = bits(xs) + (0x3ff0000000000000ull - 0x3fe6a09e667f3bcdull);
  int64_t k = static_cast<int64_t>(u >> 52) - 1023 + kadj;
  double m = f64((u & 0x000fffffffffffffull) + 0x3fe6a09e667f3bcdull);
  LogPartsD p;
  p.f = m - 1.0;
  p.s = p.f / (2.0 + p.f);
  double z = p.s * p.s;
  double r = fmadd(z, 0x1.2f07079b8066ep-3, 0x1.39a192fd19e25p-3);  // absolute error 2^-57.8
  r = fmadd(r, z, 0x1.7466405e5d372p-3);
  r = fmadd(r, z, 0x1.c71c5202a5178p-3);
  r = fmadd(r, z, 0x1.24924941f8e59p-2);
  r = fmadd(r, z, 0x1.999999997fd35p-2);
  r = fmadd(r, z, 0x1.5555555555592p-1);
  p.r = z * r;
  p.hfsq = 0.5 * p.f * p.f;
  p.k = small_int_to_double(static_cast<uint64_t>(k));
  return p;
}
// log's special values: -inf at +-0, NaN below 0, x itself at +inf and NaN.
template <typename T>
FD_INLINE T log_special(T x, T finite_result) {
  T r = x == T(0) ? -std::numeric_limits<T>::infinity() : finite_result;
  r = x < T(0) ? std::numeric_limits<T>::quiet_NaN() : r;
  return x < std::numeric_limits<T>::infinity() ? r : x;
}

// ---- sin/cos of float arguments. |x| < pi/4: r = x. Otherwise a Payne-Hanek reduction in
// integers, valid for every finite float: x = M 2^E (M the 24-bit significand), and
// R = x (2/pi) 2^62 mod 2^64 is M times a 96-bit window of the bits of 2/pi that starts where
// E says; the window is cut out of kTwoOverPi (bits 1..256 of 2/pi) with masks and shifts,
// so there is no table to gather from. The top two bits of R (rounded) are the quadrant, the
// rest the fraction; r = fraction * pi/2 in double, error below 2^-60 absolute.
constexpr uint64_t kTwoOverPi[4] = {0xfe5163abdebbc561ull, 0xdb6295993c439041ull,
                                    0xfc2757d1f534ddc0ull, 0xa2f9836e4e441529ull};

struct Reduced {
  double r;
  uint32_t quadrant;
};

FD_INLINE Reduced reduce_pio2(float x) {
  uint32_t ua = bits(x) & 0x7fffffffu;
  uint32_t m = (ua & 0x007fffffu) | 0x00800000u;
  // x = m 2^(e - 150); shift = 224 - (e - 150 + 62) = 312 - e, in [58, 186] for x >= pi/4
  uint64_t shift = 312u - (ua >> 23);  // 64-bit like the words it shifts (or gcc gives up)
  uint64_t word = (shift >> 6) & 3u;
  uint64_t offset = shift & 63u;
  // the words by masks, not selects: gcc turns a select of constants followed by a
  // variable shift into shifts of constants, which it cannot vectorize
  uint64_t is0 = 0 - static_cast<uint64_t>(word == 0);
  uint64_t is1 = 0 - static_cast<uint64_t>(word == 1);
  uint64_t is2 = 0 - static_cast<uint64_t>(word >= 2);
  uint64_t w0 = (kTwoOverPi[0] & is0) | (kTwoOverPi[1] & is1) | (kTwoOverPi[2] & is2);
  uint64_t w1 = (kTwoOverPi[1] & is0) | (kTwoOverPi[2] & is1) | (kTwoOverPi[3] & is2);
  uint64_t w2 = (kTwoOverPi[2] & is0) | (kTwoOverPi[3] & is1);
  // (w >> offset) over three words; `<< 1 << (63 - offset)` is `<< (64 - offset)` without
  // the undefined shift by 64
  uint64_t low = (w0 >> offset) | ((w1 << 1) << (63u - offset));
  uint64_t high = (w1 >> offset) | ((w2 << 1) << (63u - offset));
  // 32 x 32 -> 64-bit products (gcc 12 still makes vpmullq of them, not vpmuludq)
  uint64_t mm = m;
  uint64_t top = static_cast<uint32_t>(m * static_cast<uint32_t>(high));
  uint64_t mid = mm * static_cast<uint32_t>(low >> 32);
  uint64_t bottom = mm * static_cast<uint32_t>(low);
  uint64_t r = (top << 32) + mid + (bottom >> 32);
  uint64_t quadrant = (r + (1ull << 61)) >> 62;
  uint64_t frac = r - (quadrant << 62);  // two's complement of a value in [-2^61, 2^61)
  // int64 -> double through two int32 halves: AVX2 has no packed int64 -> double conversion
  int32_t frac_hi = static_cast<int32_t>(static_cast<uint32_t>(frac >> 32));
  int32_t frac_lo = static_cast<int32_t>(static_cast<uint32_t>(frac) ^ 0x80000000u);
  double f = static_cast<double>(frac_hi) * 0x1p32 + (static_cast<double>(frac_lo) + 0x1p31);
  Reduced out;
  out.r = f * 0x1.921fb54442d18p-62;  // pi/2 2^-62
  out.quadrant = static_cast<uint32_t>(quadrant);
  bool small = ua < 0x3f490fdbu;  // |x| < pi/4
  out.r = small ? static_cast<double>(f32(ua)) : out.r;
  out.quadrant = small ? 0u : out.quadrant;
  return out;
}
// sin(r) and cos(r) for |r| <= pi/4, relative errors 2^-37.6 and 2^-33.9.
FD_INLINE double sin_poly(double r) {
  double z = r * r;
  double p = fmadd(z, 0x1.6cd857c8d2279p-19, -0x1.a00f9da2532acp-13);
  p = fmadd(p, z, 0x1.111108964313dp-7);
  p = fmadd(p, z, -0x1.5555554cb9d61p-3);
  return fmadd(r * z, p, r);
}
FD_INLINE double cos_poly(double r) {
  double z = r * r;
  double p = fmadd(z, 0x1.99166ecd8bccap-16, -0x1.6c07f0971006ap-10);
  p = fmadd(p, z, 0x1.55553c767cf53p-5);
  p = fmadd(p, z, -0x1.ffffffcb7cc40p-2);
  return fmadd(z, p, 1.0);
}
// sin(|x| + quadrant pi/2) as float.
FD_INLINE float sin_quadrant(const Reduced& red) {
  double v = (red.quadrant & 1u) ? cos_poly(red.r) : sin_poly(red.r);
  v = (red.quadrant & 2u) ? -v : v;
  return static_cast<float>(v);
}

}  // namespace fd_detail

// ============================================================================ exp, exp2
FD_INLINE float fd_exp(float x) {
  using namespace fd_detail;
  // beyond [-104, 89] the result is 0 or inf anyway; the clamp keeps n in range (NaN stays)
  float xc = x < -104.0f ? -104.0f : (x > 89.0f ? 89.0f : x);
  float z = fmadd(xc, kLog2eF, kRoundF);
  float n = z - kRoundF;
  int32_t ni = static_cast<int32_t>(bits(z) - bits(kRoundF));
  float r = fmadd(n, -kLn2HiF, xc);
  r = fmadd(n, -kLn2LoF, r);
  float e = fmadd(r * r, exp_poly(r), r) + 1.0f;
  return scale(e, ni);
}
FD_INLINE double fd_exp(double x) {
  using namespace fd_detail;
  double xc = x < -746.0 ? -746.0 : (x > 710.0 ? 710.0 : x);
  double z = fmadd(xc, kLog2eD, kRoundD);
  double n = z - kRoundD;
  int64_t ni = static_cast<int64_t>(bits(z) - bits(kRoundD));
  double r = fmadd(n, -kLn2HiD, xc);
  r = fmadd(n, -kLn2LoD, r);
  double e = fmadd(r * r, exp_poly(r), r) + 1.0;
  return scale(e, ni);
}

// 2^x = 2^n 2^r, n = rint(x), r = x - n exact in [-1/2, 1/2].
FD_INLINE float fd_exp2(float x) {
  using namespace fd_detail;
  float xc = x < -151.0f ? -151.0f : (x > 129.0f ? 129.0f : x);
  float z = xc + kRoundF;
  float n = z - kRoundF;
  int32_t ni = static_cast<int32_t>(bits(z) - bits(kRoundF));
  float r = xc - n;
  // (2^r - 1) / r, relative error of 2^r 2^-28.3
  float p = fmadd(r, 0x1.417a5cp-13f, 0x1.5f0946p-10f);
  p = fmadd(p, r, 0x1.3b2dd2p-7f);
  p = fmadd(p, r, 0x1.c6af7ap-5f);
  p = fmadd(p, r, 0x1.ebfbdcp-3f);
  p = fmadd(p, r, 0x1.62e430p-1f);
  return scale(fmadd(p, r, 1.0f), ni);
}
FD_INLINE double fd_exp2(double x) {
  using namespace fd_detail;
  double xc = x < -1076.0 ? -1076.0 : (x > 1025.0 ? 1025.0 : x);
  double z = xc + kRoundD;
  double n = z - kRoundD;
  int64_t ni = static_cast<int64_t>(bits(z) - bits(kRoundD));
  double r = xc - n;
  double p = fmadd(r, 0x1.e79bb2dc83473p-32, 0x1.e61b4fcde0a2cp-28);  // 2^r to 2^-55
  p = fmadd(p, r, 0x1.b5267ce2cae11p-24);
  p = fmadd(p, r, 0x1.62bfc79d29addp-20);
  p = fmadd(p, r, 0x1.ffcbfba97f6d4p-17);
  p = fmadd(p, r, 0x1.4309130ed8dcbp-13);
  p = fmadd(p, r, 0x1.5d87fe78cd6d5p-10);
  p = fmadd(p, r, 0x1.3b2ab6fba0119p-7);
  p = fmadd(p, r, 0x1.c6b08d7049fe8p-5);
  p = fmadd(p, r, 0x1.ebfbdff82c5a4p-3);
  p = fmadd(p, r, 0x1.62e42fefa39efp-1);
  return scale(fmadd(p, r, 1.0), ni);
}

// ============================================================================ log, log2
FD_INLINE float fd_log(float x) {
  using namespace fd_detail;
  LogParts p = log_parts(x);
  float v = p.k * kLn2HiF - ((p.hfsq - (p.s * (p.hfsq + p.r) + p.k * kLn2LoF)) - p.f);
  return log_special(x, v);
}
FD_INLINE double fd_log(double x) {
  using namespace fd_detail;
  LogPartsD p = log_parts(x);
  double v = p.k * kLn2HiD - ((p.hfsq - (p.s * (p.hfsq + p.r) + p.k * kLn2LoD)) - p.f);
  return log_special(x, v);
}

// log2(x) = k + log(m) / ln2, with log(m) = hi + lo and hi cut to 12 bits (float) / 21 bits
// (double) so that hi times the high part of 1/ln2 is exact.
FD_INLINE float fd_log2(float x) {
  using namespace fd_detail;
  LogParts p = log_parts(x);
  float hi = f32(bits(p.f - p.hfsq) & 0xfffff000u);
  float lo = (p.f - hi) - p.hfsq + p.s * (p.hfsq + p.r);
  constexpr float kInvLn2Hi = 0x1.716000p+0f;
  constexpr float kInvLn2Lo = -0x1.7135a8p-13f;
  float v = (lo + hi) * kInvLn2Lo + lo * kInvLn2Hi + hi * kInvLn2Hi + p.k;
  return log_special(x, v);
}
FD_INLINE double fd_log2(double x) {
  using namespace fd_detail;
  LogPartsD p = log_parts(x);
  double hi = f64(bits(p.f - p.hfsq) & 0xffffffff00000000ull);
  double lo = (p.f - hi) - p.hfsq + p.s * (p.hfsq + p.r);
  constexpr double kInvLn2Hi = 0x1.7154765200000p+0;
  constexpr double kInvLn2Lo = 0x1.705fc2eefa200p-33;
  double val_hi = hi * kInvLn2Hi;
  double val_lo = (lo + hi) * kInvLn2Lo + lo * kInvLn2Hi;
  double w = p.k + val_hi;
  val_lo += (p.k - w) + val_hi;
  return log_special(x, val_lo + w);
}

// ============================================================================ sigmoid, tanh, erf
// ATen's sigmoid, 1 / (1 + exp(-x)) in float, with these roundings: 0 from x <= -88.7228394
// (exp(-x) overflows; the true value is a denormal down to -103.3), <= 2 ulp from the true
// sigmoid elsewhere, as eager's. Against eager's up to 4 ulp (rarely more than 1): the
// rounding of 1 + exp(-x) amplifies the 1-ulp differences between our exp and Sleef's.
// Computed in double instead it would be <= 1 ulp from the true value and <= 3 from eager's,
// at 2.5 times the cost.
FD_INLINE float fd_sigmoid(float x) { return 1.0f / (1.0f + fd_exp(-x)); }
FD_INLINE double fd_sigmoid(double x) { return 1.0 / (1.0 + fd_exp(-x)); }

// tanh in double, rounded once: |x| < 0.55: x + x^3 T(x^2); else 1 - 2 / (exp(2|x|) + 1).
// Beyond |x| = 9.01 the float result is 1, so the exp argument is clamped at 20.
FD_INLINE float fd_tanh(float x) {
  using namespace fd_detail;
  double y = static_cast<double>(f32(bits(x) & 0x7fffffffu));
  double z = y * y;
  double p = fmadd(z, 0x1.3a70e37932014p-9, -0x1.13cd252271a42p-7);  // relative error 2^-35
  p = fmadd(p, z, 0x1.64e7bd2880a00p-6);
  p = fmadd(p, z, -0x1.ba09e2d5ec047p-5);
  p = fmadd(p, z, 0x1.1110dd1f434c7p-3);
  p = fmadd(p, z, -0x1.555554efb6044p-2);
  double small = fmadd(y * z, p, y);
  double yc = y < 10.0 ? y : 10.0;
  double large = 1.0 - 2.0 / (exp_for_float(2.0 * yc) + 1.0);
  float t = static_cast<float>(y < 0.55 ? small : large);
  t = copysign_bits(t, x);
  return x != x ? x : t;
}
// The same in double: x + x^3 T(x^2) below 0.55 (T to 2^-57.4), 1 - 2 / (exp(2|x|) + 1) with
// fd_exp above (its 1 ulp and two roundings: <= 2 ulp near 0.55). tanh(20) rounds to 1.
FD_INLINE double fd_tanh(double x) {
  using namespace fd_detail;
  double y = std::fabs(x);
  double z = y * y;
  double p = fmadd(z, -0x1.477c7c686c35fp-16, 0x1.5da0f2541d467p-14);
  p = fmadd(p, z, -0x1.e97fbdbc72459p-13);
  p = fmadd(p, z, 0x1.34854b90ad19ap-11);
  p = fmadd(p, z, -0x1.7d9007640e308p-10);
  p = fmadd(p, z, 0x1.d6d29fbc8e106p-9);
  p = fmadd(p, z, -0x1.226e2f2fb0b66p-7);
  p = fmadd(p, z, 0x1.664f485a4d7a2p-6);
  p = fmadd(p, z, -0x1.ba1ba1b9818ecp-5);
  p = fmadd(p, z, 0x1.11111111107e9p-3);
  p = fmadd(p, z, -0x1.555555555554fp-2);
  double small = fmadd(y * z, p, y);
  double yc = y < 20.0 ? y : 20.0;
  double large = 1.0 - 2.0 / (fd_exp(2.0 * yc) + 1.0);
  double t = std::copysign(y < 0.55 ? small : large, x);
  return x != x ? x : t;
}

// erf in float. |x| < 1: x + x q(x^2), q(z) = erf(sqrt z)/sqrt z - 1 (|q| < 0.16), so that
// the last fma rounds once around x. 1 <= |x| < 3.925: 1 - exp(-x^2) G(|x|), where
// G(y) = erfc(y) exp(y^2) and x^2 is a float plus its rounding error (from an fma; 0 without
// one: up to 0.13 ulp more); the errors of exp and G count times erfc(x) <= 0.16. Beyond
// 3.925 erf rounds to 1.
FD_INLINE float fd_erf(float x) {
  using namespace fd_detail;
  float y = std::fabs(x);
  float z = y * y;
  float q = fmadd(z, 0x1.4771fep-14f, -0x1.a3515ep-11f);  // relative error of erf 2^-29.4
  q = fmadd(q, z, 0x1.53f224p-8f);
  q = fmadd(q, z, -0x1.b7f71ap-6f);
  q = fmadd(q, z, 0x1.ce2ce6p-4f);
  q = fmadd(q, z, -0x1.81273ep-2f);
  q = fmadd(q, z, 0x1.06eba8p-3f);
  float small = fmadd(y, q, y);
  float yc = y < 3.925f ? y : 3.925f;
  float g = fmadd(yc, 0x1.eee65cp-14f, -0x1.0f438cp-9f);  // absolute error of erf 2^-30.5
  g = fmadd(g, yc, 0x1.0a6218p-6f);
  g = fmadd(g, yc, -0x1.3750b4p-4f);
  g = fmadd(g, yc, 0x1.e605f8p-3f);
  g = fmadd(g, yc, -0x1.0e2922p-1f);
  g = fmadd(g, yc, 0x1.bd50aap-1f);
  g = fmadd(g, yc, -0x1.153f8cp+0f);
  g = fmadd(g, yc, 0x1.fc5920p-1f);
  float y2 = yc * yc;
  float y2_error = fmadd(yc, yc, -y2);
  float e = fd_exp(-y2);
  e = fmadd(-e, y2_error, e);  // exp(-(y2 + y2_error))
  float large = fmadd(-e, g, 1.0f);
  float v = y < 1.0f ? small : large;
  v = y < 3.925f ? v : 1.0f;
  v = copysign_bits(v, x);
  return x != x ? x : v;
}
FD_INLINE double fd_erf(double x) { return std::erf(x); }  // scalar

// ============================================================================ sin, cos
// Full range (see reduce_pio2); sin(+-0) = +-0, cos(+-0) = 1, inf and NaN give NaN.
FD_INLINE float fd_sin(float x) {
  using namespace fd_detail;
  float t = flip_sign_by(sin_quadrant(reduce_pio2(x)), x);
  return x - x == 0.0f ? t : x - x;  // x - x is NaN exactly at inf and NaN
}
FD_INLINE float fd_cos(float x) {
  using namespace fd_detail;
  Reduced red = reduce_pio2(x);
  red.quadrant += 1;
  float t = sin_quadrant(red);
  return x - x == 0.0f ? t : x - x;
}
FD_INLINE double fd_sin(double x) { return std::sin(x); }  // scalar
FD_INLINE double fd_cos(double x) { return std::cos(x); }  // scalar

// ============================================================================ division
// ATen's semantics (aten/src/ATen/native/cpu/BinaryOpsKernel.cpp, c10/util/generic_math.h).
// Integer division by zero raises in eager (ZeroDivisionError, for floor, trunc, remainder
// and fmod alike); the code generator must not emit these for a zero divisor, and their
// result for b == 0 is unspecified here (no trap, no undefined behaviour).
namespace fd_detail {

// r mod mb for integers 0 <= r < 2^51, 1 <= mb < 2^24, in doubles: the quotient from the
// reciprocal is off by at most one, and the remainder is exact (products stay below 2^53).
FD_INLINE double mod_step(double r, double mb, double inv_mb) {
  double t = r * inv_mb;
  double q = (t + kRoundD) - kRoundD;
  q = q > t ? q - 1.0 : q;
  double rem = r - q * mb;
  rem = rem < 0.0 ? rem + mb : rem;
  return rem >= mb ? rem - mb : rem;
}

// |a| mod |b| exactly, for finite a and b != 0 (garbage otherwise, selected away by the
// caller). In double every float is normal: |a| = ma 2^ea, |b| = mb 2^eb with 24-bit integer
// significands, and the result is (ma 2^(ea - eb) mod mb) 2^eb, the power of two taken 27
// bits at a time: eleven steps cover the largest exponent gap (277). Everything is in 64-bit
// lanes; gcc vectorizes mixed 32/64-bit masks here poorly.
FD_INLINE float fmod_magnitude(float a, float b) {
  uint64_t ua = bits(std::fabs(static_cast<double>(a)));
  uint64_t ub = bits(std::fabs(static_cast<double>(b)));
  constexpr uint64_t kMantissa = (1ull << 52) - 1;
  double ma = small_int_to_double(((ua & kMantissa) | (1ull << 52)) >> 29);
  double mb = small_int_to_double(((ub & kMantissa) | (1ull << 52)) >> 29);
  int64_t eb = static_cast<int64_t>(ub >> 52);
  int64_t gap = static_cast<int64_t>(ua >> 52) - eb;
  double inv_mb = 1.0 / mb;
  double r = mod_step(ma, mb, inv_mb);
#if defined(__GNUC__)
#pragma GCC unroll 11
#endif
  for (int step = 0; step < 11; ++step) {
    int64_t k = gap < 27 ? gap : 27;
    k = k > 0 ? k : 0;
    gap -= k;
    r = mod_step(r * pow2i(k), mb, inv_mb);
  }
  return static_cast<float>(r * pow2i(eb - 1023 - 23));  // exact: r < mb
}

// ATen's float remainder fix-up: the result takes the divisor's sign.
template <typename T>
FD_INLINE T remainder_from_fmod(T mod, T b) {
  return ((mod != T(0)) & ((b < T(0)) != (mod < T(0)))) ? mod + b : mod;
}

// div_floor_floating_vec of BinaryOpsKernel.cpp. (The scalar c10::div_floor_floating lacks its
// first fix-up, for a / b overflowing, where (a - mod) / b overflows as well.)
template <typename T>
FD_INLINE T div_floor_from_fmod(T a, T b, T mod) {
  T basic = a / b;
  T inf = std::numeric_limits<T>::infinity();
  bool quotient_overflows = std::fabs(basic) == inf;
  bool a_finite = std::fabs(a) != inf;
  T num = (quotient_overflows & a_finite) ? a : a - mod;
  T div = num / b;
  div = ((mod != T(0)) & ((b < T(0)) != (mod < T(0)))) ? div - T(1) : div;
  T floordiv = std::floor(div);
  floordiv = (div - floordiv > T(0.5)) ? floordiv + T(1) : floordiv;
  floordiv = div == T(0) ? std::copysign(T(0), basic) : floordiv;
  return b == T(0) ? basic : floordiv;
}

}  // namespace fd_detail

// fmod: exact, with the sign of a: C's fmod, which eager's scalar path (std::fmod) computes.
// Eager's vector path (Sleef_fmodf16) agrees except where a / b overflows (|a| >= 2^128 |b|,
// one random pair of floats in ten): there it returns NaN, and so does its remainder. We
// return the exact result there; so does eager on the scalar tail of the same tensor.
FD_INLINE float fd_fmod(float a, float b) {
  using namespace fd_detail;
  float r = copysign_bits(fmod_magnitude(a, b), a);
  r = std::fabs(a) < std::fabs(b) ? a : r;  // also b = inf with a finite
  bool nan = (b == 0.0f) | !(std::fabs(a) < std::numeric_limits<float>::infinity()) | (b != b);
  // NaN by or-ing its exponent and quiet bit in: with a select, gcc threads the callers'
  // tests of the result (mod != 0) through it into selects of masks, which it does not
  // vectorize
  return f32(bits(r) | (nan ? 0x7fc00000u : 0u));
}
FD_INLINE double fd_fmod(double a, double b) { return std::fmod(a, b); }  // scalar

// remainder (Python's %): fmod, then + b where the signs differ; remainder(-4, 2) is -0.
FD_INLINE float fd_remainder(float a, float b) {
  return fd_detail::remainder_from_fmod(fd_fmod(a, b), b);
}
FD_INLINE double fd_remainder(double a, double b) {  // scalar
  return fd_detail::remainder_from_fmod(fd_fmod(a, b), b);
}

// div(rounding_mode="floor") and floor_divide.
FD_INLINE float fd_div_floor(float a, float b) {
  return fd_detail::div_floor_from_fmod(a, b, fd_fmod(a, b));
}
FD_INLINE double fd_div_floor(double a, double b) {  // scalar
  return fd_detail::div_floor_from_fmod(a, b, fd_fmod(a, b));
}

// div(rounding_mode="trunc").
FD_INLINE float fd_div_trunc(float a, float b) { return std::trunc(a / b); }
FD_INLINE double fd_div_trunc(double a, double b) { return std::trunc(a / b); }

// int32 (and, promoted, int8/int16/uint8) division through double, which vectorizes where
// integer division does not: a / b rounds to a double at less than 1/|b| from the exact
// quotient, so truncating or flooring it is exact. INT32_MIN / -1 gives INT32_MIN (eager:
// floor gives INT32_MIN, trunc kills the process with SIGFPE).
namespace fd_detail {
FD_INLINE double int_quotient(int32_t a, int32_t b) {
  return static_cast<double>(a) / static_cast<double>(b == 0 ? 1 : b);
}
FD_INLINE int32_t int32_wrap(double q) {  // q integral in [-2^31, 2^31]
  return q < 0x1p31 ? static_cast<int32_t>(q) : std::numeric_limits<int32_t>::min();
}
}  // namespace fd_detail
FD_INLINE int32_t fd_div_trunc(int32_t a, int32_t b) {
  return fd_detail::int32_wrap(std::trunc(fd_detail::int_quotient(a, b)));
}
FD_INLINE int32_t fd_div_floor(int32_t a, int32_t b) {
  return fd_detail::int32_wrap(std::floor(fd_detail::int_quotient(a, b)));
}
// a - q b in wrapping arithmetic: INT32_MIN % -1 is 0, as in eager.
FD_INLINE int32_t fd_fmod(int32_t a, int32_t b) {
  uint32_t q = static_cast<uint32_t>(fd_div_trunc(a, b));
  return static_cast<int32_t>(static_cast<uint32_t>(a) - q * static_cast<uint32_t>(b));
}
FD_INLINE int32_t fd_remainder(int32_t a, int32_t b) {
  uint32_t q = static_cast<uint32_t>(fd_div_floor(a, b));
  return static_cast<int32_t>(static_cast<uint32_t>(a) - q * static_cast<uint32_t>(b));
}

// int64: integer division (scalar: x86 has no vector integer division).
namespace fd_detail {
FD_INLINE bool int64_overflows(int64_t a, int64_t b) {
  return (a == std::numeric_limits<int64_t>::min()) & (b == -1);
}
FD_INLINE int64_t safe_divisor(int64_t a, int64_t b) {
  return ((b == 0) | int64_overflows(a, b)) ? 1 : b;
}
}  // namespace fd_detail
FD_INLINE int64_t fd_div_trunc(int64_t a, int64_t b) {
  return a / fd_detail::safe_divisor(a, b);  // INT64_MIN / -1 = INT64_MIN
}
FD_INLINE int64_t fd_fmod(int64_t a, int64_t b) { return a % fd_detail::safe_divisor(a, b); }
FD_INLINE int64_t fd_div_floor(int64_t a, int64_t b) {
  int64_t q = fd_div_trunc(a, b);
  bool inexact = fd_fmod(a, b) != 0;
  return (inexact & ((a < 0) != (b < 0))) ? q - 1 : q;
}
FD_INLINE int64_t fd_remainder(int64_t a, int64_t b) {
  int64_t r = fd_fmod(a, b);
  return ((r != 0) & ((r < 0) != (b < 0))) ? r + b : r;
}

// ============================================================================ maximum, minimum, clamp
// What eager returns, found on torch 2.15 (AVX-512 and default capabilities) and in
// aten/src/ATen/cpu/vec/vec512/vec512_float.h, cpu/TensorCompareKernel.cpp, TensorCompare.cpp:
//
// maximum/minimum: NaN if either operand is NaN. For equal operands (+0 and -0) ATen's two
//   paths disagree: the vector path (_mm512_max_ps(a, b), or `a > b ? a : b` in vec_base.h)
//   returns b; the scalar path (std::max(a, b), used below one vector of elements and for
//   the tail of every tensor) returns a. maximum(zeros(64), -zeros(64)) is -0, the same call
//   on 7 elements +0. We follow the vector path: maximum(a, b) = a > b ? a : b, and
//   minimum(a, b) = a < b ? a : b. Which NaN: AVX ORs all-ones (0xffffffff), vec_base and the
//   scalar path return a NaN operand or the default NaN; we return a + b (a NaN operand).
// clamp with scalar bounds (and clamp_min/clamp_max, relu = clamp_min(x, 0)): both paths
//   return x when it equals a bound (clamp(-0., min=0.) is -0, relu(-0.) is -0), x when x is
//   NaN, hi when lo > hi, and an all-NaN result when a bound is NaN (TensorCompare.cpp fills
//   the output).
// clamp with tensor bounds is minimum(maximum(x, lo), hi) in the vector path (so
//   clamp(-0., min=tensor(0.)) is +0) and std::min(std::max(x, lo), hi) in the scalar path
//   (-0); we follow the vector path (fd_clamp_tensor_bounds). A NaN bound gives NaN there.
//   (Written without isnan: gcc rewrites `isnan(maximum(a, b))` into a select of masks, which
//   it cannot vectorize. For integers the unordered arm is dead.)
template <typename T>
FD_INLINE T fd_maximum(T a, T b) { return a > b ? a : (b >= a ? b : a + b); }
template <typename T>
FD_INLINE T fd_minimum(T a, T b) { return a < b ? a : (b <= a ? b : a + b); }

template <typename T>
FD_INLINE T fd_clamp(T x, T lo, T hi) {  // scalar bounds
  T t = lo > x ? lo : x;
  t = hi < t ? hi : t;
  return ((lo != lo) | (hi != hi)) ? std::numeric_limits<T>::quiet_NaN() : t;
}
template <typename T>
FD_INLINE T fd_clamp_min(T x, T lo) {
  return lo != lo ? std::numeric_limits<T>::quiet_NaN() : (lo > x ? lo : x);
}
template <typename T>
FD_INLINE T fd_clamp_max(T x, T hi) {
  return hi != hi ? std::numeric_limits<T>::quiet_NaN() : (hi < x ? hi : x);
}
template <typename T>
FD_INLINE T fd_clamp_tensor_bounds(T x, T lo, T hi) {
  return fd_minimum(fd_maximum(x, lo), hi);
}
template <typename T>
FD_INLINE T fd_relu(T x) { return T(0) > x ? T(0) : x; }

// ============================================================================ half, bfloat16, bool
// Storage types (layout of c10::Half / c10::BFloat16: the 16 bits). Conversions as
// tensor.to() does them (its vector path on every size), bit for bit, NaN payloads included:
//   half -> float: exact; a NaN is quieted (0x7c01 -> 0x7fc02000), as vcvtph2ps does.
//   float -> half: round to nearest even, overflow to inf from 65520; NaN -> quiet NaN with
//     the top 9 payload bits (vcvtps2ph; also what c10::Half(float) gives).
//   bfloat16 -> float: the 16 bits on top, NaN untouched.
//   float -> bfloat16: round to nearest even; every NaN -> 0xffff (ATen's cvtfp32_bf16; the
//     scalar c10::BFloat16(float) constructor gives 0x7fc0 instead).
struct fd_half {
  uint16_t bits;
};
struct fd_bfloat16 {
  uint16_t bits;
};

FD_INLINE float fd_to_float(fd_half h) {
  using namespace fd_detail;
  uint32_t w = h.bits;
  uint32_t sign = (w & 0x8000u) << 16;
  uint32_t em = w & 0x7fffu;
  uint32_t normal = (em << 13) + ((127u - 15u) << 23);
  uint32_t inf_nan = (em << 13) | 0x7f800000u | ((em & 0x3ffu) ? 0x00400000u : 0u);
  uint32_t denormal = bits(static_cast<float>(static_cast<int32_t>(em)) * 0x1p-24f);
  uint32_t r = em >= 0x7c00u ? inf_nan : normal;
  r = em < 0x0400u ? denormal : r;
  return f32(r | sign);
}
FD_INLINE float fd_to_float(fd_bfloat16 b) {
  return fd_detail::f32(static_cast<uint32_t>(b.bits) << 16);
}

FD_INLINE fd_half fd_float_to_half(float f) {
  using namespace fd_detail;
  uint32_t u = bits(f);
  uint32_t sign = (u >> 16) & 0x8000u;
  uint32_t a = u & 0x7fffffffu;
  uint32_t normal = (a + 0xfffu + ((a >> 13) & 1u) - (112u << 23)) >> 13;
  // below 2^-14: |f| + 1/2 rounds |f| to a multiple of 2^-24, which lands in the low bits
  uint32_t denormal = bits(f32(a) + 0.5f) - 0x3f000000u;
  uint32_t h = a < 0x38800000u ? denormal : normal;
  h = a >= 0x477ff000u ? 0x7c00u : h;
  h = a > 0x7f800000u ? (0x7e00u | ((a >> 13) & 0x3ffu)) : h;
  return fd_half{static_cast<uint16_t>(h | sign)};
}
FD_INLINE fd_bfloat16 fd_float_to_bfloat16(float f) {
  uint32_t u = fd_detail::bits(f);
  uint32_t rounded = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
  return fd_bfloat16{static_cast<uint16_t>(f != f ? 0xffffu : rounded)};
}

// bool tensors hold one byte, 0 or 1; any other value reads as true.
FD_INLINE bool fd_bool_load(uint8_t b) { return b != 0; }
FD_INLINE uint8_t fd_bool_store(bool v) { return v ? 1 : 0; }
template <typename T>
FD_INLINE bool fd_to_bool(T x) { return x != T(0); }  // NaN is true

// ============================================================================ float -> int
// tensor.to(int) on torch 2.15 (vector and scalar paths agree): truncation toward zero for
// values in range; NaN, inf and out-of-range values give INT32_MIN / INT64_MIN (what
// cvttps2dq / cvttps2qq return; C++ leaves it undefined, so it is selected here). int16 and
// int8 take the low bits of the int32 conversion: to(int8) of 300.7 is 44, of 3e9 is 0.
// int -> float and int -> double are plain static_casts (round to nearest even), as in ATen.
template <typename T>
FD_INLINE int32_t fd_float_to_int32(T x) {
  bool in_range = (x >= T(-0x1p31)) & (x < T(0x1p31));  // false for NaN
  int32_t r = static_cast<int32_t>(in_range ? x : T(0));
  return in_range ? r : std::numeric_limits<int32_t>::min();
}
template <typename T>
FD_INLINE int64_t fd_float_to_int64(T x) {
  bool in_range = (x >= T(-0x1p63)) & (x < T(0x1p63));
  int64_t r = static_cast<int64_t>(in_range ? x : T(0));
  return in_range ? r : std::numeric_limits<int64_t>::min();
}
template <typename T>
FD_INLINE int16_t fd_float_to_int16(T x) { return static_cast<int16_t>(fd_float_to_int32(x)); }
template <typename T>
FD_INLINE int8_t fd_float_to_int8(T x) { return static_cast<int8_t>(fd_float_to_int32(x)); }
// uint8 takes the low byte of the int64 conversion (so double 2^31 + 5 -> 5, where int8 gives
// 0). For a float the int32 conversion has the same low byte: floats from 2^31 up are
// multiples of 256.
FD_INLINE uint8_t fd_float_to_uint8(float x) { return static_cast<uint8_t>(fd_float_to_int32(x)); }
FD_INLINE uint8_t fd_float_to_uint8(double x) { return static_cast<uint8_t>(fd_float_to_int64(x)); }

// An integer converted to a float type. In scalar code (an int64 where the ISA has no
// vector int64 conversion: SSE4.1, AVX2; any loop's scalar remainder, a short tensor),
// g++ 12 under -fno-trapping-math folds float -> int -> float into trunc(x), and trunc
// keeps the -0.0 of a negative fraction, which no integer converts to (tensor.to(int) of
// -0.5, then .float(), is +0.0). Adding +0 does not help (g++ knows a converted integer is
// never -0.0 and drops it), clearing the sign bit through memcpy crashed g++ 12's SLP
// vectorizer; a select of +0 for 0 is kept. (It leaves a float -> int64 -> float loop
// scalar; an integer load -> float still vectorizes.)
template <typename T, typename I>
FD_INLINE T fd_integer_to(I v) {
  T f = static_cast<T>(v);
  return v == 0 ? T(0) : f;
}
