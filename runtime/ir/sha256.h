// SHA-256 (FIPS 180-4): a digest for keys that must not be shared by two
// different inputs, such as the cache of search results
// (interpreter/search/result_cache.h), whose key covers megabytes of plan
// text and lives in files anyone may copy between machines. A 64-bit FNV
// (plan_hash.h) names plans; 256 bits make an accidental collision of keys
// something that does not happen. Not used to defend against anyone.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace ipu::ir {

class Sha256 {
 public:
  Sha256();
  void add(std::string_view bytes);
  // The digest of everything added, as 64 lowercase hex digits. Ends the hash:
  // add() after it starts nothing new.
  std::string hex();

 private:
  void block(const unsigned char* p);
  std::uint32_t h_[8];
  unsigned char pending_[64];
  std::size_t used_ = 0;    // bytes in pending_
  std::uint64_t bytes_ = 0; // added in all
};

inline std::string sha256Hex(std::string_view bytes) {
  Sha256 h;
  h.add(bytes);
  return h.hex();
}

}  // namespace ipu::ir
