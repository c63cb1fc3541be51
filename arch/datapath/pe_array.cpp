#include "arch/datapath/pe_array.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>
#include <utility>

#include "arch/datapath/numerics.h"
#include "isa/ceil_div.h"

namespace npusim::arch::datapath {

namespace {

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
// unused rows/columns, and the filler beats of a reduced-rate element, are valid but not `live`: they
// move and take time, but never multiply).
template <class V>
struct Token {
  int64_t beat = 0;   // position in the stream, for the lock-step check
  int64_t elem = -1;  // the streamed element whose last beat this is (-1: filler beat)
  bool valid = false;
  bool live = false;
  V val{};
  int64_t fold = 0;  // pipelined folds: the fold the token belongs to (selects the stationary register)
};

[[noreturn]] void internal(const std::string& what) { throw std::logic_error("PeArray: " + what); }

// A stream of T elements at MAC rate `rate` occupies ceil(T / rate) beats (isa/timing/systolic.h's
// stream_cycles); element t completes on beat floor((t+1) * B / T) - 1, earlier beats of it are fillers.
std::vector<int64_t> beat_elements(int64_t T, double rate) {
  const int64_t B = rate >= 1.0 ? T : static_cast<int64_t>(std::ceil(static_cast<double>(T) / rate - 1e-9));
  std::vector<int64_t> e(u(B), -1);
  for (int64_t t = 0; t < T; ++t) e[u((t + 1) * B / T - 1)] = t;
  return e;
}

// Whether a token is still on its way through the array: one moving right (`right`, not yet past the
// last column) or one moving down (`down`, not yet past the last row).
template <class V>
bool tokens_in_flight(int64_t R, int64_t C, const std::vector<Token<V>>& right,
                      const std::vector<Token<V>>& down) {
  for (int64_t r = 0; r < R; ++r) {
    for (int64_t c = 0; c < C; ++c) {
      if ((c < C - 1 && right[u(r * C + c)].valid) || (r < R - 1 && down[u(r * C + c)].valid)) return true;
    }
  }
  return false;
}

// ---- WS / IS: stationary operand S [R x C], streamed X [T x R], outputs Y [T x C] ---------------
template <class Arith>
struct StationaryEngine {
  using V = typename Arith::V;
  int64_t R, C;
  const Arith& arith;
  int64_t& macs;
  std::vector<V> w = std::vector<V>(u(R * C)), shadow = std::vector<V>(u(R * C));
  std::vector<bool> w_live = std::vector<bool>(u(R * C)), shadow_live = std::vector<bool>(u(R * C));

  // One cycle of a weight chain: every column shifts down one PE, row p of the tile's bottom-up order
  // enters at the top.
  void shift_in(std::vector<V>& regs, std::vector<bool>& live, const std::vector<V>& S,
                const std::vector<bool>& s_live, int64_t p) const {
    for (int64_t r = R - 1; r >= 1; --r) {
      for (int64_t c = 0; c < C; ++c) {
        regs[u(r * C + c)] = regs[u((r - 1) * C + c)];
        live[u(r * C + c)] = live[u((r - 1) * C + c)];
      }
    }
    for (int64_t c = 0; c < C; ++c) {
      regs[u(c)] = S[u((R - 1 - p) * C + c)];
      live[u(c)] = s_live[u((R - 1 - p) * C + c)];
    }
  }

  // Exposed preload: R cycles with nothing else in the array. After it PE(r,c) holds S[r][c].
  int64_t preload(const std::vector<V>& S, const std::vector<bool>& s_live) {
    for (int64_t p = 0; p < R; ++p) shift_in(w, w_live, S, s_live, p);
    return R;
  }
  // The stationary operand is already in the array (an earlier PRELOAD): no cycles.
  void place(const std::vector<V>& S, const std::vector<bool>& s_live) {
    w = S;
    w_live = s_live;
  }

  // Streams X through the array; returns the cycles until the last token left. With `next`, the next
  // fold's stationary operand shifts into the shadow registers during the first R cycles and becomes
  // the active one when this fold ends (double buffering).
  int64_t stream(const std::vector<int64_t>& beats, const std::vector<V>& X, const std::vector<bool>& x_live,
                 std::vector<V>& Y, const std::vector<bool>& y_live, const std::vector<V>* next_S,
                 const std::vector<bool>* next_live) {
    const int64_t B = static_cast<int64_t>(beats.size());
    std::vector<Token<V>> a(u(R * C)), p(u(R * C)), a_next(u(R * C)), p_next(u(R * C));
    for (int64_t tau = 0;; ++tau) {
      if (next_S && tau < R) shift_in(shadow, shadow_live, *next_S, *next_live, tau);
      for (int64_t r = 0; r < R; ++r) {
        for (int64_t c = 0; c < C; ++c) {
          const size_t i = u(r * C + c);
          Token<V> ain;
          if (c == 0) {
            const int64_t b = tau - r;  // skewed fill: row r starts r cycles late
            if (b >= 0 && b < B) {
              const int64_t t = beats[u(b)];
              ain = Token<V>{b, t, true, t >= 0 && x_live[u(r)], t >= 0 ? X[u(t * R + r)] : V{}};
            }
          } else {
            ain = a[i - 1];
          }
          Token<V> pin;
          if (r == 0) {
            if (ain.valid) {
              pin = Token<V>{ain.beat, ain.elem, true, true,
                             (ain.elem >= 0 && y_live[u(c)]) ? Y[u(ain.elem * C + c)] : V{}};
            }
          } else {
            pin = p[u((r - 1) * C + c)];
          }
          if (ain.valid != pin.valid || (ain.valid && ain.beat != pin.beat)) {
            internal("input and partial sum out of step");
          }
          if (ain.valid && ain.live && w_live[i]) {
            pin.val = arith.mac(pin.val, ain.val, w[i]);
            ++macs;
          }
          a_next[i] = ain;
          p_next[i] = pin;
          // The partial sum leaves the bottom of the column into the accumulator.
          if (r == R - 1 && pin.valid && pin.elem >= 0 && y_live[u(c)]) Y[u(pin.elem * C + c)] = pin.val;
        }
      }
      std::swap(a, a_next);
      std::swap(p, p_next);
      if (tau >= B - 1 + R - 1) {  // every feeder has sent its last beat
        const bool in_flight = tokens_in_flight(R, C, a, p);
        if (!in_flight) {
          if (next_S) {
            if (tau + 1 < R) internal("the shadow weights were not complete when the fold ended");
            std::swap(w, shadow);
            std::swap(w_live, shadow_live);
          }
          return tau + 1;
        }
      }
    }
  }
};

template <class Arith>
PeTileResult run_stationary(int64_t R, int64_t C, isa::Dataflow df, int64_t M, int64_t K, int64_t N,
                            const std::vector<typename Arith::V>* A, const std::vector<typename Arith::V>* B,
                            std::vector<typename Arith::V>& Cm, const Arith& arith,
                            const PeTimingOptions& opt) {
  using V = typename Arith::V;
  const bool ws = df == isa::Dataflow::kWs;
  const int64_t T = ws ? M : N;         // streamed length
  const int64_t cols_dim = ws ? N : M;  // what the array columns map
  const int64_t row_folds = ceil_div(K, R), col_folds = ceil_div(cols_dim, C);
  const int64_t folds = row_folds * col_folds;
  const std::vector<int64_t> beats = beat_elements(T, opt.rate);
  PeTileResult res;
  res.folds = folds;
  const auto a_at = [&](int64_t m, int64_t k) { return A ? (*A)[u(m * K + k)] : V{}; };
  const auto b_at = [&](int64_t k, int64_t n) { return B ? (*B)[u(k * N + n)] : V{}; };
  // Fold f = fc * row_folds + fr (SCALE-Sim's loop order: column folds outside, row folds inside).
  const auto make_S = [&](int64_t f, std::vector<V>& S, std::vector<bool>& live) {
    const int64_t fc = f / row_folds, fr = f % row_folds;
    S.assign(u(R * C), V{});
    live.assign(u(R * C), false);
    for (int64_t r = 0; r < R; ++r) {
      for (int64_t c = 0; c < C; ++c) {
        const int64_t k = fr * R + r, j = fc * C + c;  // j: n in WS, m in IS
        if (k < K && j < cols_dim) {
          live[u(r * C + c)] = true;
          S[u(r * C + c)] = ws ? b_at(k, j) : a_at(j, k);
        }
      }
    }
  };
  StationaryEngine<Arith> eng{R, C, arith, res.macs};
  std::vector<V> S, S_next, X(u(T * R)), Y(u(T * C));
  std::vector<bool> s_live, s_next_live, x_live(u(R)), y_live(u(C));
  make_S(0, S, s_live);
  for (int64_t f = 0; f < folds; ++f) {
    const int64_t fc = f / row_folds, fr = f % row_folds;
    // The fold's own stationary operand: already placed, shifted in earlier (double buffering), or
    // shifted in now with the array otherwise idle.
    if (f == 0 && opt.first_fold_preloaded) {
      eng.place(S, s_live);
    } else if (f == 0 || !opt.double_buffered) {
      res.cycles += eng.preload(S, s_live);
    }
    for (int64_t r = 0; r < R; ++r) {
      const int64_t k = fr * R + r;
      x_live[u(r)] = k < K;
      for (int64_t t = 0; t < T; ++t) X[u(t * R + r)] = k < K ? (ws ? a_at(t, k) : b_at(k, t)) : V{};
    }
    for (int64_t c = 0; c < C; ++c) {
      const int64_t j = fc * C + c;
      y_live[u(c)] = j < cols_dim;
      for (int64_t t = 0; t < T; ++t) {
        Y[u(t * C + c)] = j < cols_dim ? (ws ? Cm[u(t * N + j)] : Cm[u(j * N + t)]) : V{};
      }
    }
    const bool shadow = opt.double_buffered && f + 1 < folds;
    if (f + 1 < folds) make_S(f + 1, S_next, s_next_live);
    res.cycles +=
        eng.stream(beats, X, x_live, Y, y_live, shadow ? &S_next : nullptr, shadow ? &s_next_live : nullptr);
    for (int64_t c = 0; c < C; ++c) {
      const int64_t j = fc * C + c;
      if (j >= cols_dim) continue;
      for (int64_t t = 0; t < T; ++t) (ws ? Cm[u(t * N + j)] : Cm[u(j * N + t)]) = Y[u(t * C + c)];
    }
    std::swap(S, S_next);
    std::swap(s_live, s_next_live);
  }
  return res;
}

// ---- WS / IS with pipelined folds: all folds in one stream --------------------------------------
// Fold f's rows enter from cycle S_f = f * slot, slot = max(B, R): fold f+1's first row follows fold
// f's last. Every token carries its fold. Each PE has an active and a shadow stationary register, each
// tagged with its fold; a PE takes the shadow as active when the first token of a new fold reaches it.
// Column c's shadow chain shifts fold f+1's tile in at cycles S_f + c .. S_f + c + R - 1, the wavefront
// writing row r from S_f + c + r on (after that PE took fold f's operand, in the same cycle); the tile is
// complete (tagged) after its last shift. The partial sum a fold reads at the top of a column must be
// the one the previous row fold of that column left at the bottom: checked, never assumed.
template <class Arith>
PeTileResult run_stationary_pipelined(int64_t R, int64_t C, isa::Dataflow df, int64_t M, int64_t K, int64_t N,
                                      const std::vector<typename Arith::V>* A,
                                      const std::vector<typename Arith::V>* B,
                                      std::vector<typename Arith::V>& Cm, const Arith& arith,
                                      const PeTimingOptions& opt) {
  using V = typename Arith::V;
  const bool ws = df == isa::Dataflow::kWs;
  const int64_t T = ws ? M : N, cols_dim = ws ? N : M;
  const int64_t row_folds = ceil_div(K, R), col_folds = ceil_div(cols_dim, C);
  const int64_t folds = row_folds * col_folds;
  const std::vector<int64_t> beats = beat_elements(T, opt.rate);
  const int64_t nb = static_cast<int64_t>(beats.size()), slot = std::max(nb, R);
  PeTileResult res;
  res.folds = folds;
  const auto a_at = [&](int64_t m, int64_t k) { return A ? (*A)[u(m * K + k)] : V{}; };
  const auto b_at = [&](int64_t k, int64_t n) { return B ? (*B)[u(k * N + n)] : V{}; };
  // Fold f = fc * row_folds + fr (SCALE-Sim's order). Stationary value of PE(r, c) in fold f:
  const auto stationary = [&](int64_t f, int64_t r, int64_t c, bool& live) {
    const int64_t k = (f % row_folds) * R + r, j = (f / row_folds) * C + c;
    live = k < K && j < cols_dim;
    return live ? (ws ? b_at(k, j) : a_at(j, k)) : V{};
  };
  const auto out_at = [&](int64_t t, int64_t j) -> V& { return ws ? Cm[u(t * N + j)] : Cm[u(j * N + t)]; };
  std::vector<int64_t> written(u(T * cols_dim), 0);  // row folds that have left their sums in each output
  // Stationary registers: active (w) and shadow (sh), each with the fold it holds (-1: none/in transit).
  std::vector<V> w(u(R * C)), sh(u(R * C));
  std::vector<bool> w_live(u(R * C)), sh_live(u(R * C));
  std::vector<int64_t> w_fold(u(R * C), 0), sh_fold(u(R * C), -1);
  for (int64_t r = 0; r < R; ++r) {
    for (int64_t c = 0; c < C; ++c) {
      bool live = false;
      w[u(r * C + c)] = stationary(0, r, c, live);
      w_live[u(r * C + c)] = live;
    }
  }
  if (!opt.first_fold_preloaded) res.cycles += R;  // fold 0's operand shifted in with the array idle
  std::vector<Token<V>> a(u(R * C)), p(u(R * C)), a_next(u(R * C)), p_next(u(R * C));
  const int64_t last_entry = (folds - 1) * slot + nb - 1 + R - 1;
  for (int64_t tau = 0;; ++tau) {
    for (int64_t r = 0; r < R; ++r) {
      for (int64_t c = 0; c < C; ++c) {
        const size_t i = u(r * C + c);
        Token<V> ain;
        if (c == 0) {
          const int64_t q = tau - r;  // skewed fill: row r starts r cycles late
          if (q >= 0 && q / slot < folds && q % slot < nb) {
            const int64_t f = q / slot, b = q % slot, t = beats[u(b)], k = (f % row_folds) * R + r;
            const bool live = t >= 0 && k < K;
            ain = Token<V>{b, t, true, live, live ? (ws ? a_at(t, k) : b_at(k, t)) : V{}, f};
          }
        } else {
          ain = a[i - 1];
        }
        if (ain.valid && ain.fold != w_fold[i]) {
          if (sh_fold[i] != ain.fold)
            internal("a fold's stationary operand was not in the PE when its first row arrived");
          w[i] = sh[i];
          w_live[i] = sh_live[i];
          w_fold[i] = sh_fold[i];
        }
        Token<V> pin;
        if (r == 0) {
          if (ain.valid) {
            const int64_t j = (ain.fold / row_folds) * C + c;
            const bool live = ain.elem >= 0 && j < cols_dim;
            if (live && written[u(ain.elem * cols_dim + j)] != ain.fold % row_folds)
              internal("a fold read partial sums its predecessor had not yet written");
            pin = Token<V>{ain.beat, ain.elem, true, true, live ? out_at(ain.elem, j) : V{}, ain.fold};
          }
        } else {
          pin = p[u((r - 1) * C + c)];
        }
        if (ain.valid != pin.valid || (ain.valid && (ain.beat != pin.beat || ain.fold != pin.fold)))
          internal("input and partial sum out of step");
        if (ain.valid && ain.live && w_live[i]) {
          pin.val = arith.mac(pin.val, ain.val, w[i]);
          ++res.macs;
        }
        a_next[i] = ain;
        p_next[i] = pin;
        if (r == R - 1 && pin.valid && pin.elem >= 0) {
          const int64_t j = (pin.fold / row_folds) * C + c;
          if (j < cols_dim) {
            out_at(pin.elem, j) = pin.val;
            ++written[u(pin.elem * cols_dim + j)];
          }
        }
      }
    }
    // The shadow chains: column c shifts fold f+1's tile in during [S_f + c, S_f + c + R).
    for (int64_t c = 0; c < C; ++c) {
      const int64_t q = tau - c;
      if (q < 0 || q % slot >= R || q / slot + 1 >= folds) continue;
      const int64_t f = q / slot + 1, step = q % slot;
      for (int64_t r = step; r >= 1; --r) {
        sh[u(r * C + c)] = sh[u((r - 1) * C + c)];
        sh_live[u(r * C + c)] = sh_live[u((r - 1) * C + c)];
        sh_fold[u(r * C + c)] = -1;
      }
      bool live = false;
      sh[u(c)] = stationary(f, R - 1 - step, c, live);
      sh_live[u(c)] = live;
      sh_fold[u(c)] = -1;
      if (step == R - 1)
        for (int64_t r = 0; r < R; ++r) sh_fold[u(r * C + c)] = f;
    }
    std::swap(a, a_next);
    std::swap(p, p_next);
    if (tau >= last_entry) {
      const bool in_flight = tokens_in_flight(R, C, a, p);
      if (!in_flight) {
        res.cycles += tau + 1;
        return res;
      }
    }
  }
}

// ---- OS: A streams from the left, B from the top, each PE keeps its output ---------------------
template <class Arith>
PeTileResult run_output_stationary(int64_t R, int64_t C, int64_t M, int64_t K, int64_t N,
                                   const std::vector<typename Arith::V>* A,
                                   const std::vector<typename Arith::V>* B,
                                   std::vector<typename Arith::V>& Cm, const Arith& arith,
                                   const PeTimingOptions& opt) {
  using V = typename Arith::V;
  struct Result {
    bool valid = false;
    bool live = false;
    int64_t m = 0, n = 0;
    V val{};
  };
  const std::vector<int64_t> beats = beat_elements(K, opt.rate);
  const int64_t nb = static_cast<int64_t>(beats.size());
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
              const int64_t bt = tau - r, m = m0 + r;
              if (bt >= 0 && bt < nb) {
                const int64_t k = beats[u(bt)];
                const bool live = k >= 0 && m < M;
                ain = Token<V>{bt, k, true, live, (live && A) ? (*A)[u(m * K + k)] : V{}};
              }
            } else {
              ain = a[i - 1];
            }
            if (r == 0) {
              const int64_t bt = tau - c, n = n0 + c;
              if (bt >= 0 && bt < nb) {
                const int64_t k = beats[u(bt)];
                const bool live = k >= 0 && n < N;
                bin = Token<V>{bt, k, true, live, (live && B) ? (*B)[u(k * N + n)] : V{}};
              }
            } else {
              bin = b[u((r - 1) * C + c)];
            }
            if (ain.valid != bin.valid || (ain.valid && ain.beat != bin.beat))
              internal("A and B out of step");
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
        // Column c is complete when its bottom PE has had its last beat: latch it into the shadow chain.
        for (int64_t c = 0; c < C; ++c) {
          const Token<V>& last = a[u((R - 1) * C + c)];
          if (!(last.valid && last.beat == nb - 1)) continue;
          for (int64_t r = 0; r < R; ++r) {
            Result& s = shadow[u(r * C + c)];
            if (s.valid) internal("an output latch would overwrite a result still draining");
            s = Result{true, m0 + r < M && n0 + c < N, m0 + r, n0 + c, acc[u(r * C + c)]};
          }
          shadow_busy = true;
        }
        if (tau >= nb - 1 + std::max(R, C) - 1) {
          const bool in_flight = tokens_in_flight(R, C, a, b);
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
                      std::vector<typename Arith::V>& Cm, const Arith& arith, const PeTimingOptions& opt) {
  if (df == isa::Dataflow::kOs) return run_output_stationary(R, C, m, k, n, A, B, Cm, arith, opt);
  if (opt.pipelined_folds) return run_stationary_pipelined(R, C, df, m, k, n, A, B, Cm, arith, opt);
  return run_stationary(R, C, df, m, k, n, A, B, Cm, arith, opt);
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

PeTileResult PeArray::run(int64_t m, int64_t k, int64_t n, const PeOperands* ops,
                          const PeTimingOptions& opt) const {
  if (m < 1 || k < 1 || n < 1) throw std::invalid_argument("PeArray::run: m, k and n must be at least 1");
  if (!(opt.rate > 0.0)) throw std::invalid_argument("PeArray::run: rate must be positive");
  if (opt.pipelined_folds && !opt.double_buffered)
    throw std::invalid_argument("PeArray::run: pipelined folds need double-buffered stationary registers");
  if (ops == nullptr) {
    std::vector<uint32_t> c(u(m * n));
    return dispatch(rows_, cols_, dataflow_, m, k, n, nullptr, nullptr, c, IntArith{}, opt);
  }
  if (ops->integer) {
    check_size("A", ops->a_int.size(), m * k);
    check_size("B", ops->b_int.size(), k * n);
    const std::vector<uint32_t> a(ops->a_int.begin(), ops->a_int.end()),
        b(ops->b_int.begin(), ops->b_int.end());
    std::vector<uint32_t> c(u(m * n), 0);
    if (!ops->c_int.empty()) {
      check_size("C", ops->c_int.size(), m * n);
      c.assign(ops->c_int.begin(), ops->c_int.end());
    }
    PeTileResult r = dispatch(rows_, cols_, dataflow_, m, k, n, &a, &b, c, IntArith{}, opt);
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
                            FloatArith{ops->accumulate_in}, opt);
  r.c_fp = std::move(c);
  return r;
}

}  // namespace npusim::arch::datapath
