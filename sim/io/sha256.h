#pragma once
// SHA-256 (FIPS 180-4) of a file's bytes, as `sha256sum` prints it: what a report records to say which
// model file a run used.
#include <string>
#include <string_view>

namespace npusim::sim {

// 64 lowercase hex digits.
std::string sha256_hex(std::string_view bytes);

// The digest of the file at `path`; throws std::runtime_error naming the path when it cannot be read.
std::string sha256_file(const std::string& path);

}  // namespace npusim::sim
