#pragma once
// The banked DRAM model (dram.h): channels of banks with open-row buffers, refresh and read/write
// turnaround. Declared here, with access() inline and the class final, so that the DMA burst loop
// (dma.h, DmaBurstEngine) calls it directly: a transfer is tens to thousands of bursts, and a virtual
// call per burst kept the model's arithmetic from being inlined into the loop.
#include <algorithm>
#include <cstdint>
#include <vector>

#include "isa/timing/dram.h"
#include "isa/timing/fast_div.h"

namespace npusim::isa::timing {

// The outstanding-request window of a DMA engine's transfer (DmaBurstEngine): a request is issued at the
// later of the previous one's issue and ring[next], the completion of the request `size` before it, and
// its own completion takes that slot.
struct IssueWindow {
  uint64_t* ring;
  size_t size;
  size_t next;
  uint64_t issue;     // the last request's
  uint64_t done_max;  // the latest completion so far

  uint64_t take() { return issue = std::max(issue, ring[next]); }
  void complete(uint64_t done) {
    ring[next] = done;
    next = next + 1 == size ? 0 : next + 1;
    done_max = std::max(done_max, done);
  }
};

// Address map (low to high): byte within the channel interleave unit, channel, then per channel: column
// within the page, bank, row -- so a sequential stream spreads over the channels and walks each page
// before moving to the next bank.
class BankedDram final : public Dram {
 public:
  BankedDram(const BankedDramTiming& t, int channels, Refresh refresh);

  BankedDram* banked() override { return this; }
  int channels() const override { return channels_; }
  int channel_of(uint64_t addr) const override { return static_cast<int>(chan_.mod(unit_.div(addr))); }
  double peak_bandwidth_gbps() const override { return t_.peak_gbps() * channels_; }
  double idle_latency_ns() const override { return t_.t_rcd_ns + t_.t_cl_ns + t_.t_burst_ns; }

  uint64_t access(uint64_t addr, uint32_t bytes, bool write, uint64_t issue_ps) override {
    return serve(place(addr), beats(bytes), write, issue_ps);
  }

 private:
  struct Bank {
    int64_t open_row = -1;
    uint64_t act = 0;    // time of the last activate
    uint64_t ready = 0;  // earliest next command
    uint64_t pending_act = 0;
  };
  struct Channel {
    std::vector<Bank> banks;
    uint64_t bus_free = 0;
    uint64_t next_refresh = 0;
    bool last_write = false;
    bool any = false;
  };

 public:
  // Where an address lives: its channel, bank and row. The same for every byte of one interleave unit
  // when a page holds whole units (every preset), so a burst loop may keep it across the unit's bursts.
  struct Place {
    Channel* ch;
    Bank* bank;
    int64_t row;
  };
  Place place(uint64_t addr) { return address_map().place(addr); }
  // The address map by value, for a burst loop to keep in its frame: place() through a member reloads the
  // divisors after every store the loop makes (a store through a uint64_t* may alias them).
  struct AddressMap {
    FastDiv unit, chan, stripe, page, bank;
    Channel* chans;
    bool pow2() const { return unit.pow2() && chan.pow2() && stripe.pow2() && page.pow2() && bank.pow2(); }
    // kPow2: pow2() holds (every preset's map), so that every division is a shift.
    template <bool kPow2 = false>
    Place place(uint64_t addr) const {
      Channel& ch = chans[chan.mod_as<kPow2>(unit.div_as<kPow2>(addr))];
      const uint64_t local = stripe.div_as<kPow2>(addr) * unit.divisor() + unit.mod_as<kPow2>(addr);
      const uint64_t pg = page.div_as<kPow2>(local);
      return Place{&ch, &ch.banks[bank.mod_as<kPow2>(pg)], static_cast<int64_t>(bank.div_as<kPow2>(pg))};
    }
  };
  AddressMap address_map() { return AddressMap{unit_, chan_, stripe_, page_, bank_, chans_.data()}; }
  // The interleave unit of an address, and whether place() is the same for all of a unit's bytes.
  uint64_t unit_of(uint64_t addr) const { return unit_.div(addr); }
  uint64_t unit_bytes() const { return unit_.divisor(); }
  bool place_per_unit() const { return page_.divisor() % unit_.divisor() == 0; }
  int banks() const { return static_cast<int>(bank_.divisor()); }
  // What an address moves by to reach the next bank at the same channel and column (one page on every
  // channel), when place_per_unit().
  uint64_t bank_stride_bytes() const { return page_.divisor() * chan_.divisor(); }
  // Device bursts a request of `bytes` takes.
  uint64_t beats(uint32_t bytes) const { return burst_.div(bytes + burst_.divisor() - 1); }

  // `count` requests at `p` of `beats` device bursts each, issued through window `w` and served in order
  // as `count` calls of serve() would serve them; per_request(j, issue, done) is called for each (traces).
  // A DMA burst loop's bursts of one interleave unit: after the first, each is a row hit of the same
  // direction on the same channel, which runs here with the bank's and channel's times and the window in
  // locals (the loop's serial dependence); whatever else may happen (a miss, a turnaround, a refresh
  // due) goes to serve().
  template <class PerRequest>
  void serve_run(const Place& p, uint64_t beats, bool write, int64_t count, IssueWindow& window,
                 PerRequest&& per_request) {
    Channel& ch = *p.ch;
    Bank& bank = *p.bank;
    const uint64_t busy = beats * t_burst_;
    const uint64_t t_cl = t_cl_;
    // The window in scalars (one field at a time: a copy of the struct was compiled to 16-byte loads over
    // the 8-byte stores just made to it, which the store buffer cannot forward). Inlined into a caller whose
    // window is a local, they stay in registers across the ring's stores.
    uint64_t* const ring = window.ring;
    const size_t size = window.size;
    size_t next = window.next;
    uint64_t issue = window.issue;  // IssueWindow::take's running maximum
    uint64_t done_max = window.done_max;
    int64_t served = 0;  // by serve(), which counts them itself
    int64_t j = 0;
    while (j < count) {
      issue = std::max(issue, ring[next]);
      if (bank.open_row == p.row && ch.any && ch.last_write == write) {
        // Row hits: serve()'s hit case while no refresh falls due. A hit ends after the bus is free and after
        // its issue (end > max(issue, bus) when busy > 0), so a refresh due by then is one it runs into.
        uint64_t bus = ch.bus_free, ready = bank.ready;
        const uint64_t refresh_at = ch.next_refresh;
        const int64_t first = j;
        for (;;) {
          const uint64_t cmd = std::max(issue, ready);
          const uint64_t end = std::max(cmd + t_cl, bus) + busy;
          if (end > refresh_at || (busy == 0 && refresh_at <= std::max(issue, bus))) break;
          ready = cmd + busy;
          bus = end;
          ring[next] = end;
          next = next + 1 == size ? 0 : next + 1;
          per_request(j, issue, end);
          if (++j == count) break;
          issue = std::max(issue, ring[next]);
        }
        ch.bus_free = bus;
        bank.ready = ready;
        if (j > first) done_max = std::max(done_max, bus);  // the hits' ends increase: the last is their max
        if (j == count) break;
      }
      // A miss, a turnaround, or the request a refresh stopped.
      const uint64_t end = serve(p, beats, write, issue);
      ring[next] = end;
      next = next + 1 == size ? 0 : next + 1;
      done_max = std::max(done_max, end);
      per_request(j, issue, end);
      ++served;
      ++j;
    }
    window.next = next;
    window.issue = issue;
    window.done_max = done_max;
    stats_.requests += static_cast<uint64_t>(count - served);
    stats_.row_hits += static_cast<uint64_t>(count - served);
  }

  // `count` requests at `p` of `beats` device bursts each, all issued at `issue` (a window that never holds
  // one back), served in order as `count` calls of serve() would serve them; done_max takes their latest
  // completion. A run of row hits is one step: after a hit the bank is ready again (command + busy) after
  // the issue and the bus frees (at least) CL after that, so the next hit's command is at the bank's ready
  // time and its data right after the bus's: each next hit ends one burst's time after the one before, until
  // a refresh falls due. serve_run's arithmetic with its maxima decided.
  void serve_fixed_issue(const Place& p, uint64_t beats, bool write, int64_t count, uint64_t issue,
                         uint64_t& done_max) {
    Channel& ch = *p.ch;
    Bank& bank = *p.bank;
    const uint64_t busy = beats * t_burst_;
    int64_t j = 0;
    while (j < count) {
      if (busy > 0 && bank.open_row == p.row && ch.any && ch.last_write == write) {
        const uint64_t cmd = std::max(issue, bank.ready);
        const uint64_t end = std::max(cmd + t_cl_, ch.bus_free) + busy;
        if (end <= ch.next_refresh) {
          const auto n = static_cast<int64_t>(
              std::min<uint64_t>(static_cast<uint64_t>(count - j), (ch.next_refresh - end) / busy + 1));
          const uint64_t last = end + static_cast<uint64_t>(n - 1) * busy;
          bank.ready = cmd + static_cast<uint64_t>(n) * busy;
          ch.bus_free = last;
          done_max = std::max(done_max, last);
          stats_.requests += static_cast<uint64_t>(n);
          stats_.row_hits += static_cast<uint64_t>(n);
          j += n;
          continue;
        }
      }
      done_max = std::max(done_max, serve(p, beats, write, issue));  // a miss, a turnaround or a refresh
      ++j;
    }
  }

  // access() of a request at `p` taking `beats` device bursts.
  uint64_t serve(const Place& p, uint64_t beats, bool write, uint64_t issue_ps) {
    ++stats_.requests;
    Channel& ch = *p.ch;
    Bank& bank = *p.bank;
    const int64_t row = p.row;
    uint64_t t = issue_ps;
    for (;;) {
      // Refreshes due before this request are applied first: all banks close, the channel blocks.
      while (ch.next_refresh <= std::max(t, ch.bus_free)) refresh(ch);
      uint64_t cmd;
      bool hit = bank.open_row == row;
      if (hit) {
        cmd = std::max(t, bank.ready);
      } else {
        uint64_t act = std::max(t, bank.ready);
        if (bank.open_row >= 0) act = std::max(act, bank.act + t_ras_) + t_rp_;
        cmd = act + t_rcd_;
        bank.pending_act = act;
      }
      uint64_t data = cmd + t_cl_;
      if (ch.any && ch.last_write != write) data = std::max(data, ch.bus_free + (write ? t_rtw_ : t_wtr_));
      data = std::max(data, ch.bus_free);
      const uint64_t end = data + beats * t_burst_;
      if (end > ch.next_refresh) {  // would run into a refresh: refresh first, then retry
        t = std::max(t, ch.next_refresh);
        refresh(ch);
        continue;
      }
      if (hit) {
        ++stats_.row_hits;
      } else {
        ++stats_.row_misses;
        bank.open_row = row;
        bank.act = bank.pending_act;
      }
      bank.ready = cmd + beats * t_burst_;
      ch.bus_free = end;
      ch.last_write = write;
      ch.any = true;
      return end;
    }
  }

 private:
  void refresh(Channel& ch) {
    const uint64_t done = std::max(ch.next_refresh, ch.bus_free) + t_rfc_;
    for (Bank& b : ch.banks) {
      b.open_row = -1;
      b.ready = std::max(b.ready, done);
    }
    ch.bus_free = std::max(ch.bus_free, done);
    ch.next_refresh += t_refi_;
    ++stats_.refreshes;
  }

  BankedDramTiming t_;
  int channels_;
  uint64_t t_burst_, t_cl_, t_rcd_, t_rp_, t_ras_, t_refi_, t_rfc_, t_wtr_, t_rtw_;
  // The address map's divisors: interleave unit, channels, unit x channels, page, banks, burst.
  FastDiv unit_, chan_, stripe_, page_, bank_, burst_;
  std::vector<Channel> chans_;
};

}  // namespace npusim::isa::timing
