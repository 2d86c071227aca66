// ThreadPool: a fixed set of workers for data-parallel loops. The caller's
// thread takes part, so n_threads == 1 runs inline with no synchronisation.
// parallel_for splits [0, n) into one contiguous range per thread;
// parallel_for_dynamic hands out fixed-size chunks to whichever threads show up,
// so a worker descheduled on a busy machine never stalls the caller (work
// sharing as in ggml-cpu's mul_mat chunk counter). Workers spin, then sleep.
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
  // fn(thread_index, begin, end) on disjoint ranges covering [0, n), one per thread.
  void parallel_for(int64_t n, const std::function<void(int, int64_t, int64_t)>& fn);
  // fn(thread_index, begin, end) once per chunk [k*grain, min(n, (k+1)*grain)); chunks
  // go to threads in no fixed order (a thread may run several, some threads none).
  // Chunk boundaries depend only on n and grain, never on the thread count.
  void parallel_for_dynamic(int64_t n, int64_t grain,
                            const std::function<void(int, int64_t, int64_t)>& fn);
  // fn(thread_index) once per thread.
  void run_on_all(const std::function<void(int)>& fn);
  // Process-wide default pool (threads from TKV_THREADS or hardware_concurrency).
  static ThreadPool& global();
  static void set_global_threads(int n_threads);

 private:
  // job_state_ = (id of the open job, 0 when closed) << kIdShift | workers inside it.
  static constexpr int kIdShift = 20;
  static constexpr uint64_t kCountMask = (uint64_t{1} << kIdShift) - 1;
  void worker_loop(int index);
  void publish(const std::function<void(int)>* task);  // opens a new job and wakes workers
  void close_and_drain();  // no new worker enters; wait for those inside
  int n_threads_;
  std::vector<std::thread> workers_;
  std::mutex mu_;
  std::condition_variable cv_;
  const std::function<void(int)>* task_ = nullptr;  // read only by workers inside an open job
  uint64_t next_id_ = 1;                            // caller side only
  std::atomic<uint64_t> generation_{0};             // id of the latest job (wake-up signal)
  std::atomic<uint64_t> job_state_{0};
  std::atomic<int> done_{0};  // workers that ran the current job
  std::atomic<bool> stop_{false};
};

}  // namespace tkv
