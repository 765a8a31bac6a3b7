// Syntax diagnostic codes (IPU0xxx). Stable: tests and docs refer to them.
#pragma once

namespace ipu::syntax::code {
inline constexpr const char* kUnexpectedToken = "IPU0001";
inline constexpr const char* kUnexpectedCharacter = "IPU0002";
inline constexpr const char* kUnterminatedString = "IPU0003";
inline constexpr const char* kUnclosedBracket = "IPU0004";
inline constexpr const char* kMismatchedBracket = "IPU0005";
inline constexpr const char* kInvalidUtf8 = "IPU0006";
inline constexpr const char* kTooDeep = "IPU0007";
inline constexpr const char* kUnterminatedComment = "IPU0008";
inline constexpr const char* kBadNumber = "IPU0009";
inline constexpr const char* kFileTooLarge = "IPU0010";
inline constexpr const char* kUnreadable = "IPU0011";
inline constexpr const char* kBadEscape = "IPU0012";
}  // namespace ipu::syntax::code
