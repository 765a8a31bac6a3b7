#include "interpreter/lsp/server.h"

#include <iostream>

#include "interpreter/lsp/best_mapping.h"
#include "interpreter/lsp/code_actions.h"
#include "interpreter/lsp/formatting.h"
#include "interpreter/lsp/hover.h"
#include "interpreter/lsp/navigation.h"
#include "interpreter/lsp/outline.h"
#include "interpreter/lsp/plan_views.h"
#include "interpreter/lsp/semantic_tokens.h"
#include "interpreter/lsp/signature_help.h"
#include "interpreter/lsp/uri.h"

namespace ipu::lsp {

namespace {

// params.textDocument.uri, when it is a string.
std::optional<std::string> documentUri(const Json& params) {
  if (!params.is_object()) return std::nullopt;
  auto td = params.find("textDocument");
  if (td == params.end() || !td->is_object()) return std::nullopt;
  auto uri = td->find("uri");
  if (uri == td->end() || !uri->is_string()) return std::nullopt;
  return uri->get<std::string>();
}

std::optional<long long> documentVersion(const Json& params) {
  const Json* v = member(params, {"textDocument", "version"});
  if (v == nullptr || !v->is_number_integer()) return std::nullopt;
  return v->get<long long>();
}

bool needsPosition(Method m) {
  return m == Method::Hover || m == Method::Definition || m == Method::References || m == Method::Completion ||
         m == Method::PrepareRename || m == Method::Rename || m == Method::SignatureHelp;
}

// A request about one document (answered with that document's analysis).
bool isDocumentRequest(Method m) {
  switch (m) {
    case Method::Hover: case Method::Definition: case Method::References: case Method::Completion:
    case Method::DocumentSymbol: case Method::Formatting: case Method::FoldingRange: case Method::SemanticTokensFull:
    case Method::CodeAction: case Method::PrepareRename: case Method::Rename: case Method::SignatureHelp:
    case Method::CodeLens: case Method::InlayHint: case Method::RangeFormatting:
      return true;
    default: return false;
  }
}

}  // namespace

Server::Server(Transport& transport, ServerOptions options)
    : transport_(transport),
      options_(std::move(options)),
      standardLibrary_(options_.standardLibraryDirectory),
      workspace_(documents_, standardLibrary_) {
  if (!options_.log) options_.log = [](const std::string& line) { std::cerr << "ipu lsp: " << line << "\n"; };
  if (options_.searchQuietPeriod) {
    BackgroundSearch::Options o;
    o.quietPeriod = *options_.searchQuietPeriod;
    o.beforeSearch = options_.beforeSearch;
    // refreshCodeLenses_ is set by initialize, before any lens asks for a search.
    o.found = [this] {
      if (refreshCodeLenses_) sendRequest("workspace/codeLens/refresh");
    };
    searches_ = std::make_unique<BackgroundSearch>(std::move(o));
  }
  worker_ = std::thread([this] { work(); });
}

Server::~Server() {
  searches_.reset();
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  if (worker_.joinable()) worker_.join();
}

void Server::send(const Json& message) { transport_.write(serialize(message)); }

int Server::run() {
  int exitCode = 1;
  for (;;) {
    Transport::Incoming in = transport_.read();
    if (in.kind == Transport::Incoming::Kind::End) {
      exitCode = shutdownRequested_ ? 0 : 1;
      break;
    }
    if (in.kind == Transport::Incoming::Kind::BadFrame) {
      // No id can be read from a frame that could not be read: dropped (JSON-RPC has no reply for it).
      options_.log("dropped a message: " + in.problem);
      continue;
    }
    Decoded d = decode(in.body);
    if (d.parseError) {
      send(errorReply(nullptr, ErrorCode::ParseError, "the message is not JSON"));
      continue;
    }
    if (d.message.kind == Message::Kind::Notification && methodNamed(d.message.method) == Method::Exit) {
      exitCode = shutdownRequested_ ? 0 : 1;
      break;
    }
    // A message no handler expected the shape of is an error answered, never a crash.
    try {
      onMessage(d.message);
    } catch (const std::exception& e) {
      options_.log(std::string("internal error reading `") + d.message.method + "`: " + e.what());
      if (d.message.kind == Message::Kind::Request)
        send(errorReply(d.message.id, ErrorCode::InternalError, std::string("internal error: ") + e.what()));
    }
  }
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  if (worker_.joinable()) worker_.join();
  searches_.reset();
  return exitCode;
}

void Server::onMessage(const Message& m) {
  switch (m.kind) {
    case Message::Kind::Invalid: send(errorReply(m.id, ErrorCode::InvalidRequest, m.problem)); return;
    case Message::Kind::Response: return;  // this server sends no requests of its own
    case Message::Kind::Notification: onNotification(methodNamed(m.method), m.params); return;
    case Message::Kind::Request: {
      const Method method = methodNamed(m.method);
      if (method == Method::Unknown) {
        send(errorReply(m.id, ErrorCode::MethodNotFound, "unknown method `" + m.method + "`"));
        return;
      }
      onRequest(method, m.id, m.params);
      return;
    }
  }
}

void Server::onNotification(Method method, const Json& params) {
  // Before `initialize`, notifications are dropped (the protocol's rule); so is anything after shutdown but `exit`.
  if (!initialized_ || shutdownRequested_) return;
  switch (method) {
    case Method::CancelRequest: {
      const Json* id = member(params, "id");
      if (id == nullptr) return;
      const std::string key = idKey(*id);
      std::lock_guard<std::mutex> lock(mutex_);
      if (pending_.count(key)) cancelled_.insert(key);
      if (key == searching_) stopSearch_ = true;  // a search stops between its waves
      return;
    }
    case Method::DidOpen: {
      auto uri = documentUri(params);
      if (!uri) return;
      const Json* text = member(params, {"textDocument", "text"});
      if (text == nullptr || !text->is_string()) return;
      const long long version = documentVersion(params).value_or(0);
      documents_.open(*uri, sessionPathOf(*uri), version, text->get<std::string>());
      if (auto doc = documents_.find(*uri)) enqueue(Job{Job::Kind::Check, nullptr, method, nullptr, *doc});
      return;
    }
    case Method::DidChange: {
      auto uri = documentUri(params);
      if (!uri) return;
      const Json* changes = member(params, "contentChanges");
      if (changes == nullptr || !changes->is_array()) return;
      std::vector<TextChange> edits;
      for (const auto& c : *changes) {
        const Json* text = member(c, "text");
        if (text == nullptr || !text->is_string()) return;  // a malformed change: none applied
        TextChange e;
        e.text = text->get<std::string>();
        if (const Json* range = member(c, "range")) {
          e.range = rangeFrom(*range);
          if (!e.range) return;
        }
        edits.push_back(std::move(e));
      }
      auto current = documents_.find(*uri);
      if (!current) return;
      const long long version = documentVersion(params).value_or(current->version + 1);
      if (!documents_.change(*uri, version, edits)) return;
      if (searches_) searches_->edited(*uri, version);
      if (auto doc = documents_.find(*uri)) enqueue(Job{Job::Kind::Check, nullptr, method, nullptr, *doc});
      return;
    }
    case Method::DidClose: {
      auto uri = documentUri(params);
      if (!uri) return;
      auto doc = documents_.find(*uri);
      if (!doc || !documents_.close(*uri)) return;
      if (searches_) searches_->closed(*uri);
      enqueue(Job{Job::Kind::Close, nullptr, method, nullptr, *doc});
      return;
    }
    case Method::Initialized: case Method::DidSave: return;
    default: return;  // other notifications, `$/...` among them, may be ignored
  }
}

void Server::onRequest(Method method, const Json& id, const Json& params) {
  if (method == Method::Initialize) {
    if (initialized_) {
      send(errorReply(id, ErrorCode::InvalidRequest, "`initialize` was already sent"));
      return;
    }
    send(resultReply(id, initialize(params)));
    initialized_ = true;
    return;
  }
  if (!initialized_) {
    send(errorReply(id, ErrorCode::ServerNotInitialized, "the first request must be `initialize`"));
    return;
  }
  if (shutdownRequested_) {
    send(errorReply(id, ErrorCode::InvalidRequest, "the server is shutting down: only `exit` is accepted"));
    return;
  }
  if (method == Method::Shutdown) {
    shutdownRequested_ = true;
    send(resultReply(id, nullptr));
    return;
  }
  if (method == Method::WorkspaceSymbol) {
    const Json* query = member(params, "query");
    if (query == nullptr || !query->is_string()) {
      send(errorReply(id, ErrorCode::InvalidParams, "`query` is missing or not a string"));
      return;
    }
    {
      std::lock_guard<std::mutex> lock(mutex_);
      pending_.insert(idKey(id));
    }
    enqueue(Job{Job::Kind::Request, id, method, params, OpenDocument{}});
    return;
  }
  if (method == Method::CodeActionResolve) {
    // The action names its document, version and mapping (code_actions.h).
    const Json* uri = member(params, {"data", "uri"});
    const Json* version = member(params, {"data", "version"});
    const Json* mapping = member(params, {"data", "mapping"});
    if (uri == nullptr || !uri->is_string() || version == nullptr || !version->is_number_integer() || mapping == nullptr ||
        !mapping->is_string()) {
      send(errorReply(id, ErrorCode::InvalidParams, "`data` is not that of an action this server listed"));
      return;
    }
    auto doc = documents_.find(uri->get<std::string>());
    if (!doc) {
      send(errorReply(id, ErrorCode::InvalidParams, "`" + uri->get<std::string>() + "` is not open"));
      return;
    }
    if (doc->version != version->get<long long>()) {
      send(errorReply(id, ErrorCode::ContentModified, "the document changed since the action was listed"));
      return;
    }
    {
      std::lock_guard<std::mutex> lock(mutex_);
      pending_.insert(idKey(id));
    }
    enqueue(Job{Job::Kind::Request, id, method, params, *doc});
    return;
  }
  if (!isDocumentRequest(method)) {
    // Notifications sent as requests (`exit` with an id, `textDocument/didOpen`...).
    send(errorReply(id, ErrorCode::InvalidRequest, std::string("`") + nameOf(method) + "` is a notification"));
    return;
  }
  auto uri = documentUri(params);
  if (!uri) {
    send(errorReply(id, ErrorCode::InvalidParams, "`textDocument.uri` is missing"));
    return;
  }
  if (const Json* at = member(params, "position"); needsPosition(method) && (at == nullptr || !positionFrom(*at))) {
    send(errorReply(id, ErrorCode::InvalidParams, "`position` is missing or not a position"));
    return;
  }
  if (const Json* name = member(params, "newName"); method == Method::Rename && (name == nullptr || !name->is_string())) {
    send(errorReply(id, ErrorCode::InvalidParams, "`newName` is missing or not a string"));
    return;
  }
  if (const Json* range = member(params, "range");
      (method == Method::InlayHint || method == Method::RangeFormatting) && (range == nullptr || !rangeFrom(*range))) {
    send(errorReply(id, ErrorCode::InvalidParams, "`range` is missing or not a range"));
    return;
  }
  auto doc = documents_.find(*uri);
  if (!doc) {
    send(errorReply(id, ErrorCode::InvalidParams, "`" + *uri + "` is not open (send textDocument/didOpen first)"));
    return;
  }
  {
    std::lock_guard<std::mutex> lock(mutex_);
    pending_.insert(idKey(id));
  }
  enqueue(Job{Job::Kind::Request, id, method, params, *doc});
}

Json Server::initialize(const Json& params) {
  // The position encoding: the client's first choice that this server speaks (LSP 3.17), else UTF-16.
  PositionEncoding encoding = PositionEncoding::Utf16;
  if (const Json* offered = member(params, {"capabilities", "general", "positionEncodings"}); offered && offered->is_array())
    for (const auto& e : *offered) {
      if (e == "utf-16") encoding = PositionEncoding::Utf16;
      else if (e == "utf-8") encoding = PositionEncoding::Utf8;
      else if (e == "utf-32") encoding = PositionEncoding::Utf32;
      else continue;
      break;
    }
  const Json* item = member(params, {"capabilities", "textDocument", "completion", "completionItem"});
  if (item != nullptr) {
    completion_.snippets = isTrue(member(*item, "snippetSupport"));
    if (const Json* formats = member(*item, "documentationFormat"); formats && formats->is_array()) {
      completion_.markdownDocs = false;
      for (const auto& f : *formats)
        if (f == "markdown") completion_.markdownDocs = true;
    }
  }
  if (const Json* resolvable = member(params, {"capabilities", "textDocument", "codeAction", "resolveSupport", "properties"});
      resolvable != nullptr && resolvable->is_array())
    for (const auto& p : *resolvable) resolveActions_ = resolveActions_ || p == "edit";
  refreshCodeLenses_ = isTrue(member(params, {"capabilities", "workspace", "codeLens", "refreshSupport"}));
  refreshInlayHints_ = isTrue(member(params, {"capabilities", "workspace", "inlayHint", "refreshSupport"}));
  // Set before any job is queued: the worker reads it only inside jobs.
  documents_.setEncoding(encoding);
  workspace_.setEncoding(encoding);

  Json caps = Json::object();
  caps["positionEncoding"] = nameOf(encoding);
  caps["textDocumentSync"] = Json{{"openClose", true}, {"change", 2}};  // 2: incremental
  caps["hoverProvider"] = true;
  caps["definitionProvider"] = true;
  caps["referencesProvider"] = true;
  caps["completionProvider"] = Json{{"triggerCharacters", Json::array({":", "\"", "/"})}, {"resolveProvider", false}};
  caps["documentSymbolProvider"] = true;
  caps["documentFormattingProvider"] = true;
  caps["documentRangeFormattingProvider"] = true;
  caps["codeActionProvider"] = Json{{"codeActionKinds", Json::array({"quickfix", "refactor.rewrite"})}, {"resolveProvider", true}};
  caps["renameProvider"] = Json{{"prepareProvider", true}};
  caps["signatureHelpProvider"] = Json{{"triggerCharacters", Json::array({"(", ","})}};
  caps["workspaceSymbolProvider"] = true;
  caps["foldingRangeProvider"] = true;
  caps["codeLensProvider"] = Json{{"resolveProvider", false}};
  caps["inlayHintProvider"] = Json{{"resolveProvider", false}};
  caps["semanticTokensProvider"] = Json{{"legend", semanticTokensLegend()}, {"full", true}, {"range", false}};
  return Json{{"capabilities", std::move(caps)}, {"serverInfo", Json{{"name", "ipu"}, {"version", "0.1.0"}}}};
}

void Server::enqueue(Job job) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    queue_.push_back(std::move(job));
  }
  wake_.notify_all();
}

// ------------------------------------------------------------------ worker

bool Server::cancelled(const Json& id) {
  std::lock_guard<std::mutex> lock(mutex_);
  return cancelled_.count(idKey(id)) > 0;
}

void Server::finish(const Json& id) {
  std::lock_guard<std::mutex> lock(mutex_);
  pending_.erase(idKey(id));
  cancelled_.erase(idKey(id));
}

void Server::work() {
  for (;;) {
    Job job;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      wake_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
      if (stopping_) return;
      job = std::move(queue_.front());
      queue_.pop_front();
    }
    // Nothing a script does may stop the server: an internal error is
    // reported (and answered, for a request), and the next job runs.
    try {
      switch (job.kind) {
        case Job::Kind::Request: runRequest(job); break;
        case Job::Kind::Check: runCheck(job); break;
        case Job::Kind::Close: publish(workspace_.close(job.document.uri, job.document.path)); break;
      }
    } catch (const std::exception& e) {
      options_.log(std::string("internal error in ") + nameOf(job.method) + ": " + e.what());
      if (job.kind == Job::Kind::Request) {
        send(errorReply(job.id, ErrorCode::InternalError, std::string("internal error: ") + e.what()));
        finish(job.id);
      }
    }
  }
}

void Server::runRequest(Job& job) {
  auto reply = [&](const Json& message) {
    send(message);
    finish(job.id);
  };
  const auto cancelledReply = [&] { reply(errorReply(job.id, ErrorCode::RequestCancelled, "cancelled")); };
  if (cancelled(job.id)) return cancelledReply();
  if (options_.beforeRequest) options_.beforeRequest(job.method);
  if (cancelled(job.id)) return cancelledReply();
  std::shared_ptr<const Analysis> analysis;
  if (isDocumentRequest(job.method) || job.method == Method::CodeActionResolve) analysis = workspace_.analyse(job.document);
  Answer a = answer(job, analysis.get());
  // Cancelled while it ran: the protocol prefers the cancellation to a result nobody waits for.
  if (cancelled(job.id)) return cancelledReply();
  if (a.error) return reply(errorReply(job.id, a.error->first, a.error->second));
  reply(resultReply(job.id, std::move(a.result)));
}

Server::Answer Server::answer(const Job& job, const Analysis* analysis) {
  const PositionEncoding encoding = workspace_.encoding();
  const Json* at = member(job.params, "position");
  const Position position = (at != nullptr ? positionFrom(*at) : std::nullopt).value_or(Position{});
  if (job.method == Method::WorkspaceSymbol) return {workspaceSymbols(workspace_, job.params["query"].get<std::string>()), {}};
  if (analysis == nullptr) return {nullptr, {}};
  const Analysis& a = *analysis;
  switch (job.method) {
    case Method::Hover: return {hover(workspace_, a, position), {}};
    case Method::Definition: return {definition(workspace_, a, position), {}};
    case Method::References: {
      const bool includeDeclaration = isTrue(member(job.params, {"context", "includeDeclaration"}));
      return {references(workspace_, a, position, includeDeclaration), {}};
    }
    case Method::Completion: return {complete(workspace_, a, position, completion_), {}};
    case Method::DocumentSymbol: return {documentSymbols(a, encoding), {}};
    case Method::Formatting: return {formatDocument(a, encoding), {}};
    case Method::FoldingRange: return {foldingRanges(a), {}};
    case Method::SemanticTokensFull: return {encodeSemanticTokens(a, semanticTokens(a), encoding), {}};
    case Method::CodeAction: return {codeActions(workspace_, a, job.params, resolveActions_), {}};
    case Method::CodeActionResolve: {
      {
        std::lock_guard<std::mutex> lock(mutex_);
        searching_ = idKey(job.id);
        stopSearch_ = cancelled_.count(searching_) > 0;
      }
      BestMapping best = bestMappingEdit(workspace_, a, job.params["data"]["mapping"].get<std::string>(), &stopSearch_);
      {
        std::lock_guard<std::mutex> lock(mutex_);
        searching_.clear();
      }
      if (!best.refusal.empty()) return {nullptr, std::make_pair(ErrorCode::RequestFailed, best.refusal)};
      Json action = job.params;
      action["edit"] = std::move(best.edit);
      return {std::move(action), {}};
    }
    case Method::SignatureHelp: return {signatureHelp(workspace_, a, position), {}};
    case Method::CodeLens: return {codeLenses(workspace_, a, searches_.get()), {}};
    case Method::InlayHint: return {inlayHints(workspace_, a, *rangeFrom(job.params["range"])), {}};
    case Method::RangeFormatting: return {formatRange(a, *rangeFrom(job.params["range"]), encoding), {}};
    case Method::PrepareRename: return {prepareRename(workspace_, a, position), {}};
    case Method::Rename: {
      Rename r = rename(workspace_, a, position, job.params["newName"].get<std::string>());
      if (!r.refusal.empty()) return {nullptr, std::make_pair(ErrorCode::RequestFailed, r.refusal)};
      return {std::move(r.edit), {}};
    }
    default: return {nullptr, {}};
  }
}

void Server::runCheck(const Job& job) {
  // Edited again since: the check of the later version publishes.
  auto current = documents_.find(job.document.uri);
  if (!current || current->version != job.document.version || current->text != job.document.text) return;
  auto analysis = workspace_.analyse(job.document);
  publish(workspace_.diagnose(*analysis));
  // The open documents importing it see its new text.
  for (const auto& uri : workspace_.dependentsOf(job.document.path)) {
    if (uri == job.document.uri) continue;
    auto doc = documents_.find(uri);
    if (!doc) continue;
    workspace_.invalidate(uri);
    publish(workspace_.diagnose(*workspace_.analyse(*doc)));
  }
  // The plan changed with the text: clients that can be told ask for the
  // figures again (the lenses of a script importing an edited module too).
  if (refreshCodeLenses_) sendRequest("workspace/codeLens/refresh");
  if (refreshInlayHints_) sendRequest("workspace/inlayHint/refresh");
}

void Server::sendRequest(const std::string& method) {
  // The reply is a Response, which onMessage() lets go: nothing waits for it.
  send(Json{{"jsonrpc", "2.0"}, {"id", "ipu-" + std::to_string(++sentRequests_)}, {"method", method}});
}

void Server::publish(const std::vector<Json>& params) {
  for (const auto& p : params) send(notification("textDocument/publishDiagnostics", p));
}

}  // namespace ipu::lsp
