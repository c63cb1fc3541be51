#pragma once
// A FIFO of small values in a power-of-two ring that doubles when full: the token channels and the DMA
// queues' retirement window, pushed and popped once or twice per instruction, where std::deque walks
// its chunk map on every access. Grows, never shrinks (its length is what the program keeps in flight).
#include <cstddef>
#include <vector>

namespace npusim::arch {

template <class T>
class Ring {
 public:
  bool empty() const { return head_ == tail_; }
  size_t size() const { return tail_ - head_; }
  // The i-th value from the front. Precondition: i < size().
  T& operator[](size_t i) { return buf_[(head_ + i) & mask_]; }
  T& front() { return (*this)[0]; }
  void push_back(const T& v) {
    if (size() == buf_.size()) grow();
    buf_[tail_++ & mask_] = v;
  }
  // Precondition: !empty().
  void pop_front() { ++head_; }

 private:
  void grow() {
    std::vector<T> b(buf_.empty() ? 8 : 2 * buf_.size());
    const size_t n = size();
    for (size_t i = 0; i < n; ++i) b[i] = (*this)[i];
    buf_.swap(b);
    mask_ = buf_.size() - 1;
    head_ = 0;
    tail_ = n;
  }

  std::vector<T> buf_;
  size_t head_ = 0, tail_ = 0, mask_ = 0;  // head_ and tail_ count from the start: index & mask_
};

}  // namespace npusim::arch
