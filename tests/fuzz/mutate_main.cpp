// A main() for a fuzz target without libFuzzer: bounded mutation fuzzing in
// the normal test suite (docs/fuzzing.md, "Mutation in the test suite").
//
//   ipu_fuzz_X_mutate SECONDS SEED SEED_INPUT...
//
// Runs LLVMFuzzerTestOneInput on every seed input (files, or directories of
// them), then, until SECONDS have passed, on mutants of them: bits flipped,
// bytes set, inserted and deleted, runs duplicated, pieces of other seeds
// spliced in, and the tokens the target declares (kFuzzTokens) inserted.
// SEED fixes the random choices, so a run is repeated exactly by giving the
// same SEED (and the same corpus) again; the test prints it. A crash or an
// abort writes the input that caused it to $TMPDIR (else /tmp)
// /ipu-fuzz-crash-<pid> before the process dies, so it can be replayed and
// kept as a seed. A target reports a broken promise by aborting.
#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>
#include <string>
#include <system_error>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size);
// Words of the input language worth inserting (null-terminated list).
extern const char* const kFuzzTokens[];

namespace fs = std::filesystem;

namespace {

// The input being run, for the crash handler (no allocation there).
const std::string* gCurrent = nullptr;
char gCrashPath[512];

void onCrash(int sig) {
  if (gCurrent != nullptr) {
    const int fd = ::open(gCrashPath, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd >= 0) {
      const char* p = gCurrent->data();
      std::size_t left = gCurrent->size();
      while (left > 0) {
        const ssize_t n = ::write(fd, p, left);
        if (n <= 0) break;
        p += n;
        left -= static_cast<std::size_t>(n);
      }
      ::close(fd);
      const char msg[] = "ipu fuzz: the input that crashed is in ";
      (void)!::write(2, msg, sizeof msg - 1);
      (void)!::write(2, gCrashPath, std::strlen(gCrashPath));
      (void)!::write(2, "\n", 1);
    }
  }
  ::signal(sig, SIG_DFL);
  ::raise(sig);
}

void run(const std::string& input) {
  gCurrent = &input;
  LLVMFuzzerTestOneInput(reinterpret_cast<const std::uint8_t*>(input.data()), input.size());
  gCurrent = nullptr;
}

std::string mutate(std::string s, const std::vector<std::string>& seeds, const std::vector<std::string>& tokens,
                   std::mt19937_64& rng) {
  auto pick = [&](std::size_t n) { return n == 0 ? std::size_t{0} : static_cast<std::size_t>(rng() % n); };
  const int rounds = 1 + static_cast<int>(pick(8));
  for (int r = 0; r < rounds; ++r) {
    switch (pick(8)) {
      case 0:  // flip a bit
        if (!s.empty()) s[pick(s.size())] ^= static_cast<char>(1u << pick(8));
        break;
      case 1:  // set a byte: often a delimiter or a control character
        if (!s.empty()) {
          static const char kInteresting[] = "'\"`()=<>!,.;:@/?&%\\\n\t \x00\x01\x1b\x7f\xff-9e+";
          s[pick(s.size())] = pick(2) == 0 ? kInteresting[pick(sizeof kInteresting - 1)] : static_cast<char>(rng());
        }
        break;
      case 2:  // insert bytes
        s.insert(pick(s.size() + 1), std::string(1 + pick(4), static_cast<char>(rng())));
        break;
      case 3:  // delete a run
        if (!s.empty()) {
          const std::size_t at = pick(s.size());
          s.erase(at, 1 + pick(std::min<std::size_t>(16, s.size() - at)));
        }
        break;
      case 4:  // duplicate a run
        if (!s.empty() && s.size() < 1 << 16) {
          const std::size_t at = pick(s.size()), n = 1 + pick(std::min<std::size_t>(64, s.size() - at));
          s.insert(pick(s.size() + 1), s.substr(at, n));
        }
        break;
      case 5:  // splice a piece of another seed
        if (!seeds.empty()) {
          const std::string& o = seeds[pick(seeds.size())];
          if (!o.empty()) {
            const std::size_t at = pick(o.size());
            s.insert(pick(s.size() + 1), o.substr(at, 1 + pick(std::min<std::size_t>(128, o.size() - at))));
          }
        }
        break;
      case 6:  // a token of the language
        if (!tokens.empty()) s.insert(pick(s.size() + 1), tokens[pick(tokens.size())]);
        break;
      default:  // a number at its edges
        {
          static const char* const kNumbers[] = {"0", "-1", "9223372036854775807", "-9223372036854775808",
                                                 "99999999999999999999", "1e308", "1e-400", "nan", "inf", "4294967296", "0x10"};
          s.insert(pick(s.size() + 1), kNumbers[pick(sizeof kNumbers / sizeof *kNumbers)]);
        }
        break;
    }
  }
  if (s.size() > (1u << 18)) s.resize(1u << 18);
  return s;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 4) {
    std::fprintf(stderr, "usage: %s SECONDS SEED SEED_INPUT...\n", argv[0]);
    return 2;
  }
  const double seconds = std::strtod(argv[1], nullptr);
  const unsigned long long seed = std::strtoull(argv[2], nullptr, 10);
  std::vector<std::string> seeds;
  for (int i = 3; i < argc; ++i) {
    std::vector<fs::path> files;
    std::error_code ec;
    if (fs::is_directory(argv[i], ec)) {
      for (fs::recursive_directory_iterator it(argv[i], ec), end; !ec && it != end; it.increment(ec))
        if (it->is_regular_file(ec)) files.push_back(it->path());
    } else if (fs::is_regular_file(argv[i], ec)) {
      files.push_back(argv[i]);
    } else {
      std::fprintf(stderr, "no such file or directory: %s\n", argv[i]);
      return 2;
    }
    std::sort(files.begin(), files.end());
    for (const auto& f : files) {
      std::ifstream in(f, std::ios::binary);
      seeds.emplace_back(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
    }
  }
  if (seeds.empty()) {
    std::fprintf(stderr, "no seed inputs\n");
    return 2;
  }
  std::vector<std::string> tokens;
  for (const char* const* t = kFuzzTokens; *t != nullptr; ++t) tokens.emplace_back(*t);
  const char* tmp = std::getenv("TMPDIR");
  std::snprintf(gCrashPath, sizeof gCrashPath, "%s/ipu-fuzz-crash-%d", tmp != nullptr ? tmp : "/tmp", static_cast<int>(::getpid()));
  for (int sig : {SIGSEGV, SIGABRT, SIGBUS, SIGFPE, SIGILL}) ::signal(sig, onCrash);

  std::fprintf(stderr, "ipu fuzz: %s, seed %llu, %zu seed inputs, %.0f s\n", argv[0], seed, seeds.size(), seconds);
  for (const auto& s : seeds) run(s);
  std::mt19937_64 rng(seed);
  const auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  long long runs = 0;
  while (std::chrono::steady_clock::now() < end) {
    for (int i = 0; i < 16; ++i, ++runs) run(mutate(seeds[static_cast<std::size_t>(rng() % seeds.size())], seeds, tokens, rng));
  }
  std::fprintf(stderr, "ipu fuzz: %lld mutants of %zu seeds without a broken promise\n", runs, seeds.size());
  return 0;
}
