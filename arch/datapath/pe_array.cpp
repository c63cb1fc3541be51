#include "arch/datapath/pe_array.h"

#include <algorithm>
#include <stdexcept>
#include <string>
#include <utility>

#include "arch/datapath/numerics.h"

namespace npusim::arch::datapath {

namespace {

uint64_t u(int64_t v) { return static_cast<uint64_t>(v); }
int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// Multiply-accumulate of the two value domains. Integer: modulo 2^32 (unsigned arithmetic).
struct IntArith {
  using V = uint32_t;
  V mac(V acc, V a, V b) const { return acc + a * b; }
};
struct FloatArith {
  using V = float;
  isa::DType precision;
  V mac(V acc, V a, V b) const { return round_to_precision(acc + a * b, precision); }
};

// A value travelling through the array. `valid`: a token occupies this register (null tokens of
// unused rows/columns are valid but not `live`: they move and take time, but never multiply).
template <class V>
struct Token {
  int64_t t = 0;  // stream index (WS/IS) or k (OS)
  bool valid = false;
  bool live = false;
  V val{};
};

[[noreturn]] void internal(const std::string& what) { throw std::logic_error("PeArray: " + what); }

// ---- WS / IS: stationary operand S [R x C], streamed X [T x R], outputs Y [T x C] ---------------
template <class Arith>
struct StationaryFold {
  using V = typename Arith::V;
  int64_t R, C, T;
  const std::vector<V>& S;
  const std::vector<bool>& s_live;
  const std::vector<V>& X;           // T x R
  const std::vector<bool>& x_live;   // per row r
  std::vector<V>& Y;                 // T x C: in = accumulator values, out = results
  const std::vector<bool>& y_live;   // per column c
  const Arith& arith;
  int64_t& macs;

  // Returns the fold's cycle count.
  int64_t run() {
    std::vector<V> w(u(R * C));
    std::vector<bool> w_live(u(R * C), false);
    int64_t cycles = 0;
    // Preload: one row of S enters at the top per cycle (bottom row first), columns shift down.
    for (int64_t p = 0; p < R; ++p, ++cycles) {
      for (int64_t r = R - 1; r >= 1; --r) {
        for (int64_t c = 0; c < C; ++c) {
          w[u(r * C + c)] = w[u((r - 1) * C + c)];
          w_live[u(r * C + c)] = w_live[u((r - 1) * C + c)];
        }
      }
      for (int64_t c = 0; c < C; ++c) {
        w[u(c)] = S[u((R - 1 - p) * C + c)];
        w_live[u(c)] = s_live[u((R - 1 - p) * C + c)];
      }
    }
    std::vector<Token<V>> a(u(R * C)), p(u(R * C)), a_next(u(R * C)), p_next(u(R * C));
    for (int64_t tau = 0;; ++tau, ++cycles) {
      for (int64_t r = 0; r < R; ++r) {
        for (int64_t c = 0; c < C; ++c) {
          const size_t i = u(r * C + c);
          Token<V> ain;
          if (c == 0) {
            const int64_t t = tau - r;  // skewed fill: row r starts r cycles late
            if (t >= 0 && t < T) ain = Token<V>{t, true, x_live[u(r)], X[u(t * R + r)]};
          } else {
            ain = a[i - 1];
          }
          Token<V> pin;
          if (r == 0) {
            if (ain.valid) pin = Token<V>{ain.t, true, true, y_live[u(c)] ? Y[u(ain.t * C + c)] : V{}};
          } else {
            pin = p[u((r - 1) * C + c)];
          }
          if (ain.valid != pin.valid || (ain.valid && ain.t != pin.t)) internal("input and partial sum out of step");
          if (ain.valid && ain.live && w_live[i]) {
            pin.val = arith.mac(pin.val, ain.val, w[i]);
            ++macs;
          }
          a_next[i] = ain;
          p_next[i] = pin;
          if (r == R - 1 && pin.valid && y_live[u(c)]) Y[u(pin.t * C + c)] = pin.val;  // leaves the bottom
        }
      }
      std::swap(a, a_next);
      std::swap(p, p_next);
      if (tau >= T - 1 + R - 1) {  // every feeder has sent its last token
        bool in_flight = false;
        for (int64_t r = 0; r < R && !in_flight; ++r) {
          for (int64_t c = 0; c < C && !in_flight; ++c) {
            in_flight = (c < C - 1 && a[u(r * C + c)].valid) || (r < R - 1 && p[u(r * C + c)].valid);
          }
        }
        if (!in_flight) return cycles + 1;
      }
    }
  }
};

template <class Arith>
PeTileResult run_stationary(int64_t R, int64_t C, isa::Dataflow df, int64_t M, int64_t K, int64_t N,
                            const std::vector<typename Arith::V>* A, const std::vector<typename Arith::V>* B,
                            std::vector<typename Arith::V>& Cm, const Arith& arith) {
  using V = typename Arith::V;
  const bool ws = df == isa::Dataflow::kWs;
  const int64_t T = ws ? M : N;           // streamed length
  const int64_t cols_dim = ws ? N : M;    // what the array columns map
  PeTileResult res;
  std::vector<V> S(u(R * C)), X(u(T * R)), Y(u(T * C));
  std::vector<bool> s_live(u(R * C)), x_live(u(R)), y_live(u(C));
  const auto a_at = [&](int64_t m, int64_t k) { return A ? (*A)[u(m * K + k)] : V{}; };
  const auto b_at = [&](int64_t k, int64_t n) { return B ? (*B)[u(k * N + n)] : V{}; };
  for (int64_t fc = 0; fc < ceil_div(cols_dim, C); ++fc) {
    for (int64_t fr = 0; fr < ceil_div(K, R); ++fr) {
      for (int64_t r = 0; r < R; ++r) {
        const int64_t k = fr * R + r;
        x_live[u(r)] = k < K;
        for (int64_t c = 0; c < C; ++c) {
          const int64_t j = fc * C + c;  // n in WS, m in IS
          s_live[u(r * C + c)] = k < K && j < cols_dim;
          S[u(r * C + c)] = s_live[u(r * C + c)] ? (ws ? b_at(k, j) : a_at(j, k)) : V{};
        }
        for (int64_t t = 0; t < T; ++t) X[u(t * R + r)] = k < K ? (ws ? a_at(t, k) : b_at(k, t)) : V{};
      }
      for (int64_t c = 0; c < C; ++c) {
        const int64_t j = fc * C + c;
        y_live[u(c)] = j < cols_dim;
        for (int64_t t = 0; t < T; ++t) {
          Y[u(t * C + c)] = j < cols_dim ? (ws ? Cm[u(t * N + j)] : Cm[u(j * N + t)]) : V{};
        }
      }
      res.cycles += StationaryFold<Arith>{R, C, T, S, s_live, X, x_live, Y, y_live, arith, res.macs}.run();
      ++res.folds;
      for (int64_t c = 0; c < C; ++c) {
        const int64_t j = fc * C + c;
        if (j >= cols_dim) continue;
        for (int64_t t = 0; t < T; ++t) (ws ? Cm[u(t * N + j)] : Cm[u(j * N + t)]) = Y[u(t * C + c)];
      }
    }
  }
  return res;
}

// ---- OS: A streams from the left, B from the top, each PE keeps its output ---------------------
template <class Arith>
PeTileResult run_output_stationary(int64_t R, int64_t C, int64_t M, int64_t K, int64_t N,
                                   const std::vector<typename Arith::V>* A, const std::vector<typename Arith::V>* B,
                                   std::vector<typename Arith::V>& Cm, const Arith& arith) {
  using V = typename Arith::V;
  struct Result {
    bool valid = false;
    bool live = false;
    int64_t m = 0, n = 0;
    V val{};
  };
  PeTileResult res;
  std::vector<Token<V>> a(u(R * C)), b(u(R * C)), a_next(u(R * C)), b_next(u(R * C));
  std::vector<V> acc(u(R * C));
  std::vector<Result> shadow(u(R * C));  // per-column output chains, drained down the columns
  bool shadow_busy = false;
  // One cycle of the shadow chains: the bottom entry of each column leaves, the rest move down.
  const auto shift_shadow = [&] {
    if (!shadow_busy) return;
    shadow_busy = false;
    for (int64_t c = 0; c < C; ++c) {
      const Result& out = shadow[u((R - 1) * C + c)];
      if (out.valid && out.live) Cm[u(out.m * N + out.n)] = out.val;
      for (int64_t r = R - 1; r >= 1; --r) {
        shadow[u(r * C + c)] = shadow[u((r - 1) * C + c)];
        shadow_busy = shadow_busy || shadow[u(r * C + c)].valid;
      }
      shadow[u(c)] = Result{};
    }
  };
  for (int64_t fc = 0; fc < ceil_div(N, C); ++fc) {
    for (int64_t fr = 0; fr < ceil_div(M, R); ++fr) {
      const int64_t m0 = fr * R, n0 = fc * C;
      for (int64_t r = 0; r < R; ++r) {
        for (int64_t c = 0; c < C; ++c) {
          const bool live = m0 + r < M && n0 + c < N;
          acc[u(r * C + c)] = live ? Cm[u((m0 + r) * N + n0 + c)] : V{};
        }
      }
      for (int64_t tau = 0;; ++tau) {
        shift_shadow();
        for (int64_t r = 0; r < R; ++r) {
          for (int64_t c = 0; c < C; ++c) {
            const size_t i = u(r * C + c);
            Token<V> ain, bin;
            if (c == 0) {
              const int64_t k = tau - r, m = m0 + r;
              if (k >= 0 && k < K) ain = Token<V>{k, true, m < M, (m < M && A) ? (*A)[u(m * K + k)] : V{}};
            } else {
              ain = a[i - 1];
            }
            if (r == 0) {
              const int64_t k = tau - c, n = n0 + c;
              if (k >= 0 && k < K) bin = Token<V>{k, true, n < N, (n < N && B) ? (*B)[u(k * N + n)] : V{}};
            } else {
              bin = b[u((r - 1) * C + c)];
            }
            if (ain.valid != bin.valid || (ain.valid && ain.t != bin.t)) internal("A and B out of step");
            if (ain.valid && ain.live && bin.live) {
              acc[i] = arith.mac(acc[i], ain.val, bin.val);
              ++res.macs;
            }
            a_next[i] = ain;
            b_next[i] = bin;
          }
        }
        std::swap(a, a_next);
        std::swap(b, b_next);
        // Column c is complete when its bottom PE has done its last MAC: latch it into the shadow chain.
        for (int64_t c = 0; c < C; ++c) {
          const Token<V>& last = a[u((R - 1) * C + c)];
          if (!(last.valid && last.t == K - 1)) continue;
          for (int64_t r = 0; r < R; ++r) {
            Result& s = shadow[u(r * C + c)];
            if (s.valid) internal("an output latch would overwrite a result still draining");
            s = Result{true, m0 + r < M && n0 + c < N, m0 + r, n0 + c, acc[u(r * C + c)]};
          }
          shadow_busy = true;
        }
        if (tau >= K - 1 + std::max(R, C) - 1) {
          bool in_flight = false;
          for (int64_t r = 0; r < R && !in_flight; ++r) {
            for (int64_t c = 0; c < C && !in_flight; ++c) {
              in_flight = (c < C - 1 && a[u(r * C + c)].valid) || (r < R - 1 && b[u(r * C + c)].valid);
            }
          }
          if (!in_flight) {
            res.cycles += tau + 1;
            break;
          }
        }
      }
      ++res.folds;
    }
  }
  while (shadow_busy) {
    shift_shadow();
    ++res.drain_tail_cycles;
  }
  return res;
}

template <class Arith>
PeTileResult dispatch(int64_t R, int64_t C, isa::Dataflow df, int64_t m, int64_t k, int64_t n,
                      const std::vector<typename Arith::V>* A, const std::vector<typename Arith::V>* B,
                      std::vector<typename Arith::V>& Cm, const Arith& arith) {
  if (df == isa::Dataflow::kOs) return run_output_stationary(R, C, m, k, n, A, B, Cm, arith);
  return run_stationary(R, C, df, m, k, n, A, B, Cm, arith);
}

void check_size(const char* name, size_t got, int64_t want) {
  if (got != u(want)) {
    throw std::invalid_argument("PeArray::run: operand " + std::string(name) + " has " + std::to_string(got) +
                                " elements, expected " + std::to_string(want));
  }
}

}  // namespace

PeArray::PeArray(int64_t rows, int64_t cols, isa::Dataflow dataflow)
    : rows_(rows), cols_(cols), dataflow_(dataflow) {
  if (rows < 1 || cols < 1) throw std::invalid_argument("PeArray: rows and cols must be at least 1");
}

PeTileResult PeArray::run(int64_t m, int64_t k, int64_t n, const PeOperands* ops) const {
  if (m < 1 || k < 1 || n < 1) throw std::invalid_argument("PeArray::run: m, k and n must be at least 1");
  if (ops == nullptr) {
    std::vector<uint32_t> c(u(m * n));
    return dispatch(rows_, cols_, dataflow_, m, k, n, nullptr, nullptr, c, IntArith{});
  }
  if (ops->integer) {
    check_size("A", ops->a_int.size(), m * k);
    check_size("B", ops->b_int.size(), k * n);
    const std::vector<uint32_t> a(ops->a_int.begin(), ops->a_int.end()), b(ops->b_int.begin(), ops->b_int.end());
    std::vector<uint32_t> c(u(m * n), 0);
    if (!ops->c_int.empty()) {
      check_size("C", ops->c_int.size(), m * n);
      c.assign(ops->c_int.begin(), ops->c_int.end());
    }
    PeTileResult r = dispatch(rows_, cols_, dataflow_, m, k, n, &a, &b, c, IntArith{});
    r.c_int.assign(c.begin(), c.end());
    return r;
  }
  check_size("A", ops->a_fp.size(), m * k);
  check_size("B", ops->b_fp.size(), k * n);
  std::vector<float> c(u(m * n), 0.0f);
  if (!ops->c_fp.empty()) {
    check_size("C", ops->c_fp.size(), m * n);
    for (size_t i = 0; i < c.size(); ++i) c[i] = round_to_precision(ops->c_fp[i], ops->accumulate_in);
  }
  PeTileResult r = dispatch(rows_, cols_, dataflow_, m, k, n, &ops->a_fp, &ops->b_fp, c,
                            FloatArith{ops->accumulate_in});
  r.c_fp = std::move(c);
  return r;
}

}  // namespace npusim::arch::datapath
