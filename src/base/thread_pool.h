// ThreadPool: a fixed set of workers for data-parallel loops. The caller's
// thread takes part, so n_threads == 1 runs inline with no synchronisation.
// parallel_for splits [0, n) into contiguous chunks, one per thread; workers
// spin briefly before sleeping so back-to-back decode kernels stay cheap.
#pragma once
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace tkv {

class ThreadPool {
 public:
  explicit ThreadPool(int n_threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int n_threads() const { return n_threads_; }
  // fn(thread_index, begin, end) on disjoint ranges covering [0, n).
  void parallel_for(int64_t n, const std::function<void(int, int64_t, int64_t)>& fn);
  // fn(thread_index) once per thread.
  void run_on_all(const std::function<void(int)>& fn);
  // Process-wide default pool (threads from TKV_THREADS or hardware_concurrency).
  static ThreadPool& global();
  static void set_global_threads(int n_threads);

 private:
  void worker_loop(int index);
  int n_threads_;
  std::vector<std::thread> workers_;
  std::mutex mu_;
  std::condition_variable cv_;
  const std::function<void(int)>* task_ = nullptr;
  std::atomic<uint64_t> generation_{0};
  std::atomic<int> pending_{0};
  std::atomic<bool> stop_{false};
};

}  // namespace tkv
