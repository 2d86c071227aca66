// KvEventPublisher (see kv_events.h): a bounded queue filled by the engine
// thread, one thread that owns the ZMQ sockets: PUB (topic, seq, payload) and
// an optional ROUTER answering [id, "", start_seq] with [id, "", seq, payload]
// for each buffered batch from start_seq on, then [id, "", -1, ""] (vLLM's
// ZmqEventPublisher replay protocol).
#include <zmq.h>

#include <chrono>
#include <condition_variable>
#include <deque>
#include <initializer_list>
#include <mutex>
#include <string>
#include <thread>

#include "server/kv_events.h"

namespace tkv::server {
namespace {

Status kv_error(const std::string& msg) {
  return Status(StatusCode::kInvalidArgument, "[kv-events] " + msg);
}

std::string be64(int64_t v) {
  std::string b(8, '\0');
  for (int i = 7; i >= 0; --i, v = static_cast<int64_t>(static_cast<uint64_t>(v) >> 8))
    b[static_cast<size_t>(i)] = static_cast<char>(v & 0xff);
  return b;
}

double unix_seconds() {
  using namespace std::chrono;
  return duration<double>(system_clock::now().time_since_epoch()).count();
}

// Sends frames as one multipart message without waiting (PUB drops past its
// high-water mark; ROUTER drops for a peer that is gone).
void send_frames(void* sock, std::initializer_list<const std::string*> frames) {
  size_t i = 0;
  for (const std::string* f : frames) {
    const int more = ++i < frames.size() ? ZMQ_SNDMORE : 0;
    zmq_send(sock, f->data(), f->size(), ZMQ_DONTWAIT | more);
  }
}

}  // namespace

Status check_kv_events_endpoint(const std::string& ep, const std::string& flag) {
  const std::string forms = "use tcp://HOST:PORT (e.g. tcp://127.0.0.1:5557) or ipc://PATH";
  const size_t sep = ep.find("://");
  if (sep == std::string::npos) return kv_error(flag + " '" + ep + "': no scheme; " + forms);
  const std::string scheme = ep.substr(0, sep), rest = ep.substr(sep + 3);
  if (scheme == "ipc") {
    if (rest.empty()) return kv_error(flag + " '" + ep + "': empty ipc path; " + forms);
    return Status();
  }
  if (scheme != "tcp")
    return kv_error(flag + " '" + ep + "': scheme '" + scheme + "' is not supported; " + forms);
  const size_t colon = rest.rfind(':');
  const std::string host = colon == std::string::npos ? rest : rest.substr(0, colon);
  const std::string port = colon == std::string::npos ? "" : rest.substr(colon + 1);
  if (host.empty() || host == "*")
    return kv_error(flag + " '" + ep +
                    "': name the address to bind (127.0.0.1, or 0.0.0.0 for every interface); " +
                    forms);
  bool digits = !port.empty() && port.size() <= 5;
  for (char c : port) digits = digits && c >= '0' && c <= '9';
  if (!digits || std::stoi(port) > 65535)
    return kv_error(flag + " '" + ep + "': port must be 0 to 65535 (0: a free one); " + forms);
  return Status();
}

struct KvEventPublisher::Impl {
  KvEventsOptions o;
  void* ctx = nullptr;
  void* pub = nullptr;
  void* replay = nullptr;
  std::string endpoint, replay_endpoint;

  mutable std::mutex mu;
  std::condition_variable cv;
  std::deque<std::vector<turbokv::KvEvent>> queue;  // guarded by mu
  bool stopping = false;                            // guarded by mu
  KvEventsStats stats;                              // guarded by mu
  std::thread thread;

  std::deque<std::pair<int64_t, std::string>> sent;  // publisher thread: (seq, payload)
  int64_t next_seq = 0;

  ~Impl() {
    if (pub) zmq_close(pub);
    if (replay) zmq_close(replay);
    if (ctx) zmq_ctx_term(ctx);
  }
  Result<void*> bind(int type, const std::string& ep, std::string* bound);
  void run();
  void publish(const std::vector<turbokv::KvEvent>& events);
  void serve_replay();
};

Result<void*> KvEventPublisher::Impl::bind(int type, const std::string& ep, std::string* bound) {
  void* s = zmq_socket(ctx, type);
  if (s == nullptr) return kv_error(std::string("cannot create a socket: ") + zmq_strerror(errno));
  int linger_ms = 1000;  // at exit, queued messages get this long to leave
  zmq_setsockopt(s, ZMQ_LINGER, &linger_ms, sizeof linger_ms);
  int hwm = 100000;  // messages queued per peer before ZMQ drops (vLLM's PUB default)
  zmq_setsockopt(s, ZMQ_SNDHWM, &hwm, sizeof hwm);
  std::string addr = ep;
  if (addr.rfind("tcp://", 0) == 0) {
    int ipv6 = addr.find('[') != std::string::npos ? 1 : 0;
    zmq_setsockopt(s, ZMQ_IPV6, &ipv6, sizeof ipv6);
    if (addr.size() > 2 && addr.compare(addr.size() - 2, 2, ":0") == 0)
      addr.replace(addr.size() - 1, 1, "*");  // ZMQ's spelling of "a free port"
  }
  if (zmq_bind(s, addr.c_str()) != 0) {
    const std::string why = zmq_strerror(errno);
    zmq_close(s);
    return Status(StatusCode::kIo, "[kv-events] cannot bind " + ep + ": " + why);
  }
  char last[256] = {};
  size_t n = sizeof last;
  *bound = zmq_getsockopt(s, ZMQ_LAST_ENDPOINT, last, &n) == 0 ? std::string(last) : ep;
  return s;
}

Result<std::shared_ptr<KvEventPublisher>> KvEventPublisher::start(const KvEventsOptions& o) {
  auto p = std::make_unique<Impl>();
  p->o = o;
  p->ctx = zmq_ctx_new();
  if (p->ctx == nullptr) return kv_error("cannot create a ZMQ context");
  auto pub = p->bind(ZMQ_PUB, o.endpoint, &p->endpoint);
  if (!pub.ok()) return pub.status();
  p->pub = pub.value();
  if (!o.replay_endpoint.empty()) {
    auto r = p->bind(ZMQ_ROUTER, o.replay_endpoint, &p->replay_endpoint);
    if (!r.ok()) return r.status();
    p->replay = r.value();
  }
  Impl* raw = p.get();
  std::shared_ptr<KvEventPublisher> pub_obj(new KvEventPublisher(std::move(p)));
  // The sockets move to this thread; they are used by it alone from now on.
  raw->thread = std::thread([raw] { raw->run(); });
  return pub_obj;
}

KvEventPublisher::KvEventPublisher(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

KvEventPublisher::~KvEventPublisher() {
  {
    std::lock_guard<std::mutex> lk(impl_->mu);
    impl_->stopping = true;
  }
  impl_->cv.notify_all();
  if (impl_->thread.joinable()) impl_->thread.join();
}

const std::string& KvEventPublisher::endpoint() const {
  return impl_->endpoint;
}
const std::string& KvEventPublisher::replay_endpoint() const {
  return impl_->replay_endpoint;
}

void KvEventPublisher::submit(std::vector<turbokv::KvEvent>&& events) {
  if (events.empty()) return;
  {
    std::lock_guard<std::mutex> lk(impl_->mu);
    if (impl_->queue.size() >= impl_->o.max_queue) {
      ++impl_->stats.batches_dropped;
      impl_->stats.events_dropped += static_cast<int64_t>(events.size());
      return;
    }
    impl_->queue.push_back(std::move(events));
  }
  impl_->cv.notify_one();
}

KvEventsStats KvEventPublisher::stats() const {
  std::lock_guard<std::mutex> lk(impl_->mu);
  return impl_->stats;
}

// Until stopped, and then until the queue is empty: publish what is queued;
// every 20 ms without work, answer replay requests.
void KvEventPublisher::Impl::run() {
  for (;;) {
    std::vector<turbokv::KvEvent> batch;
    bool have = false;
    {
      std::unique_lock<std::mutex> lk(mu);
      cv.wait_for(lk, std::chrono::milliseconds(20), [&] { return stopping || !queue.empty(); });
      if (!queue.empty()) {
        batch = std::move(queue.front());
        queue.pop_front();
        have = true;
      } else if (stopping) {
        return;
      }
    }
    if (have) publish(batch);
    if (replay != nullptr) serve_replay();
  }
}

void KvEventPublisher::Impl::publish(const std::vector<turbokv::KvEvent>& events) {
  const int64_t seq = next_seq++;
  std::string payload = encode_kv_event_batch(unix_seconds(), events, o.medium, o.map_events);
  const std::string seq_bytes = be64(seq);
  send_frames(pub, {&o.topic, &seq_bytes, &payload});
  {
    std::lock_guard<std::mutex> lk(mu);
    ++stats.batches_published;
    stats.events_published += static_cast<int64_t>(events.size());
  }
  if (replay == nullptr || o.replay_batches == 0) return;
  sent.emplace_back(seq, std::move(payload));
  if (sent.size() > o.replay_batches) sent.pop_front();
}

void KvEventPublisher::Impl::serve_replay() {
  for (;;) {
    std::vector<std::string> frames;
    int more = 1;
    while (more) {
      zmq_msg_t m;
      zmq_msg_init(&m);
      if (zmq_msg_recv(&m, replay, ZMQ_DONTWAIT) < 0) {
        zmq_msg_close(&m);
        return;  // nothing waiting (a multipart message arrives whole or not at all)
      }
      frames.emplace_back(static_cast<const char*>(zmq_msg_data(&m)), zmq_msg_size(&m));
      more = zmq_msg_more(&m);
      zmq_msg_close(&m);
    }
    if (frames.size() != 3 || frames[2].size() != 8) continue;  // not [id, "", seq]: ignored
    int64_t start = 0;
    for (unsigned char c : frames[2])
      start = static_cast<int64_t>((static_cast<uint64_t>(start) << 8) | c);
    const std::string empty;
    for (const auto& [seq, payload] : sent) {
      if (seq < start) continue;
      const std::string seq_bytes = be64(seq);
      send_frames(replay, {&frames[0], &empty, &seq_bytes, &payload});
    }
    const std::string end = be64(-1);
    send_frames(replay, {&frames[0], &empty, &end, &empty});
    std::lock_guard<std::mutex> lk(mu);
    ++stats.replays;
  }
}

}  // namespace tkv::server
