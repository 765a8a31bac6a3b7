#include "interpreter/ui/server.h"

#include <httplib.h>

#include <arpa/inet.h>

#include <algorithm>
#include <cctype>
#include <memory>
#include <random>
#include <stdexcept>

#include "interpreter/ui/dashboard.h"

namespace ipu::ui {

bool isLoopback(const std::string& address) {
  if (address == "localhost" || address == "::1" || address == "[::1]") return true;
  in_addr v4{};
  return inet_pton(AF_INET, address.c_str(), &v4) == 1 && (ntohl(v4.s_addr) >> 24) == 127;
}

std::string newToken() {
  std::random_device device;  // the system's random source (/dev/urandom on Linux)
  const char* hex = "0123456789abcdef";
  std::string token;
  for (int i = 0; i < 8; ++i) {
    unsigned v = device();
    for (int k = 0; k < 4; ++k, v >>= 8) {
      token += hex[(v >> 4) & 15];
      token += hex[v & 15];
    }
  }
  return token;
}

namespace {

constexpr const char* kCookie = "ipu_ui_token";

// Compares in time independent of where the texts differ (a token guessed
// byte by byte from response times learns nothing).
bool sameSecret(const std::string& a, const std::string& b) {
  if (a.size() != b.size()) return false;
  unsigned char diff = 0;
  for (std::size_t i = 0; i < a.size(); ++i) diff |= static_cast<unsigned char>(a[i] ^ b[i]);
  return diff == 0;
}

std::string cookieValue(const std::string& header, const std::string& name) {
  std::size_t at = 0;
  while (at < header.size()) {
    std::size_t end = header.find(';', at);
    if (end == std::string::npos) end = header.size();
    std::string part = header.substr(at, end - at);
    part.erase(0, part.find_first_not_of(' '));
    if (part.compare(0, name.size() + 1, name + "=") == 0) return part.substr(name.size() + 1);
    at = end + 1;
  }
  return "";
}

// A decoded path as it goes in a Location header: bytes other than letters,
// digits, `-._~/` percent-encoded.
std::string encodePath(const std::string& path) {
  const char* hex = "0123456789ABCDEF";
  std::string out;
  for (unsigned char c : path) {
    if (std::isalnum(c) || c == '-' || c == '.' || c == '_' || c == '~' || c == '/') out += static_cast<char>(c);
    else out += {'%', hex[c >> 4], hex[c & 15]};
  }
  return out;
}

Query queryOf(const httplib::Request& req) { return Query(req.params.begin(), req.params.end()); }

// The body goes out through a content provider of known length, which
// cpp-httplib sends as it is: a body set with set_content is compressed for
// a browser, with Brotli at its highest quality (0.11 has no switch), which
// took 1.7 s for the 0.5 MB of a table of 1,000 runs: far more than sending
// it uncompressed over loopback or a LAN costs.
void send(httplib::Response& res, const Reply& reply) {
  res.status = reply.status;
  auto body = std::make_shared<std::string>(reply.body);
  res.set_content_provider(body->size(), reply.contentType.c_str(),
                           [body](std::size_t offset, std::size_t length, httplib::DataSink& sink) {
                             sink.write(body->data() + offset, std::min(length, body->size() - offset));
                             return true;
                           });
}

void sendError(httplib::Response& res, int status, const std::string& message) { send(res, errorReply(status, message)); }

}  // namespace

struct Server::Impl {
  ServerOptions options;
  Dashboard dashboard;
  httplib::Server http;
  int port = 0;

  explicit Impl(ServerOptions o) : options(std::move(o)), dashboard(options.store, options.writable, options.pollMilliseconds) {}

  // The Host headers a browser sends for this server on loopback.
  bool hostAllowed(const std::string& host) const {
    if (host.empty()) return true;  // HTTP/1.0 clients (curl -0): not a browser
    const std::string p = ":" + std::to_string(port);
    for (const std::string name : {"127.0.0.1", "localhost", "[::1]"})
      if (host == name + p) return true;
    const std::string bound = options.bind.find(':') != std::string::npos && options.bind.front() != '[' ? "[" + options.bind + "]"
                                                                                                      : options.bind;
    return host == bound + p;
  }

  // Who may ask (server.h); true: go on to the routes.
  bool admit(const httplib::Request& req, httplib::Response& res) const {
    if (!options.token.empty()) {
      if (req.has_param("token")) {
        if (!sameSecret(req.get_param_value("token"), options.token)) {
          sendError(res, 403, "this is not the dashboard's token: open the URL `ipu ui` printed");
          return false;
        }
        // Kept as a cookie for this server only, then dropped from the URL
        // (out of the history, the address bar and any Referer).
        res.set_header("Set-Cookie", std::string(kCookie) + "=" + options.token + "; Path=/; HttpOnly; SameSite=Strict");
        std::string rest;
        for (const auto& [k, v] : req.params)
          if (k != "token") rest += (rest.empty() ? "?" : "&") + httplib::detail::encode_query_param(k) + "=" +
                                    httplib::detail::encode_query_param(v);
        res.set_redirect(encodePath(req.path) + rest, 303);
        return false;
      }
      const std::string given = req.has_header("X-Ipu-Token") ? req.get_header_value("X-Ipu-Token")
                                                                : cookieValue(req.get_header_value("Cookie"), kCookie);
      if (!sameSecret(given, options.token)) {
        sendError(res, 403,
                  "this dashboard needs its token: open the URL `ipu ui` printed (it ends in ?token=...), or send the "
                  "header X-Ipu-Token");
        return false;
      }
    } else if (!hostAllowed(req.get_header_value("Host"))) {
      sendError(res, 403, "the Host `" + req.get_header_value("Host") + "` is not this dashboard's address: open http://127.0.0.1:" +
                              std::to_string(port) + "/");
      return false;
    }
    if (req.method == "POST") {
      if (!req.has_header("X-Ipu-Request")) {
        sendError(res, 403, "a change must come from the dashboard's page (the header X-Ipu-Request is missing)");
        return false;
      }
      const std::string origin = req.get_header_value("Origin");
      if (!origin.empty() && origin != "http://" + req.get_header_value("Host")) {
        sendError(res, 403, "a change must come from the dashboard's page, not from `" + origin + "`");
        return false;
      }
    }
    return true;
  }

  void routes() {
    using Req = httplib::Request;
    using Res = httplib::Response;
    auto& d = dashboard;
    http.set_default_headers({{"X-Content-Type-Options", "nosniff"},
                              {"Cache-Control", "no-store"},
                              {"X-Frame-Options", "DENY"},
                              {"Referrer-Policy", "no-referrer"},
                              // The pages load nothing from elsewhere and send nothing elsewhere.
                              {"Content-Security-Policy",
                               "default-src 'self' 'unsafe-inline' data:; connect-src 'self'; form-action 'self'; "
                               "frame-ancestors 'none'; base-uri 'none'"}});
    http.set_payload_max_length(1 << 20);  // a note or a list of tags, never more
    // A browser opens up to six connections per page and keeps each open
    // (a thread each) until the keep-alive timeout: with the library's 8
    // threads and its 5 s, two tabs loading at once would wait seconds for a
    // thread. Idle connections close after 1 s (a live page's next poll
    // opens one again), and threads are cheap.
    http.set_keep_alive_timeout(1);
    http.new_task_queue = [] { return new httplib::ThreadPool(32); };
    http.set_pre_routing_handler([this](const Req& req, Res& res) {
      return admit(req, res) ? httplib::Server::HandlerResponse::Unhandled : httplib::Server::HandlerResponse::Handled;
    });
    http.Get("/", [&d](const Req&, Res& res) { send(res, d.runsPage()); });
    // Browsers ask for it on every page: no icon, and no 404 in their console.
    http.Get("/favicon.ico", [](const Req&, Res& res) { res.status = 204; });
    http.Get("/sweeps", [&d](const Req&, Res& res) { send(res, d.sweepsPage()); });
    http.Get(R"(/sweeps/(.+))", [&d](const Req& req, Res& res) { send(res, d.sweepPage(req.matches[1])); });
    http.Get(R"(/runs/([^/]+))", [&d](const Req& req, Res& res) { send(res, d.runPage(req.matches[1])); });
    http.Get("/compare", [&d](const Req& req, Res& res) { send(res, d.comparePage(queryOf(req))); });
    http.Get(R"(/static/([^/]+))", [&d](const Req& req, Res& res) { send(res, d.asset(req.matches[1])); });
    http.Get("/api/config", [&d](const Req&, Res& res) { send(res, d.config()); });
    http.Get("/api/runs", [&d](const Req& req, Res& res) { send(res, d.runs(queryOf(req))); });
    http.Get(R"(/api/runs/([^/]+)/metrics)", [&d](const Req& req, Res& res) {
      send(res, d.metrics(req.matches[1], queryOf(req)));
    });
    http.Get(R"(/api/runs/([^/]+))", [&d](const Req& req, Res& res) { send(res, d.run(req.matches[1])); });
    http.Get("/api/report-data", [&d](const Req& req, Res& res) { send(res, d.reportData(queryOf(req))); });
    http.Get("/api/compare", [&d](const Req& req, Res& res) { send(res, d.comparison(queryOf(req))); });
    http.Get("/api/sweeps", [&d](const Req&, Res& res) { send(res, d.sweeps()); });
    http.Get(R"(/api/sweeps/(.+))", [&d](const Req& req, Res& res) { send(res, d.sweep(req.matches[1])); });
    http.Post(R"(/api/runs/([^/]+)/tags)", [&d](const Req& req, Res& res) {
      send(res, d.changeTags(req.matches[1], req.body));
    });
    http.Post(R"(/api/runs/([^/]+)/note)", [&d](const Req& req, Res& res) { send(res, d.setNote(req.matches[1], req.body)); });
    // Anything else: 404 (or 405 for a write where none is taken), saying so.
    http.set_error_handler([](const Req& req, Res& res) {
      if (res.has_header("Content-Type")) return;  // a route's own answer (its body is provided later)
      if (res.status == 404)
        sendError(res, req.method == "POST" ? 405 : 404,
                  req.method == "POST" ? "`" + req.path + "` takes no POST (only /api/runs/ID/tags and /api/runs/ID/note do)"
                                       : "there is no page `" + req.path + "` (the API is under /api/; docs/tracking.md)");
      else
        sendError(res, res.status, "the request could not be served (HTTP " + std::to_string(res.status) + ")");
    });
    http.set_exception_handler([](const Req&, Res& res, std::exception_ptr e) {
      std::string what = "unknown";
      try {
        if (e) std::rethrow_exception(e);
      } catch (const std::exception& x) {
        what = x.what();
      } catch (...) {
      }
      sendError(res, 500, "internal error: " + what);
    });
  }
};

Server::Server(ServerOptions options) : impl_(std::make_unique<Impl>(std::move(options))) { impl_->routes(); }
Server::~Server() = default;

int Server::bind() {
  const std::string& host = impl_->options.bind;
  if (impl_->options.port == 0) {
    impl_->port = impl_->http.bind_to_any_port(host);
    if (impl_->port <= 0) throw std::runtime_error("cannot listen on `" + host + "` (is it an address of this machine?)");
  } else {
    if (!impl_->http.bind_to_port(host, impl_->options.port))
      throw std::runtime_error("cannot listen on `" + host + "` port " + std::to_string(impl_->options.port) +
                               " (in use by another program, or not an address of this machine? --port 0 picks a free one)");
    impl_->port = impl_->options.port;
  }
  return impl_->port;
}

bool Server::serve() { return impl_->http.listen_after_bind(); }
void Server::stop() { impl_->http.stop(); }

}  // namespace ipu::ui
