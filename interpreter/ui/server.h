// The HTTP server of `ipu ui` (docs/tracking.md, "Live dashboard: ipu ui"):
// cpp-httplib, routing each URL to the Dashboard (dashboard.h), and deciding
// who may ask:
//   - a token, when one is set (always when bound beyond loopback): the
//     request carries it as the cookie `ipu_ui_token` (set by opening
//     `/?token=T`), or the header `X-Ipu-Token`; else 403;
//   - without a token (loopback only), the Host header must name the
//     loopback address the server is on, so that a page of another site
//     whose name was made to resolve to 127.0.0.1 (DNS rebinding) reads
//     nothing;
//   - a write (POST, only with --writable) must come from the dashboard's
//     own pages: the header `X-Ipu-Request` (which a cross-site form cannot
//     send and a cross-site script cannot without a CORS preflight, never
//     granted) and, when the browser sends one, an Origin of this server.
#pragma once

#include <memory>
#include <string>

namespace ipu::ui {

struct ServerOptions {
  std::string store;               // as openStore takes it
  std::string bind = "127.0.0.1";  // the address to listen on
  int port = 8765;                 // 0: any free port
  std::string token;               // "": none (loopback only)
  bool writable = false;           // tags and notes from the page
  int pollMilliseconds = 2000;     // how often live pages ask again
};

// 127.0.0.0/8, ::1 and `localhost`.
bool isLoopback(const std::string& address);
// 32 random hex digits (from the system's random device).
std::string newToken();

class Server {
 public:
  explicit Server(ServerOptions options);
  ~Server();
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  // Binds the address and port; returns the port (the one chosen, for port
  // 0). Throws std::runtime_error saying why it could not.
  int bind();
  // Serves until stop(); false if the server failed.
  bool serve();
  // From any thread: ends serve().
  void stop();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace ipu::ui
