#include "interpreter/session/session.h"

#include <cctype>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <regex>
#include <sstream>
#include <sys/stat.h>

#include "interpreter/check/codes.h"
#include "interpreter/hooks/lua_syntax.h"
#include "interpreter/plan/planner.h"
#include "interpreter/syntax/codes.h"

namespace ipu::session {

Session::Session() = default;
Session::~Session() = default;

std::optional<base::FileId> Session::readFile(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) {
    diags_.error(syntax::code::kUnreadable, {}, "cannot read `" + path + "`: " + std::strerror(errno),
                 "check the path; scripts end in `.ipu`");
    return std::nullopt;
  }
  if (S_ISDIR(st.st_mode)) {
    diags_.error(syntax::code::kUnreadable, {}, "`" + path + "` is a directory, not a script");
    return std::nullopt;
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    diags_.error(syntax::code::kUnreadable, {}, "cannot read `" + path + "`: " + std::strerror(errno));
    return std::nullopt;
  }
  std::stringstream ss;
  ss << in.rdbuf();
  return sources_.add(path, ss.str());
}

base::FileId Session::addSource(std::string name, std::string text) { return sources_.add(std::move(name), std::move(text)); }

void Session::validateHooks(const check::CheckedProgram& program) {
  for (const auto& h : program.hooks) {
    auto err = hooks::checkLuaSyntax(h.source);
    if (!err) continue;
    base::Span at = h.sourceSpan;
    if (h.file) {
      // Show the error in the Lua file itself.
      base::FileId f = sources_.add(h.path, h.source);
      const base::SourceFile& sf = sources_.file(f);
      std::uint32_t line = std::min<std::uint32_t>(static_cast<std::uint32_t>(std::max(1, err->line)), sf.lineCount());
      std::uint32_t begin = sf.lineStart(line);
      at = base::Span{f, begin, begin + static_cast<std::uint32_t>(sf.lineText(line).size())};
    } else if (const base::SourceFile* sf = sources_.find(h.sourceSpan.file)) {
      std::uint32_t first = sf->lineCol(h.sourceSpan.begin).line;
      std::uint32_t line = std::min(first + static_cast<std::uint32_t>(std::max(1, err->line)) - 1, sf->lineCount());
      std::uint32_t begin = line == first ? h.sourceSpan.begin : sf->lineStart(line);
      std::string_view text = sf->lineText(line);
      std::uint32_t lineEnd = sf->lineStart(line) + static_cast<std::uint32_t>(text.size());
      std::uint32_t end = std::min(lineEnd, h.sourceSpan.end);
      while (begin < end && (sf->text()[begin] == ' ' || sf->text()[begin] == '\t')) ++begin;
      at = base::Span{h.sourceSpan.file, begin, std::max(begin + 1, end)};
    }
    // Lua counts lines within the hook; say them as lines of the file shown.
    std::string message = err->message;
    if (!h.file)
      if (const base::SourceFile* sf = sources_.find(h.sourceSpan.file)) {
        const std::uint32_t first = sf->lineCol(h.sourceSpan.begin).line;
        std::regex atLine("at line ([0-9]+)");
        std::string rewritten;
        auto begin = std::sregex_iterator(message.begin(), message.end(), atLine);
        std::size_t last = 0;
        for (auto it = begin; it != std::sregex_iterator(); ++it) {
          rewritten += message.substr(last, static_cast<std::size_t>(it->position()) - last);
          rewritten += "at line " + std::to_string(first + std::stoul((*it)[1]) - 1);
          last = static_cast<std::size_t>(it->position() + it->length());
        }
        message = rewritten + message.substr(last);
      }
    diags_.error(hooks::code::kLuaSyntax, at, "Lua syntax error in hook `" + h.name + "`: " + message,
                 "the hook is Lua 5.4");
  }
}

const check::CheckedProgram* Session::check(base::FileId file) {
  checker_ = std::make_unique<check::Checker>(sources_, diags_);
  program_ = checker_->checkFile(file);
  if (program_) validateHooks(*program_);
  if (diags_.hasErrors()) return nullptr;
  return program_.get();
}

const ir::ExecutionPlan* Session::plan(base::FileId file, bool requireRuns) {
  const check::CheckedProgram* program = check(file);
  if (program == nullptr) return nullptr;
  if (requireRuns && program->runs.empty()) {
    diags_.error(check::code::kNothingToRun, {}, "nothing to plan: `" + sources_.file(file).path() + "` declares no training",
                 "declare `training NAME { mapping: ..., phase ... }`; `run NAME` picks which ones to plan");
    return nullptr;
  }
  plan_ = std::make_unique<ir::ExecutionPlan>(plan::planProgram(*program, sources_, diags_));
  return plan_.get();
}

}  // namespace ipu::session

namespace ipu::session {

base::Span Session::spanOf(const ir::SourceRef& ref) const {
  for (base::FileId id = 0; id < sources_.size(); ++id) {
    const base::SourceFile& f = sources_.file(id);
    if (f.path() != ref.file || ref.line == 0) continue;
    std::uint32_t begin = f.lineStart(ref.line);
    std::string_view line = f.lineText(ref.line);
    std::uint32_t off = begin, col = 1;
    while (col < ref.column && off < begin + line.size()) {
      ++off;
      while (off < begin + line.size() && (static_cast<unsigned char>(f.text()[off]) & 0xC0) == 0x80) ++off;
      ++col;
    }
    std::uint32_t end = off;
    while (end < begin + line.size() && (std::isalnum(static_cast<unsigned char>(f.text()[end])) || f.text()[end] == '_')) ++end;
    return base::Span{id, off, std::max(end, off + 1)};
  }
  return {};
}

const cost::Estimate* Session::estimate(base::FileId file) {
  const ir::ExecutionPlan* p = plan(file, /*requireRuns=*/true);
  if (p == nullptr) return nullptr;
  estimate_ = std::make_unique<cost::Estimate>(cost::estimate(*p));
  // One diagnostic per problem and place (several phases may hit the same one).
  for (const auto& pr : estimate_->problems) diags_.error(pr.code, spanOf(pr.where), pr.message, pr.help);
  return estimate_.get();
}

}  // namespace ipu::session
