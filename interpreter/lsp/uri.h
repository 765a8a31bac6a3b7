// Document URIs and the paths the session knows files by. Editors name
// documents by URI (`file:///home/me/bert%20big.ipu`); the session, its
// imports and its diagnostics by path. Only `file` URIs name a path; a
// document with another scheme (an unsaved `untitled:` buffer) is given a
// stand-in path in the working directory, so that it can be checked (its
// relative imports resolve from there) without ever being read or written.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace ipu::lsp {

// The path of a `file:` URI (percent-decoded), or none for another scheme or
// a malformed URI (a remote host, a path that is not absolute, a NUL).
std::optional<std::string> pathOfFileUri(std::string_view uri);
// The `file:` URI of an absolute path, percent-encoding what RFC 3986 requires.
std::string fileUriOf(const std::string& absolutePath);
// The path the session checks a document under: its file's, or a stand-in.
std::string sessionPathOf(std::string_view uri);

}  // namespace ipu::lsp
