// ThreadPool implementation: one job at a time, published as a generation
// number. A worker enters a job only while it is open (job_state_ counts those
// inside), so the caller can close a dynamic job and return as soon as the
// chunks are done, without waiting for workers that never woke up.
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

inline void cpu_relax() {
#if defined(__x86_64__)
  __builtin_ia32_pause();
#endif
}
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
  uint64_t seen = 0, last_run = 0;
  for (;;) {
    uint64_t g = generation_.load(std::memory_order_acquire);
    for (int spins = 0; g == seen && spins < kSpinIters; ++spins) {
      cpu_relax();
      g = generation_.load(std::memory_order_acquire);
    }
    if (g == seen) {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [&] { return generation_.load() != seen; });
      g = generation_.load(std::memory_order_acquire);
    }
    if (stop_.load()) return;
    // Job g was opened before g was published; finding it closed means it finished without us.
    const uint64_t id = job_state_.fetch_add(1, std::memory_order_acq_rel) >> kIdShift;
    if (id != 0 && id != last_run) {
      last_run = id;
      (*task_)(index);
      done_.fetch_add(1, std::memory_order_acq_rel);
    }
    job_state_.fetch_sub(1, std::memory_order_acq_rel);
    seen = id != 0 ? std::max(id, g) : g;
  }
}

void ThreadPool::publish(const std::function<void(int)>* task) {
  const uint64_t id = next_id_++;
  task_ = task;
  done_.store(0, std::memory_order_relaxed);
  // Open only when closed and empty (a worker that peeked at the closed previous job may still be
  // leaving).
  for (uint64_t want = 0;
       !job_state_.compare_exchange_weak(want, id << kIdShift, std::memory_order_acq_rel);
       want = 0) {
    cpu_relax();
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    generation_.store(id, std::memory_order_release);
  }
  cv_.notify_all();
}

void ThreadPool::close_and_drain() {
  job_state_.fetch_and(kCountMask, std::memory_order_acq_rel);
  for (int spins = 0; (job_state_.load(std::memory_order_acquire) & kCountMask) != 0; ++spins) {
    if (spins < kSpinIters) {
      cpu_relax();
    } else {
      std::this_thread::yield();  // an oversubscribed machine may need to run the worker we wait
                                  // for
    }
  }
}

void ThreadPool::run_on_all(const std::function<void(int)>& fn) {
  if (n_threads_ == 1) {
    fn(0);
    return;
  }
  publish(&fn);
  fn(0);
  for (int spins = 0; done_.load(std::memory_order_acquire) != n_threads_ - 1; ++spins) {
    if (spins < kSpinIters) {
      cpu_relax();
    } else {
      std::this_thread::yield();
    }
  }
  close_and_drain();
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

void ThreadPool::parallel_for_dynamic(int64_t n, int64_t grain,
                                      const std::function<void(int, int64_t, int64_t)>& fn) {
  if (n <= 0) return;
  grain = std::max<int64_t>(grain, 1);
  const int64_t n_chunks = (n + grain - 1) / grain;
  std::atomic<int64_t> next{0};
  const std::function<void(int)> take = [&](int t) {
    for (int64_t c = next.fetch_add(1, std::memory_order_relaxed); c < n_chunks;
         c = next.fetch_add(1, std::memory_order_relaxed)) {
      fn(t, c * grain, std::min(n, (c + 1) * grain));
    }
  };
  if (n_threads_ == 1 || n_chunks == 1) {
    take(0);
    return;
  }
  publish(&take);
  take(0);
  close_and_drain();  // every chunk was taken; wait only for workers still inside one
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
