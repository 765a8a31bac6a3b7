// The standard library as files an editor can open. It is embedded in the
// binary (check/stdlib_files.h), so "go to definition" of `bert` has no file
// to point at; this writes each standard module, on first need, under a
// directory of its own (by default in the user's cache, named by a hash of
// the library's text, so two versions of `ipu` never share one) and makes it
// read-only: a user who edits it would change nothing. A document opened from
// there is known again as the standard module it is ("std/models/bert.ipu").
#pragma once

#include <optional>
#include <string>

namespace ipu::lsp {

class StandardLibraryFiles {
 public:
  // `directory`: where the files go; empty: defaultDirectory().
  explicit StandardLibraryFiles(std::string directory = {});
  // $XDG_CACHE_HOME/ipu/stdlib-HASH, else ~/.cache/ipu/stdlib-HASH, else a
  // directory under the system's temporary directory.
  static std::string defaultDirectory();

  // The `file:` URI of a standard module's file ("std/models/bert.ipu"),
  // written there first when it is not; none when it is no standard module
  // or cannot be written (the reason is in lastProblem()).
  std::optional<std::string> uriOf(const std::string& standardPath);
  // The standard module a URI shows ("std/models/bert.ipu"), if it is one of these files.
  std::optional<std::string> standardPathOf(const std::string& uri) const;
  const std::string& directory() const { return directory_; }
  const std::string& lastProblem() const { return problem_; }

 private:
  std::string directory_;
  std::string problem_;
};

}  // namespace ipu::lsp
