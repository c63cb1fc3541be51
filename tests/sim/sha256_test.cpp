// SHA-256 of bytes and of files read in pieces (sim/io/sha256.h): FIPS 180-4's examples, and a file
// longer than the reader's 1 MiB piece whose length is not a multiple of the 64-byte block.
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <string>

#include "sim/io/sha256.h"

namespace npusim::sim {
namespace {

TEST(Sha256, MatchesTheStandardsExamples) {
  EXPECT_EQ(sha256_hex(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(sha256_hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(sha256_hex("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"),
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  EXPECT_EQ(sha256_hex(std::string(1000000, 'a')),
            "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

TEST(Sha256, AFileReadInPiecesHashesAsItsBytes) {
  std::string bytes;
  for (size_t i = 0; i < (size_t{5} << 19) + 13; ++i) bytes += static_cast<char>((i * 131 + i / 7) & 0xff);
  const std::string path = ::testing::TempDir() + "/sha256_piece_test.bin";
  std::ofstream(path, std::ios::binary) << bytes;
  EXPECT_EQ(sha256_file(path), sha256_hex(bytes));
  std::remove(path.c_str());
  EXPECT_THROW(sha256_file(path), std::runtime_error);
}

}  // namespace
}  // namespace npusim::sim
