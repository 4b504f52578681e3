// The peer secret file's checks and the peer authenticator (src/server/peer_auth.h).
#include "server/peer_auth.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

namespace raftlog::server {
namespace {

class PeerSecretFile : public ::testing::Test {
 protected:
  void SetUp() override {
    char pattern[] = "/tmp/raftlog-peer-secret.XXXXXX";
    dir_ = ::mkdtemp(pattern);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  std::string write(const std::string& name, const std::string& content, mode_t mode = 0600) {
    const std::string path = dir_ + "/" + name;
    std::ofstream(path, std::ios::binary) << content;
    EXPECT_EQ(::chmod(path.c_str(), mode), 0);
    return path;
  }
  std::string refusal(const std::string& path) {
    std::string secret = "unchanged";
    const std::string problem = read_peer_secret_file(path, &secret);
    EXPECT_TRUE(secret.empty()) << "a refused file must not yield a secret";
    return problem;
  }

  std::string dir_;
};

TEST_F(PeerSecretFile, ReadsTheSecretWithoutItsTrailingNewline) {
  std::string secret;
  EXPECT_EQ(read_peer_secret_file(write("secret", "0123456789abcdef0123\n"), &secret), "");
  EXPECT_EQ(secret, "0123456789abcdef0123");
  EXPECT_EQ(read_peer_secret_file(write("crlf", "0123456789abcdef\r\n"), &secret), "");
  EXPECT_EQ(secret, "0123456789abcdef");
  // Group-readable is fine (a Kubernetes secret mounted 0440 with an fsGroup), and symbolic links
  // are followed (Kubernetes mounts secrets as links into ..data/).
  EXPECT_EQ(read_peer_secret_file(write("group", std::string(4096, 'g'), 0440), &secret), "");
  EXPECT_EQ(secret.size(), 4096u);
  std::filesystem::create_symlink(dir_ + "/secret", dir_ + "/link");
  EXPECT_EQ(read_peer_secret_file(dir_ + "/link", &secret), "");
  EXPECT_EQ(secret, "0123456789abcdef0123");
}

TEST_F(PeerSecretFile, RefusesFilesOthersCouldReadOrChangeAndBadSizes) {
  EXPECT_NE(refusal(write("world", "0123456789abcdef0123", 0644)).find("has mode 0644"),
            std::string::npos);
  EXPECT_NE(refusal(write("other-write", "0123456789abcdef0123", 0602)).find("has mode 0602"),
            std::string::npos);
  EXPECT_NE(refusal(write("group-write", "0123456789abcdef0123", 0620)).find("has mode 0620"),
            std::string::npos);
  EXPECT_NE(refusal(write("short", "0123456789abcde\n"))
                .find("holds 15 bytes; a peer secret needs at least 16"),
            std::string::npos);
  EXPECT_NE(refusal(write("empty", "")).find("holds 0 bytes"), std::string::npos);
  EXPECT_NE(refusal(write("large", std::string(4097, 'x'))).find("larger than 4096 bytes"),
            std::string::npos);
  EXPECT_NE(refusal(dir_ + "/missing").find("cannot open"), std::string::npos);
  EXPECT_NE(refusal(dir_).find("not a regular file"), std::string::npos);
  // A FIFO would block a plain open() until a writer comes: refused at once instead.
  const std::string fifo = dir_ + "/fifo";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  EXPECT_NE(refusal(fifo).find("not a regular file"), std::string::npos);
  // Every message names the flag, none the secret.
  const std::string problem = refusal(write("world2", "do-not-print-this-secret", 0644));
  EXPECT_EQ(problem.rfind("--peer-secret-file: ", 0), 0u) << problem;
  EXPECT_EQ(problem.find("do-not-print"), std::string::npos) << problem;
}

TEST(PeerAuthToken, VerifiesOnlyTheSenderRecipientClusterAndSecretItWasMadeFor) {
  const std::string secret = "0123456789abcdef0123456789abcdef";
  const std::string token = peer_auth_token(secret, "cluster-a", 3, 1);
  EXPECT_EQ(token.rfind("v1 3 1 ", 0), 0u) << token;
  EXPECT_EQ(token.find(secret), std::string::npos);
  EXPECT_LE(token.size(), kMaxPeerAuthTokenBytes);
  std::uint64_t from = 0;
  EXPECT_EQ(verify_peer_auth_token(token, secret, "cluster-a", 1, &from), "");
  EXPECT_EQ(from, 3u);

  EXPECT_NE(verify_peer_auth_token(token, secret, "cluster-a", 2, &from), "");  // for node 1, not 2
  EXPECT_EQ(from, 0u);
  EXPECT_NE(verify_peer_auth_token(token, secret, "cluster-b", 1, &from), "");
  EXPECT_NE(verify_peer_auth_token(token, secret + "x", "cluster-a", 1, &from), "");
  // Changing the sender in the text does not carry the MAC over to another node.
  std::string relabelled = token;
  relabelled[3] = '2';
  EXPECT_NE(verify_peer_auth_token(relabelled, secret, "cluster-a", 1, &from), "");
  std::string tampered = token;
  tampered.back() = tampered.back() == '0' ? '1' : '0';
  EXPECT_NE(verify_peer_auth_token(tampered, secret, "cluster-a", 1, &from), "");
  for (const std::string& bad :
       {std::string(""), std::string("v1"), std::string("v2 3 1 00"), "v1 03 1 " + token.substr(7),
        "v1 3 1 " + token.substr(7) + " extra", "v1 0 1 " + token.substr(7),
        "v1 -3 1 " + token.substr(7), std::string(kMaxPeerAuthTokenBytes + 1, 'v')}) {
    SCOPED_TRACE(bad);
    EXPECT_NE(verify_peer_auth_token(bad, secret, "cluster-a", 1, &from), "");
    EXPECT_EQ(from, 0u);
  }
}

}  // namespace
}  // namespace raftlog::server
