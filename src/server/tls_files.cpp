#include "server/tls_files.h"

#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509_vfy.h>
#include <openssl/x509v3.h>

#include <arpa/inet.h>

#include <charconv>
#include <fstream>
#include <memory>
#include <sstream>
#include <vector>

namespace raftlog::server {

namespace {

// A PEM file is small; anything larger is not a certificate or key file.
constexpr std::size_t kMaxPemFileBytes = 1 << 20;
// Bounds the certificates read from one PEM file (a CA bundle or a chain).
constexpr int kMaxCertificatesPerFile = 256;

struct BioFree {
  void operator()(BIO* bio) const { BIO_free(bio); }
};
struct X509Free {
  void operator()(X509* cert) const { X509_free(cert); }
};
struct KeyFree {
  void operator()(EVP_PKEY* key) const { EVP_PKEY_free(key); }
};
struct StoreFree {
  void operator()(X509_STORE* store) const { X509_STORE_free(store); }
};
struct StoreCtxFree {
  void operator()(X509_STORE_CTX* ctx) const { X509_STORE_CTX_free(ctx); }
};
using BioPtr = std::unique_ptr<BIO, BioFree>;
using X509Ptr = std::unique_ptr<X509, X509Free>;
using KeyPtr = std::unique_ptr<EVP_PKEY, KeyFree>;

BioPtr memory_bio(const std::string& pem) {
  return BioPtr(BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())));
}

// Every certificate in `pem`, in order (at most kMaxCertificatesPerFile).
std::vector<X509Ptr> read_certificates(const std::string& pem) {
  std::vector<X509Ptr> certs;
  BioPtr bio = memory_bio(pem);
  if (bio == nullptr) return certs;
  while (static_cast<int>(certs.size()) < kMaxCertificatesPerFile) {
    X509* cert = PEM_read_bio_X509(bio.get(), nullptr, nullptr, nullptr);
    if (cert == nullptr) break;
    certs.emplace_back(cert);
  }
  ERR_clear_error();  // the read that ended the loop left "no start line" on the error queue
  return certs;
}

std::string openssl_error() {
  const unsigned long code = ERR_get_error();
  ERR_clear_error();
  if (code == 0) return "unknown OpenSSL error";
  char buffer[256];
  ERR_error_string_n(code, buffer, sizeof(buffer));
  return buffer;
}

bool read_file(const std::string& path, std::string* out, std::string* error) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    *error = "cannot read " + path;
    return false;
  }
  std::ostringstream buffer;
  buffer << in.rdbuf();
  *out = buffer.str();
  if (out->size() > kMaxPemFileBytes) {
    *error =
        path + " is larger than " + std::to_string(kMaxPemFileBytes) + " bytes: not a PEM file";
    return false;
  }
  return true;
}

}  // namespace

std::string load_tls_material(const TlsFiles& files, const std::string& flag_prefix,
                              TlsMaterial* out) {
  std::string error;
  if (!read_file(files.cert_path, &out->cert_pem, &error)) return flag_prefix + "-cert: " + error;
  if (!read_file(files.key_path, &out->key_pem, &error)) return flag_prefix + "-key: " + error;
  out->ca_pem.clear();
  if (!files.ca_path.empty() && !read_file(files.ca_path, &out->ca_pem, &error)) {
    return flag_prefix + "-ca: " + error;
  }

  std::vector<X509Ptr> chain = read_certificates(out->cert_pem);
  if (chain.empty()) return flag_prefix + "-cert: " + files.cert_path + " holds no PEM certificate";
  BioPtr key_bio = memory_bio(out->key_pem);
  KeyPtr key(key_bio == nullptr
                 ? nullptr
                 : PEM_read_bio_PrivateKey(key_bio.get(), nullptr, nullptr, nullptr));
  if (key == nullptr) {
    return flag_prefix + "-key: " + files.key_path +
           " holds no (unencrypted) PEM private key: " + openssl_error();
  }
  if (X509_check_private_key(chain.front().get(), key.get()) != 1) {
    ERR_clear_error();
    return flag_prefix + "-key: " + files.key_path + " does not match the certificate in " +
           files.cert_path;
  }
  if (!files.ca_path.empty() && read_certificates(out->ca_pem).empty()) {
    return flag_prefix + "-ca: " + files.ca_path + " holds no PEM certificate";
  }
  return "";
}

std::string verify_certificate_chain(const std::string& cert_pem, const std::string& ca_pem) {
  std::vector<X509Ptr> chain = read_certificates(cert_pem);
  if (chain.empty()) return "no certificate";
  std::vector<X509Ptr> anchors = read_certificates(ca_pem);
  if (anchors.empty()) return "no CA certificate";
  std::unique_ptr<X509_STORE, StoreFree> store(X509_STORE_new());
  for (const X509Ptr& anchor : anchors) X509_STORE_add_cert(store.get(), anchor.get());
  // Intermediates the holder sent along with its certificate are untrusted helpers for building the
  // path, never anchors.
  STACK_OF(X509)* untrusted = sk_X509_new_null();
  for (std::size_t i = 1; i < chain.size(); ++i) sk_X509_push(untrusted, chain[i].get());
  std::unique_ptr<X509_STORE_CTX, StoreCtxFree> ctx(X509_STORE_CTX_new());
  std::string result;
  if (X509_STORE_CTX_init(ctx.get(), store.get(), chain.front().get(), untrusted) != 1) {
    result = openssl_error();
  } else if (X509_verify_cert(ctx.get()) != 1) {
    result = X509_verify_cert_error_string(X509_STORE_CTX_get_error(ctx.get()));
  }
  sk_X509_free(untrusted);  // the certificates themselves are owned by `chain`
  ERR_clear_error();
  return result;
}

std::string check_certificate_host(const std::string& cert_pem, const std::string& host) {
  std::vector<X509Ptr> chain = read_certificates(cert_pem);
  if (chain.empty()) return "no certificate";
  std::string bare = host;
  if (bare.size() >= 2 && bare.front() == '[' && bare.back() == ']')
    bare = bare.substr(1, bare.size() - 2);
  unsigned char ip[16];
  const bool is_ip =
      inet_pton(AF_INET, bare.c_str(), ip) == 1 || inet_pton(AF_INET6, bare.c_str(), ip) == 1;
  const int matched =
      is_ip ? X509_check_ip_asc(chain.front().get(), bare.c_str(), 0)
            : X509_check_host(chain.front().get(), bare.data(), bare.size(), 0, nullptr);
  ERR_clear_error();
  if (matched == 1) return "";
  return std::string("the certificate has no subject alternative name ") +
         (is_ip ? "IP:" : "DNS:") + bare;
}

std::string certificate_node_id(const std::string& cert_pem, std::uint64_t* node_id) {
  *node_id = 0;
  std::vector<X509Ptr> chain = read_certificates(cert_pem);
  if (chain.empty()) return "no certificate";
  const X509_NAME* subject = X509_get_subject_name(chain.front().get());
  std::string common_name;
  int names = 0;
  // Bounded by the entries of the subject (the certificate was parsed, so it is finite and small).
  for (int i = X509_NAME_get_index_by_NID(subject, NID_commonName, -1); i >= 0;
       i = X509_NAME_get_index_by_NID(subject, NID_commonName, i)) {
    if (++names > 1) return "the certificate's subject has more than one common name (CN)";
    const ASN1_STRING* data = X509_NAME_ENTRY_get_data(X509_NAME_get_entry(subject, i));
    unsigned char* utf8 = nullptr;
    const int length = ASN1_STRING_to_UTF8(&utf8, data);
    if (length < 0) {
      ERR_clear_error();
      return "the certificate's common name (CN) cannot be read";
    }
    common_name.assign(reinterpret_cast<const char*>(utf8), static_cast<std::size_t>(length));
    OPENSSL_free(utf8);
  }
  const std::string expected_form =
      std::string("CN=") + std::string(kNodeCommonNamePrefix) + "<id>";
  if (names == 0)
    return "the certificate's subject has no common name; a peer certificate needs " +
           expected_form;
  const std::string_view digits =
      std::string_view(common_name)
          .substr(common_name.rfind(kNodeCommonNamePrefix, 0) == 0 ? kNodeCommonNamePrefix.size()
                                                                   : common_name.size());
  std::uint64_t id = 0;
  const auto [end, error] = std::from_chars(digits.data(), digits.data() + digits.size(), id);
  if (common_name.rfind(kNodeCommonNamePrefix, 0) != 0 || digits.empty() || digits.size() > 20 ||
      (digits.size() > 1 && digits.front() == '0') || error != std::errc() ||
      end != digits.data() + digits.size() || id == 0) {
    // The name came from the network: shown bounded and printable.
    std::string shown = common_name.substr(0, 80);
    for (char& c : shown) {
      if (c < 0x20 || c > 0x7e) c = '?';
    }
    return "the certificate's common name \"" + shown + "\" is not of the form " + expected_form;
  }
  *node_id = id;
  return "";
}

}  // namespace raftlog::server
