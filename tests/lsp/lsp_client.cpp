#include "tests/lsp/lsp_client.h"

#include <cerrno>
#include <chrono>
#include <csignal>
#include <fcntl.h>
#include <poll.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <stdexcept>

#include "interpreter/lsp/document_store.h"
#include "interpreter/lsp/positions.h"
#include "interpreter/lsp/uri.h"

namespace ipu::lsp::test {

using Clock = std::chrono::steady_clock;

long long Client::sendRequest(const std::string& method, Json params) {
  const long long id = nextId_++;
  Json j{{"jsonrpc", "2.0"}, {"id", id}, {"method", method}, {"params", std::move(params)}};
  sendBody(serialize(j));
  return id;
}

Json Client::waitForReply(long long id, double seconds) {
  return waitFor([&](const Json& m) { return m.contains("id") && m["id"] == id && !m.contains("method"); }, seconds);
}

Json Client::request(const std::string& method, Json params, double seconds) {
  return waitForReply(sendRequest(method, std::move(params)), seconds);
}

void Client::notify(const std::string& method, Json params) {
  sendBody(serialize(Json{{"jsonrpc", "2.0"}, {"method", method}, {"params", std::move(params)}}));
}

Json Client::waitFor(const std::function<bool(const Json&)>& want, double seconds) {
  for (auto it = kept_.begin(); it != kept_.end(); ++it)
    if (want(*it)) {
      Json found = *it;
      kept_.erase(it);
      return found;
    }
  const auto deadline = Clock::now() + std::chrono::duration<double>(seconds);
  while (Clock::now() < deadline) {
    const double left = std::chrono::duration<double>(deadline - Clock::now()).count();
    auto body = receiveBody(std::max(0.0, left));
    if (!body) break;
    Json m = Json::parse(*body, nullptr, false);
    if (m.is_discarded()) throw std::runtime_error("the server sent a body that is not JSON: " + *body);
    if (want(m)) return m;
    kept_.push_back(std::move(m));
  }
  return nullptr;
}

Json Client::initialize(Json capabilities) {
  Json reply = request("initialize", Json{{"processId", nullptr}, {"rootUri", nullptr}, {"capabilities", std::move(capabilities)}});
  notify("initialized", Json::object());
  return reply;
}

void Client::open(const std::string& uri, const std::string& text, long long version) {
  notify("textDocument/didOpen",
         Json{{"textDocument", Json{{"uri", uri}, {"languageId", "ipu"}, {"version", version}, {"text", text}}}});
}

void Client::replaceAll(const std::string& uri, const std::string& oldText, const std::string& newText, long long version) {
  LineIndex lines(oldText);
  const Position end = lines.positionOf(oldText.size(), PositionEncoding::Utf16);
  change(uri, version, Json{{"start", Json{{"line", 0}, {"character", 0}}}, {"end", Json{{"line", end.line}, {"character", end.character}}}},
         newText);
}

void Client::change(const std::string& uri, long long version, Json range, const std::string& text) {
  Json change{{"text", text}};
  if (!range.is_null()) change["range"] = std::move(range);
  notify("textDocument/didChange",
         Json{{"textDocument", Json{{"uri", uri}, {"version", version}}}, {"contentChanges", Json::array({change})}});
}

Json Client::waitForDiagnostics(const std::string& uri, std::optional<long long> version, double seconds) {
  return waitFor(
      [&](const Json& m) {
        if (!m.contains("method") || m["method"] != "textDocument/publishDiagnostics") return false;
        const Json& p = m["params"];
        if (p["uri"] != uri) return false;
        return !version || (p.contains("version") && p["version"] == *version);
      },
      seconds);
}

std::vector<Json> Client::takeNotifications() {
  while (auto body = receiveBody(0.0)) kept_.push_back(Json::parse(*body, nullptr, false));
  std::vector<Json> out;
  for (auto it = kept_.begin(); it != kept_.end();) {
    if (it->contains("method")) {
      out.push_back(*it);
      it = kept_.erase(it);
    } else {
      ++it;
    }
  }
  return out;
}

// ------------------------------------------------------------ in process

InProcessClient::InProcessClient(ServerOptions options) {
  if (!options.log) options.log = [](const std::string&) {};
  server_ = std::make_unique<Server>(transport_, std::move(options));
  thread_ = std::thread([this] { exitCode_ = server_->run(); });
}

InProcessClient::~InProcessClient() { finish(); }

int InProcessClient::finish() {
  transport_.close();
  if (thread_.joinable()) thread_.join();
  return exitCode_.value_or(-1);
}

// --------------------------------------------------------------- process

ProcessClient::ProcessClient(const std::vector<std::string>& arguments) {
  int toChild[2], fromChild[2], errChild[2];
  if (::pipe(toChild) != 0 || ::pipe(fromChild) != 0 || ::pipe(errChild) != 0) throw std::runtime_error("pipe");
  pid_ = ::fork();
  if (pid_ < 0) throw std::runtime_error("fork");
  if (pid_ == 0) {
    ::dup2(toChild[0], STDIN_FILENO);
    ::dup2(fromChild[1], STDOUT_FILENO);
    ::dup2(errChild[1], STDERR_FILENO);
    for (int fd : {toChild[0], toChild[1], fromChild[0], fromChild[1], errChild[0], errChild[1]}) ::close(fd);
    std::vector<char*> argv;
    for (const auto& a : arguments) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    ::execv(argv[0], argv.data());
    ::_exit(127);
  }
  ::close(toChild[0]);
  ::close(fromChild[1]);
  ::close(errChild[1]);
  in_ = toChild[1];
  out_ = fromChild[0];
  err_ = errChild[0];
  // A test that writes after the server ended gets an error, not SIGPIPE.
  std::signal(SIGPIPE, SIG_IGN);
}

ProcessClient::~ProcessClient() {
  closeInput();
  if (!status_ && pid_ > 0) {
    if (wait(5) == -1 && !status_) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
    }
  }
  if (out_ >= 0) ::close(out_);
  if (err_ >= 0) ::close(err_);
}

void ProcessClient::sendBytes(const std::string& bytes) {
  std::size_t done = 0;
  while (done < bytes.size()) {
    ssize_t n = ::write(in_, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;  // the server is gone; the test sees no reply
    done += static_cast<std::size_t>(n);
  }
}

void ProcessClient::closeInput() {
  if (in_ >= 0) ::close(in_);
  in_ = -1;
}

std::optional<std::string> ProcessClient::receiveBody(double seconds) {
  const auto deadline = Clock::now() + std::chrono::duration<double>(seconds);
  for (;;) {
    if (auto f = decoder_.next()) {
      if (f->kind == FrameDecoder::Frame::Kind::BadHeader) throw std::runtime_error("the server wrote a bad header: " + f->problem);
      return f->body;
    }
    const double left = std::chrono::duration<double>(deadline - Clock::now()).count();
    if (left < 0 && seconds > 0) return std::nullopt;
    pollfd p{out_, POLLIN, 0};
    int r = ::poll(&p, 1, static_cast<int>(std::max(0.0, left) * 1000));
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return std::nullopt;
    char buffer[65536];
    ssize_t n = ::read(out_, buffer, sizeof buffer);
    if (n <= 0) return std::nullopt;
    decoder_.feed(std::string_view(buffer, static_cast<std::size_t>(n)));
  }
}

int ProcessClient::wait(double seconds) {
  if (status_) return *status_;
  const auto deadline = Clock::now() + std::chrono::duration<double>(seconds);
  while (Clock::now() < deadline) {
    int status = 0;
    pid_t r = ::waitpid(pid_, &status, WNOHANG);
    if (r == pid_) {
      status_ = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
      return *status_;
    }
    ::usleep(10000);
  }
  return -1;
}

std::string ProcessClient::errorOutput() {
  std::string out;
  char buffer[4096];
  int flags = ::fcntl(err_, F_GETFL);
  ::fcntl(err_, F_SETFL, flags | O_NONBLOCK);
  ssize_t n;
  while ((n = ::read(err_, buffer, sizeof buffer)) > 0) out.append(buffer, static_cast<std::size_t>(n));
  return out;
}

// ---------------------------------------------------------------- helpers

std::string uriOf(const std::string& path) { return fileUriOf(path); }

std::vector<DecodedToken> decodeSemanticTokens(const Json& result, const Json& legend) {
  std::vector<DecodedToken> out;
  const Json& data = result["data"];
  std::uint32_t line = 0, character = 0;
  for (std::size_t i = 0; i + 4 < data.size(); i += 5) {
    const std::uint32_t dl = data[i], dc = data[i + 1];
    line += dl;
    character = dl == 0 ? character + dc : dc;
    out.push_back(DecodedToken{line, character, data[i + 2].get<std::uint32_t>(),
                               legend["tokenTypes"][data[i + 3].get<std::size_t>()].get<std::string>(),
                               data[i + 4].get<unsigned>()});
  }
  return out;
}

std::string applyEdits(const std::string& text, const Json& edits) {
  // Applied from the last to the first, so earlier positions stay valid.
  std::vector<Json> sorted(edits.begin(), edits.end());
  std::sort(sorted.begin(), sorted.end(), [](const Json& a, const Json& b) {
    return std::make_pair(a["range"]["start"]["line"].get<int>(), a["range"]["start"]["character"].get<int>()) >
           std::make_pair(b["range"]["start"]["line"].get<int>(), b["range"]["start"]["character"].get<int>());
  });
  std::string out = text;
  for (const auto& e : sorted) {
    TextChange c;
    c.range = rangeFrom(e["range"]);
    c.text = e["newText"].get<std::string>();
    out = applyChange(out, c, PositionEncoding::Utf16);
  }
  return out;
}

}  // namespace ipu::lsp::test
