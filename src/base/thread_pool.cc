// ThreadPool implementation: generation counter + spin-then-sleep workers.
#include "base/thread_pool.h"

#include <algorithm>
#include <cstdlib>
#include <memory>

#include "base/check.h"

namespace tkv {
namespace {
std::unique_ptr<ThreadPool> g_pool;
std::mutex g_pool_mu;
constexpr int kSpinIters = 4000;  // ~100 us of pause before sleeping / yielding
}  // namespace

ThreadPool::ThreadPool(int n_threads) : n_threads_(n_threads < 1 ? 1 : n_threads) {
  for (int i = 1; i < n_threads_; ++i) workers_.emplace_back([this, i] { worker_loop(i); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_.store(true);
    generation_.fetch_add(1);
  }
  cv_.notify_all();
  for (auto& t : workers_) t.join();
}

void ThreadPool::worker_loop(int index) {
  uint64_t seen = 0;
  for (;;) {
    int spins = 0;
    while (generation_.load(std::memory_order_acquire) == seen && spins < kSpinIters) {
      ++spins;
#if defined(__x86_64__)
      __builtin_ia32_pause();
#endif
    }
    if (generation_.load(std::memory_order_acquire) == seen) {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [&] { return generation_.load() != seen; });
    }
    seen = generation_.load(std::memory_order_acquire);
    if (stop_.load()) return;
    (*task_)(index);
    pending_.fetch_sub(1, std::memory_order_acq_rel);
  }
}

void ThreadPool::run_on_all(const std::function<void(int)>& fn) {
  if (n_threads_ == 1) {
    fn(0);
    return;
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    task_ = &fn;
    pending_.store(n_threads_ - 1, std::memory_order_release);
    generation_.fetch_add(1, std::memory_order_acq_rel);
  }
  cv_.notify_all();
  fn(0);
  // Spin briefly (the usual case: workers finish within microseconds), then
  // yield so an oversubscribed machine can run the worker we are waiting for.
  for (int spins = 0; pending_.load(std::memory_order_acquire) != 0; ++spins) {
    if (spins < kSpinIters) {
#if defined(__x86_64__)
      __builtin_ia32_pause();
#endif
    } else {
      std::this_thread::yield();
    }
  }
}

void ThreadPool::parallel_for(int64_t n, const std::function<void(int, int64_t, int64_t)>& fn) {
  if (n <= 0) return;
  const int nt = static_cast<int>(std::min<int64_t>(n_threads_, n));
  if (nt == 1) {
    fn(0, 0, n);
    return;
  }
  run_on_all([&](int t) {
    if (t >= nt) return;
    const int64_t begin = n * t / nt, end = n * (t + 1) / nt;
    if (begin < end) fn(t, begin, end);
  });
}

ThreadPool& ThreadPool::global() {
  std::lock_guard<std::mutex> lock(g_pool_mu);
  if (!g_pool) {
    const char* e = std::getenv("TKV_THREADS");
    int n = e ? std::atoi(e) : static_cast<int>(std::thread::hardware_concurrency());
    g_pool = std::make_unique<ThreadPool>(n > 0 ? n : 1);
  }
  return *g_pool;
}

void ThreadPool::set_global_threads(int n_threads) {
  std::lock_guard<std::mutex> lock(g_pool_mu);
  g_pool = std::make_unique<ThreadPool>(n_threads);
}

}  // namespace tkv
