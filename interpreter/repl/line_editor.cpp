#include "interpreter/repl/line_editor.h"

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <clocale>
#include <cstdio>
#include <cstring>
#include <cstdlib>
#include <filesystem>

#include <histedit.h>
#include <langinfo.h>
#include <unistd.h>

#include "runtime/files/regular_file.h"

namespace ipu::repl {

struct LineEditor::State {
  EditLine* el = nullptr;
  History* history = nullptr;
  HistEvent event{};
  std::string historyPath;
  std::string prompt;
  Completer completer;
};

namespace {

const char* promptOf(EditLine* el) {
  LineEditor::State* s = nullptr;
  el_get(el, EL_CLIENTDATA, &s);
  return s != nullptr ? s->prompt.c_str() : "> ";
}

bool separator(char c) { return c == ' ' || c == '\t' || c == '(' || c == ',' || c == '[' || c == '{' || c == '=' || c == '\n'; }

unsigned char complete(EditLine* el, int) {
  LineEditor::State* s = nullptr;
  el_get(el, EL_CLIENTDATA, &s);
  const LineInfo* li = el_line(el);
  if (s == nullptr || li == nullptr || !s->completer) return CC_ERROR;
  std::string line(li->buffer, static_cast<std::size_t>(li->cursor - li->buffer));
  std::size_t start = line.size();
  while (start > 0 && !separator(line[start - 1])) --start;
  std::string word = line.substr(start);
  std::vector<std::string> matches = s->completer(line, word);
  if (matches.empty()) return CC_ERROR;
  // The longest common prefix of the candidates.
  std::string common = matches.front();
  for (const auto& m : matches) {
    std::size_t k = 0;
    while (k < common.size() && k < m.size() && common[k] == m[k]) ++k;
    common.resize(k);
  }
  if (common.size() > word.size()) {
    std::string add = common.substr(word.size());
    if (matches.size() == 1) add += ' ';
    el_insertstr(el, add.c_str());
    return CC_REFRESH;
  }
  if (matches.size() == 1) {
    el_insertstr(el, " ");
    return CC_REFRESH;
  }
  // Several candidates and nothing to add: list them under the line.
  std::string list = "\n";
  std::size_t width = 0;
  for (const auto& m : matches) {
    if (width + m.size() + 2 > 100) {
      list += "\n";
      width = 0;
    }
    list += m + "  ";
    width += m.size() + 2;
  }
  list += "\n";
  FILE* out = nullptr;
  el_get(el, EL_GETFP, 1, &out);
  if (out != nullptr) {
    std::fputs(list.c_str(), out);
    std::fflush(out);
  }
  return CC_REDISPLAY;
}

// Reads one character (UTF-8) from the terminal. libedit's own reader
// retries a read interrupted by a signal once, which swallows the first
// Ctrl-C; this one gives up at once, so el_gets returns and the line is
// abandoned. Returns 1 with a character, 0 at end of input, -1 on error.
int readCharacter(EditLine* el, wchar_t* out) {
  FILE* in = nullptr;
  el_get(el, EL_GETFP, 0, &in);
  const int fd = in != nullptr ? fileno(in) : 0;
  auto byte = [fd](unsigned char& b) -> int {
    for (;;) {
      ssize_t n = ::read(fd, &b, 1);
      if (n == 1) return 1;
      if (n == 0) return 0;
      if (errno == EAGAIN || errno == EWOULDBLOCK) continue;
      return -1;  // EINTR included: the user pressed Ctrl-C
    }
  };
  unsigned char b = 0;
  int r = byte(b);
  if (r != 1) return r;
  int extra = b < 0x80 ? 0 : (b >> 5) == 0x6 ? 1 : (b >> 4) == 0xE ? 2 : (b >> 3) == 0x1E ? 3 : -1;
  if (extra < 0) {
    *out = static_cast<wchar_t>(0xFFFD);
    return 1;
  }
  std::uint32_t cp = extra == 0 ? b : b & (0x3F >> extra);
  for (int i = 0; i < extra; ++i) {
    unsigned char c = 0;
    r = byte(c);
    if (r != 1) return r;
    if ((c & 0xC0) != 0x80) {
      *out = static_cast<wchar_t>(0xFFFD);
      return 1;
    }
    cp = (cp << 6) | (c & 0x3F);
  }
  *out = static_cast<wchar_t>(cp);
  return 1;
}

}  // namespace

std::string defaultHistoryPath() {
  namespace fs = std::filesystem;
  if (const char* p = std::getenv("IPU_HISTORY"); p != nullptr && *p) return p;
  fs::path base;
  if (const char* x = std::getenv("XDG_STATE_HOME"); x != nullptr && *x) base = x;
  else if (const char* h = std::getenv("HOME"); h != nullptr && *h) base = fs::path(h) / ".local" / "state";
  else return {};
  return (base / "ipu" / "repl_history").string();
}

LineEditor::LineEditor(std::string historyPath, Completer completer) : state_(std::make_unique<State>()) {
  // libedit decodes keys with the C library's multibyte functions: without a
  // UTF-8 character type, `é` in a string would be refused with a bell. Only
  // LC_CTYPE changes, so numbers are still printed with a `.`.
  const char* ctype = std::setlocale(LC_CTYPE, "");
  if (ctype == nullptr || std::strstr(nl_langinfo(CODESET), "UTF-8") == nullptr) std::setlocale(LC_CTYPE, "C.UTF-8");
  state_->historyPath = std::move(historyPath);
  // libedit opens the file itself: a FIFO or device there would block (or be
  // written to), so anything but a regular file (or nothing) means no history.
  if (!state_->historyPath.empty() && !files::notARegularFile(state_->historyPath).empty()) state_->historyPath.clear();
  state_->completer = std::move(completer);
  state_->history = history_init();
  history(state_->history, &state_->event, H_SETSIZE, 1000);
  history(state_->history, &state_->event, H_SETUNIQUE, 1);
  if (!state_->historyPath.empty()) history(state_->history, &state_->event, H_LOAD, state_->historyPath.c_str());
  state_->el = el_init("ipu", stdin, stdout, stderr);
  el_set(state_->el, EL_CLIENTDATA, state_.get());
  el_set(state_->el, EL_PROMPT, promptOf);
  el_set(state_->el, EL_EDITOR, "emacs");
  el_set(state_->el, EL_GETCFN, readCharacter);
  el_set(state_->el, EL_HIST, history, state_->history);
  el_set(state_->el, EL_ADDFN, "ipu-complete", "complete a name, keyword or command", complete);
  el_set(state_->el, EL_BIND, "^I", "ipu-complete", nullptr);
  el_source(state_->el, nullptr);  // the user's ~/.editrc, if any
}

LineEditor::~LineEditor() {
  if (!state_->historyPath.empty()) {
    namespace fs = std::filesystem;
    std::error_code ec;
    fs::create_directories(fs::path(state_->historyPath).parent_path(), ec);
    history(state_->history, &state_->event, H_SAVE, state_->historyPath.c_str());
  }
  el_end(state_->el);
  history_end(state_->history);
}

LineEditor::Status LineEditor::read(const std::string& prompt, std::string& line) {
  state_->prompt = prompt;
  // el_gets prints the prompt first and only then puts the terminal in raw
  // mode: a Ctrl-D typed in between would meet the cooked terminal, which
  // turns it into an end-of-line marker that is lost in the switch. Raw mode
  // first, so every key typed after the prompt appears reaches the editor.
  el_set(state_->el, EL_PREP_TERM, 1);
  int count = 0;
  const char* text = el_gets(state_->el, &count);
  if (text == nullptr) {
    if (count < 0) {
      // Interrupted (Ctrl-C); the next el_gets starts from an empty line.
      el_reset(state_->el);
      return Status::Interrupted;
    }
    return Status::EndOfInput;
  }
  line.assign(text, static_cast<std::size_t>(count));
  while (!line.empty() && (line.back() == '\n' || line.back() == '\r')) line.pop_back();
  return Status::Line;
}

void LineEditor::remember(const std::string& entry) {
  if (entry.find_first_not_of(" \t\n") == std::string::npos) return;
  history(state_->history, &state_->event, H_ENTER, entry.c_str());
}

}  // namespace ipu::repl
