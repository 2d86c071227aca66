// The HTTP server (see server.h): cpp-httplib with a thread pool large enough
// for many streaming clients (each holds a thread while it streams), OpenAI
// error bodies for httplib's own 404/413, auth before routing, and the drain.
#include "server/server.h"

#include <httplib.h>
#include <sys/socket.h>

#include <condition_variable>
#include <thread>

#include "server/auth.h"
#include "server/generation.h"
#include "server/routes.h"

namespace tkv::server {

struct Server::Impl {
  ServerState s;
  httplib::Server http;
  std::mutex drainer_mu;  // shutdown() and ~Server() may run on different threads
  std::thread drainer;
  std::mutex mu;
  std::condition_variable cv;
  bool run_returned = false;
  int listen_fd = -1;

  explicit Impl(ServerOptions o) : s(std::move(o)) {}
  void drain();
};

namespace {

// httplib's own error responses (no route, body too large, unreadable request)
// get OpenAI's error shape; bodies set by the routes are kept.
httplib::Server::HandlerResponse reshape_error(ServerState& s, const httplib::Request& req,
                                               httplib::Response& res) {
  if (!res.body.empty()) return httplib::Server::HandlerResponse::Unhandled;
  ApiError e{res.status, "", "invalid_request_error", "", ""};
  if (res.status == 404) {
    e.message = "no route " + req.method + " " + req.path;
    e.type = "not_found_error";
    e.code = "not_found";
  } else if (res.status == 413) {
    e.message = "the request body is larger than the limit of " +
                std::to_string(s.opts.max_body_bytes) + " bytes";
    e.code = "payload_too_large";
  } else {
    e.message = "HTTP " + std::to_string(res.status);
    if (res.status >= 500) e.type = "server_error";
  }
  fail(s, res, e);
  return httplib::Server::HandlerResponse::Handled;
}

}  // namespace

Server::Server(ServerOptions opts) : impl_(std::make_unique<Impl>(std::move(opts))) {
  ServerState& s = impl_->s;
  httplib::Server& h = impl_->http;
  const int threads = std::max(8, s.opts.http_threads);
  h.new_task_queue = [threads] { return new httplib::ThreadPool(threads); };
  h.set_payload_max_length(s.opts.max_body_bytes);
  // httplib's default sets SO_REUSEPORT (a second server on the same port would
  // share it silently): SO_REUSEADDR only, and remember the socket for bind().
  h.set_socket_options([impl = impl_.get()](socket_t sock) {
    int yes = 1;
    setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof(yes));
    impl->listen_fd = sock;
  });
  h.set_keep_alive_timeout(2);  // an idle connection holds a pool thread this long
  h.set_pre_routing_handler([&s](const httplib::Request& req, httplib::Response& res) {
    // /health is open; so is the chat page itself (static, no data: a browser
    // cannot send a key for a page load; the page sends it on every API call).
    const bool open = req.path == "/health" || (req.path == "/" && req.method == "GET");
    if (!s.opts.api_key.empty() && !open && !authorized(req, s.opts.api_key)) {
      fail(s, res,
           ApiError{401, "missing or wrong API key (send Authorization: Bearer KEY)",
                    "authentication_error", "", "invalid_api_key"});
      return httplib::Server::HandlerResponse::Handled;
    }
    if (!s.ready() && !open) {
      fail(s, res, ApiError{503, "the model is loading", "server_error", "", "loading"});
      return httplib::Server::HandlerResponse::Handled;
    }
    return httplib::Server::HandlerResponse::Unhandled;
  });
  h.set_error_handler(httplib::Server::HandlerWithResponse(
      [&s](const httplib::Request& req, httplib::Response& res) {
        return reshape_error(s, req, res);
      }));
  h.set_exception_handler(
      [&s](const httplib::Request&, httplib::Response& res, std::exception_ptr ep) {
        std::string what = "unknown exception";
        try {
          std::rethrow_exception(ep);
        } catch (const std::exception& x) {
          what = x.what();
        } catch (...) {
        }
        fail(s, res, ApiError{500, "internal error: " + what, "server_error", "", ""});
      });
  add_openai_routes(h, s);
  add_misc_routes(h, s);
  add_slot_routes(h, s);
}

Server::~Server() {
  std::thread t;
  {
    std::lock_guard<std::mutex> lk(impl_->drainer_mu);
    t = std::move(impl_->drainer);
  }
  if (t.joinable()) t.join();
}

Result<int> Server::bind() {
  const ServerOptions& o = impl_->s.opts;
  const int port = o.port == 0 ? impl_->http.bind_to_any_port(o.host)
                               : (impl_->http.bind_to_port(o.host, o.port) ? o.port : -1);
  if (port <= 0)
    return Status(StatusCode::kIo, "[server] cannot listen on " + o.host + ":" +
                                       std::to_string(o.port) +
                                       " (in use, or not an address here)");
  // httplib 0.11 listens with a backlog of 5: a burst of new connections (64
  // clients at once) overflows it and some are reset. Linux takes a second
  // listen() on a listening socket as a new backlog.
  ::listen(impl_->listen_fd, SOMAXCONN);
  return port;
}

void Server::set_engine(turbokv::Engine& eng) {
  impl_->s.slots->init(eng.config().max_seqs, eng.config().context);
  impl_->s.engine = &eng;
}

void Server::set_kv_events(std::shared_ptr<KvEventPublisher> pub) {
  impl_->s.kv_events = std::move(pub);
}

void Server::run() {
  impl_->http.listen_after_bind();
  {
    std::lock_guard<std::mutex> lk(impl_->mu);
    impl_->run_returned = true;
  }
  impl_->cv.notify_all();
}

// Stop accepting at once (httplib closes the listening socket; each connection
// ends after its current request); requests in flight get drain_timeout_s, then
// are cancelled so their streams end and run() returns.
void Server::Impl::drain() {
  http.stop();
  std::unique_lock<std::mutex> lk(mu);
  const auto limit = std::chrono::duration<double>(s.opts.drain_timeout_s);
  if (cv.wait_for(lk, limit, [&] { return run_returned; })) return;
  {
    std::lock_guard<std::mutex> live(s.live_mu);
    for (Generation* g : s.live) g->cancel();
  }
  cv.wait(lk, [&] { return run_returned; });
}

void Server::shutdown() {
  std::lock_guard<std::mutex> lk(impl_->drainer_mu);
  if (impl_->s.draining.exchange(true)) return;
  impl_->drainer = std::thread([this] { impl_->drain(); });
}

}  // namespace tkv::server
