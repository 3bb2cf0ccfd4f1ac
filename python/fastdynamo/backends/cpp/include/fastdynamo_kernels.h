// fastdynamo's runtime header for generated C++ kernels (interim: scalar std:: versions).
#pragma once
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

// ---- storage of half types: float computed, rounded to nearest even on store ----------
static inline float fd_bf16_to_float(uint16_t h) {
    uint32_t bits = static_cast<uint32_t>(h) << 16;
    float f;
    std::memcpy(&f, &bits, 4);
    return f;
}
static inline uint16_t fd_float_to_bf16(float f) {
    uint32_t bits;
    std::memcpy(&bits, &f, 4);
    uint32_t rounded = bits + 0x7FFFu + ((bits >> 16) & 1u);
    return f != f ? static_cast<uint16_t>(0x7FC0u) : static_cast<uint16_t>(rounded >> 16);
}
static inline float fd_f16_to_float(uint16_t h) {
    _Float16 v;
    std::memcpy(&v, &h, 2);
    return static_cast<float>(v);
}
static inline uint16_t fd_float_to_f16(float f) {
    _Float16 v = static_cast<_Float16>(f);
    uint16_t h;
    std::memcpy(&h, &v, 2);
    return h;
}
static inline float fd_round_bf16(float f) { return fd_bf16_to_float(fd_float_to_bf16(f)); }
static inline float fd_round_f16(float f) { return fd_f16_to_float(fd_float_to_f16(f)); }

// ---- NaN-propagating comparisons of ATen ----------------------------------------------
template <typename T> static inline T fd_maximum(T a, T b) { return (a > b || a != a) ? a : b; }
template <typename T> static inline T fd_minimum(T a, T b) { return (a < b || a != a) ? a : b; }
template <typename T> static inline T fd_clamp_min(T x, T lo) { return (x < lo || lo != lo) ? lo : x; }
template <typename T> static inline T fd_clamp_max(T x, T hi) { return (x > hi || hi != hi) ? hi : x; }
template <typename T> static inline T fd_relu(T x) { return x < T(0) ? T(0) : x; }

// ---- integer division with Python's floor semantics (divisor never 0 or -1) -----------
template <typename T> static inline T fd_floordiv(T a, T b) {
    T q = a / b, r = a % b;
    return (r != 0 && ((r < 0) != (b < 0))) ? q - 1 : q;
}
template <typename T> static inline T fd_remainder(T a, T b) {
    T r = a % b;
    return (r != 0 && ((r < 0) != (b < 0))) ? r + b : r;
}

// ---- elementwise math -------------------------------------------------------------------
template <typename T> static inline T fd_abs(T x) { return x < T(0) ? -x : x; }
static inline float fd_abs(float x) { return std::fabs(x); }
static inline double fd_abs(double x) { return std::fabs(x); }
template <typename T> static inline T fd_reciprocal(T x) { return T(1) / x; }
template <typename T> static inline T fd_floor(T x) { return x; }
static inline float fd_floor(float x) { return std::floor(x); }
static inline double fd_floor(double x) { return std::floor(x); }
template <typename T> static inline T fd_ceil(T x) { return x; }
static inline float fd_ceil(float x) { return std::ceil(x); }
static inline double fd_ceil(double x) { return std::ceil(x); }
template <typename T> static inline T fd_sqrt(T x) { return std::sqrt(x); }
template <typename T> static inline T fd_rsqrt(T x) { return T(1) / std::sqrt(x); }
template <typename T> static inline T fd_exp(T x) { return std::exp(x); }
template <typename T> static inline T fd_exp2(T x) { return std::exp2(x); }
template <typename T> static inline T fd_log(T x) { return std::log(x); }
template <typename T> static inline T fd_log2(T x) { return std::log2(x); }
template <typename T> static inline T fd_sin(T x) { return std::sin(x); }
template <typename T> static inline T fd_cos(T x) { return std::cos(x); }
template <typename T> static inline T fd_erf(T x) { return std::erf(x); }
template <typename T> static inline T fd_tanh(T x) { return std::tanh(x); }
template <typename T> static inline T fd_sigmoid(T x) { return T(1) / (T(1) + std::exp(-x)); }
