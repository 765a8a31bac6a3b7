// `ipu ui`: the live dashboard of the run store, a local web server
// (interpreter/ui/server.h; docs/tracking.md, "Live dashboard: ipu ui").
// Built only with cpp-httplib (IPU_UI, CMakeLists.txt); without it the
// command says so.
#include <cstdlib>
#include <iostream>
#include <string>
#include <vector>

#include "interpreter/cli/arguments.h"
#include "interpreter/cli/command.h"
#include "interpreter/cli/runs_command.h"

#ifdef IPU_HAVE_UI
#include <pthread.h>
#include <signal.h>

#include <atomic>
#include <csignal>
#include <thread>

#include "interpreter/store/run_store.h"
#include "interpreter/ui/server.h"
#endif

namespace ipu::cli {

namespace {

const char* kHelp = R"(usage: ipu ui [--store PATH|URI] [--port N] [--bind ADDR] [--token T] [--writable]

Serves a live dashboard of the run store on this machine: the runs in a table
(filtered with the --where language of `ipu runs`, sorted by any column,
columns chosen among parameters and metrics, tags and notes shown, running
runs updated as they go), a page per run with its curves growing while `ipu
run` trains it, the comparison of selected runs (curves overlaid, the
parameters that differ, predicted against measured), and the sweeps (history,
parallel coordinates, importance, trials), all live. The store is read where
it is (no copy), while runs and agents write it. The pages need no network.
A JSON API serves the same data (docs/tracking.md, "Live dashboard: ipu ui").

The URL is printed on standard output; Ctrl-C stops the server (exit 130).

  --store PATH|URI  the run store (default: $IPU_STORE, else runs/ipu.db)
  --runs-dir DIR    the store is DIR/ipu.db
  --port N          the port (default 8765; 0: any free port, the one
                    chosen is in the printed URL)
  --bind ADDR       the address to listen on (default 127.0.0.1: this
                    machine only). Any other address needs a token: the one
                    given with --token, else a new one, printed in the URL
  --token T         ask every request for T (the URL `/?token=T` sets it as
                    a cookie; scripts send the header X-Ipu-Token)
  --writable        let the page tag runs and write notes (read-only without)
  --poll-ms MS      how often live pages ask for news (default 2000)

Exit codes: 130 stopped by Ctrl-C (or SIGTERM), 1 the store cannot be
opened or the port not listened on, 2 a usage error.
)";

#ifdef IPU_HAVE_UI

int usageError(const std::string& message) { return usage("ui", message); }

// Reads a whole number in [lo, hi] or says it is not one.
bool readNumber(const std::string& text, long lo, long hi, long& out) {
  char* end = nullptr;
  out = std::strtol(text.c_str(), &end, 10);
  return !text.empty() && *end == '\0' && out >= lo && out <= hi;
}

int uiCommand(const std::vector<std::string>& args) {
  std::string storeFlag, runsDir = "runs", v;
  ui::ServerOptions options;
  bool tokenGiven = false;
  ArgumentReader in(args);
  while (in.next()) {
    const std::string a = in.word();
    long n = 0;
    if (in.flag("--writable")) {
      options.writable = true;
    } else if (in.value("--store", storeFlag)) {
      if (storeFlag.empty()) return usageError("`--store` needs a path or a postgresql:// URI");
    } else if (in.value("--runs-dir", runsDir)) {
      if (runsDir.empty()) return usageError("`--runs-dir` needs a directory");
    } else if (in.value("--port", v)) {
      if (!readNumber(v, 0, 65535, n)) return usageError("`--port` needs a port number from 0 to 65535 (0: any free port)");
      options.port = static_cast<int>(n);
    } else if (in.value("--bind", options.bind)) {
      if (options.bind.empty()) return usageError("`--bind` needs an address, e.g. 0.0.0.0 or 192.168.1.20");
    } else if (in.value("--token", options.token)) {
      if (options.token.size() < 8 || options.token.find_first_of(" \t\r\n;,") != std::string::npos)
        return usageError("`--token` needs at least 8 characters, without spaces, commas or semicolons");
      tokenGiven = true;
    } else if (in.value("--poll-ms", v)) {
      if (!readNumber(v, 100, 600000, n)) return usageError("`--poll-ms` needs milliseconds from 100 to 600000");
      options.pollMilliseconds = static_cast<int>(n);
    } else if (in.isOption()) {
      return usageError("unknown option `" + a + "`");
    } else {
      return usageError("`ui` takes no arguments (the store is --store; `ipu ui --help`)");
    }
  }
  // Beyond this machine, only with a token.
  if (!ui::isLoopback(options.bind) && !tokenGiven) options.token = ui::newToken();

  options.store = storeLocation(storeFlag, runsDir);
  std::string location;
  try {
    location = store::openStore(options.store, store::OpenMode::Existing)->location();
  } catch (const store::StoreError& e) {
    std::cerr << "ipu ui: error: " << e.what() << "\n  help: record a run first (`ipu run FILE`), or name the store with --store\n";
    return kUserError;
  }

  // Ctrl-C and SIGTERM are taken by one thread (sigwait), which stops the
  // server: the server's threads never see a signal, and stopping is an
  // ordinary call, not work inside a handler.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGUSR1);  // the server ended by itself: the waiter leaves
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  std::signal(SIGPIPE, SIG_IGN);  // a browser gone mid-answer is an error of that write, not the end of the server
  ui::Server server(options);
  int port = 0;
  try {
    port = server.bind();
  } catch (const std::exception& e) {
    std::cerr << "ipu ui: error: " << e.what() << "\n";
    return kUserError;
  }
  std::atomic<int> stoppedBy{0};
  std::thread waiter([&] {
    int sig = 0;
    sigwait(&signals, &sig);
    stoppedBy.store(sig);
    server.stop();
  });
  const std::string host = options.bind.find(':') != std::string::npos ? "[" + options.bind + "]" : options.bind;
  const std::string shownHost = host == "0.0.0.0" || host == "[::]" ? "127.0.0.1" : host;
  std::cout << "http://" << shownHost << ":" << port << "/" << (options.token.empty() ? "" : "?token=" + options.token)
            << std::endl;
  std::cerr << "ipu ui: serving `" << location << "` on " << host << ":" << port
            << (options.writable ? " (writable: the page can tag runs and write notes)" : " (read-only)")
            << "; Ctrl-C stops it\n";
  const bool served = server.serve();
  if (stoppedBy.load() == 0) pthread_kill(waiter.native_handle(), SIGUSR1);
  waiter.join();
  if (stoppedBy.load() == SIGINT || stoppedBy.load() == SIGTERM) {
    std::cerr << "ipu ui: stopped\n";
    return kInterrupted;
  }
  if (!served) {
    std::cerr << "ipu ui: error: the server stopped listening on " << host << ":" << port << "\n";
    return kUserError;
  }
  return kOk;
}

#else

int uiCommand(const std::vector<std::string>&) {
  std::cerr << "ipu ui: this ipu was built without the dashboard: it needs cpp-httplib (Debian: libcpp-httplib-dev; "
               "`./dev main` installs it), then cmake again and a rebuild\n";
  return kUsage;
}

#endif

}  // namespace

const Command kUiCommand{"ui", "ui",
                         "a live dashboard of the run store in the browser: runs, curves\n"
                         "growing as they train, comparisons, sweeps (docs/tracking.md)",
                         kHelp, uiCommand};

}  // namespace ipu::cli
