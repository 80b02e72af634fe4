// Token files, TLS credentials, the per-call token check and client-side error lines.
#include "rpc_runner/protocol/credentials.h"

#include <sys/stat.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <fstream>
#include <map>
#include <sstream>

#include <spdlog/spdlog.h>

#include "rpc_runner/protocol/grpc_log.h"

namespace ktune::rpc_runner {
namespace {

constexpr size_t kMinTokenLength = 16;
constexpr int kMessageLimit = 64 << 20;
constexpr std::string_view kUtf8Bom = "\xEF\xBB\xBF";

// Throws Error(kInvalidArgument) unless `text`, read from `path`, holds a PEM block of `label`
// ("CERTIFICATE", "PRIVATE KEY": any "-----BEGIN ...PRIVATE KEY-----"): a file of another kind
// would otherwise fail later, inside gRPC, with a message that does not name it.
void check_pem(const std::string& text, const std::string& path, const char* what,
               std::string_view label) {
  const std::string begin = "-----BEGIN ";
  for (size_t at = text.find(begin); at != std::string::npos; at = text.find(begin, at + 1)) {
    const size_t end = text.find("-----", at + begin.size());
    if (end == std::string::npos) break;
    const std::string_view name(text.data() + at + begin.size(), end - at - begin.size());
    if (name.size() >= label.size() && name.substr(name.size() - label.size()) == label) return;
  }
  throw Error(ErrorKind::kInvalidArgument, std::string("the ") + what + " " + path +
                                               " is not PEM (no '-----BEGIN " + std::string(label) +
                                               "-----' block)");
}

std::string read_text(const std::string& path, const char* what) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(ErrorKind::kIo, std::string("cannot read the ") + what + " " + path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

std::string trim(const std::string& s) {
  const auto b = s.find_first_not_of(" \t\r\n");
  if (b == std::string::npos) return "";
  return s.substr(b, s.find_last_not_of(" \t\r\n") - b + 1);
}

// Refuses a token file that group or others may read or write, as ssh does with a private key:
// a secret anyone on the machine can read authenticates anyone.
void check_token_file_mode(const std::string& path, bool allow_readable) {
  struct stat st {};
  if (allow_readable || ::stat(path.c_str(), &st) != 0) return;  // unreadable: read_text says so
  if ((st.st_mode & (S_IRWXG | S_IRWXO)) == 0) return;
  char mode[8];
  std::snprintf(mode, sizeof mode, "%04o", static_cast<unsigned>(st.st_mode & 07777));
  throw Error(ErrorKind::kInvalidArgument,
              "token file " + path + " is accessible by group or others (mode " + mode +
                  "): `chmod 600 " + path + "`, or pass --allow-readable-token");
}

// The meaningful lines of a token file, with their numbers.
std::vector<std::pair<int, std::string>> token_lines(const std::string& path, bool allow_readable) {
  check_token_file_mode(path, allow_readable);
  std::string text = read_text(path, "token file");
  // Editors on some systems start a UTF-8 file with a byte order mark; it is not part of a token.
  if (text.rfind(kUtf8Bom, 0) == 0) text.erase(0, kUtf8Bom.size());
  std::istringstream in(text);
  std::vector<std::pair<int, std::string>> out;
  int n = 0;
  for (std::string line; std::getline(in, line);) {
    ++n;
    line = trim(line);
    if (line.empty() || line[0] == '#') continue;
    out.emplace_back(n, line);
  }
  return out;
}

void check_token(const std::string& token, const std::string& path, int line) {
  const std::string where = path + ":" + std::to_string(line) + ": ";
  if (token.size() < kMinTokenLength)
    throw Error(ErrorKind::kInvalidArgument, where + "a token must have at least " +
                                                 std::to_string(kMinTokenLength) + " characters");
  if (token.find_first_of(" \t") != std::string::npos)
    throw Error(ErrorKind::kInvalidArgument, where + "a token must not contain whitespace");
}

constexpr size_t kMaxClientName = 64;

// Throws Error(kInvalidArgument) unless `name` is a client name: what logs and job lists show.
void check_client_name(const std::string& name, const std::string& where) {
  const bool ok =
      !name.empty() && name.size() <= kMaxClientName &&
      std::all_of(name.begin(), name.end(), [](char c) {
        return std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_' || c == '-';
      });
  if (!ok)
    throw Error(ErrorKind::kInvalidArgument, where + "a client name is 1 to " +
                                                 std::to_string(kMaxClientName) +
                                                 " letters, digits, '.', '_' or '-'");
  if (name == kAdminName)
    throw Error(ErrorKind::kInvalidArgument,
                where + "'admin' is not a client name: write 'admin: TOKEN' for the admin");
}

// The roles of a token file's lines ("worker: T", "admin: T", "client NAME: T", "client: T").
struct TokenRoles {
  std::string worker;
  std::string admin;
  std::vector<ClientToken> clients;
  std::string nameless_client_line;  // "FILE:LINE" of a "client: T" line
};

TokenRoles parse_roles(const std::vector<std::pair<int, std::string>>& lines,
                       const std::string& path) {
  TokenRoles roles;
  std::map<std::string, int> lines_of_tokens;  // token -> its line, to refuse a shared token
  for (const auto& [n, line] : lines) {
    const std::string where = path + ":" + std::to_string(n) + ": ";
    const auto colon = line.find(':');
    const std::string role = colon == std::string::npos ? "" : trim(line.substr(0, colon));
    const std::string token = colon == std::string::npos ? "" : trim(line.substr(colon + 1));
    if (role == "worker" || role == "admin" || role == "client") {
      std::string& slot = role == "worker" ? roles.worker : roles.admin;
      if (!slot.empty())
        throw Error(
            ErrorKind::kInvalidArgument,
            where + (role == "worker" ? std::string("a second worker token")
                                      : std::string("a second admin token (a 'client: TOKEN' line "
                                                    "without a name is the admin's)")));
      slot = token;
      if (role == "client") roles.nameless_client_line = path + ":" + std::to_string(n);
    } else if (role.rfind("client", 0) == 0 && role.size() > 6 &&
               (role[6] == ' ' || role[6] == '\t')) {
      const std::string name = trim(role.substr(6));
      check_client_name(name, where);
      for (const ClientToken& c : roles.clients)
        if (c.name == name)
          throw Error(ErrorKind::kInvalidArgument, where + "a second client named " + name);
      roles.clients.push_back({name, token});
    } else {
      throw Error(ErrorKind::kInvalidArgument,
                  where + "expected 'worker: TOKEN', 'admin: TOKEN' or 'client NAME: TOKEN'");
    }
    check_token(token, path, n);
    if (const auto [it, fresh] = lines_of_tokens.emplace(token, n); !fresh)
      throw Error(ErrorKind::kInvalidArgument,
                  where + "the token of line " + std::to_string(it->second) +
                      " again: every role and client needs its own token");
  }
  return roles;
}

bool equal_constant_time(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;  // the length is no secret worth hiding
  unsigned char diff = 0;
  for (size_t i = 0; i < a.size(); ++i) diff |= static_cast<unsigned char>(a[i] ^ b[i]);
  return diff == 0;
}

}  // namespace

const char* to_string(Role role) { return role == Role::kWorker ? "worker" : "client"; }

std::string Caller::label() const {
  if (name.empty()) return peer;
  return (admin ? std::string(name) : "client " + name) + " (" + peer + ")";
}

ServerSecurity load_server_security(const std::string& token_file, const std::string& tls_cert_file,
                                    const std::string& tls_key_file, bool allow_readable_token) {
  ServerSecurity s;
  if (!token_file.empty()) {
    TokenRoles roles = parse_roles(token_lines(token_file, allow_readable_token), token_file);
    if (roles.worker.empty() || (roles.admin.empty() && roles.clients.empty()))
      throw Error(ErrorKind::kInvalidArgument,
                  token_file +
                      ": needs a 'worker: TOKEN' line and an 'admin: TOKEN' or 'client NAME: "
                      "TOKEN' line");
    s.worker_token = std::move(roles.worker);
    s.admin_token = std::move(roles.admin);
    s.clients = std::move(roles.clients);
    s.nameless_client_line = std::move(roles.nameless_client_line);
  }
  if (tls_cert_file.empty() != tls_key_file.empty())
    throw Error(ErrorKind::kInvalidArgument,
                "TLS needs both a certificate (--tls-cert) and its key (--tls-key)");
  if (!tls_cert_file.empty()) {
    s.tls_cert_pem = read_text(tls_cert_file, "TLS certificate");
    check_pem(s.tls_cert_pem, tls_cert_file, "TLS certificate", "CERTIFICATE");
    s.tls_key_pem = read_text(tls_key_file, "TLS key");
    check_pem(s.tls_key_pem, tls_key_file, "TLS key", "PRIVATE KEY");
  }
  return s;
}

ClientSecurity load_client_security(const std::string& token_file, const std::string& tls_ca_file,
                                    Role role, bool allow_readable_token) {
  ClientSecurity s;
  if (!token_file.empty()) {
    const auto lines = token_lines(token_file, allow_readable_token);
    if (lines.size() == 1 && lines[0].second.find(':') == std::string::npos) {
      s.token = lines[0].second;
      check_token(s.token, token_file, lines[0].first);
    } else {
      const TokenRoles roles = parse_roles(lines, token_file);
      if (role == Role::kWorker) {
        s.token = roles.worker;
        if (s.token.empty())
          throw Error(ErrorKind::kInvalidArgument, token_file + ": no 'worker: TOKEN' line");
      } else if (!roles.admin.empty()) {
        s.token = roles.admin;
        // The server's own file: whoever holds it acts as the admin, which the server only logs.
        // (An older file's nameless "client:" line is warned about by the server at start.)
        if (roles.nameless_client_line.empty())
          spdlog::warn(
              "{}: a server's token file; this client uses its 'admin:' line and acts as the "
              "admin (sees and cancels every client's jobs). A client of its own takes a file "
              "with its 'client NAME: TOKEN' line",
              token_file);
      } else if (roles.clients.size() == 1) {
        s.token = roles.clients.front().token;
      } else {
        throw Error(ErrorKind::kInvalidArgument,
                    token_file + (roles.clients.empty()
                                      ? ": no 'admin: TOKEN' or 'client NAME: TOKEN' line"
                                      : ": several clients and no admin: give a client a file "
                                        "of its own token"));
      }
    }
  }
  if (!tls_ca_file.empty()) {
    s.tls_ca_pem = read_text(tls_ca_file, "TLS CA certificate");
    check_pem(s.tls_ca_pem, tls_ca_file, "TLS CA certificate (--tls-ca)", "CERTIFICATE");
  }
  return s;
}

std::shared_ptr<grpc::ServerCredentials> server_credentials(const ServerSecurity& security) {
  if (!security.tls()) return grpc::InsecureServerCredentials();
  grpc::SslServerCredentialsOptions options;
  options.pem_key_cert_pairs.push_back({security.tls_key_pem, security.tls_cert_pem});
  return grpc::SslServerCredentials(options);
}

std::shared_ptr<grpc::ChannelCredentials> channel_credentials(const ClientSecurity& security) {
  if (security.tls_ca_pem.empty()) return grpc::InsecureChannelCredentials();
  grpc::SslCredentialsOptions options;
  options.pem_root_certs = security.tls_ca_pem;
  return grpc::SslCredentials(options);
}

std::shared_ptr<grpc::Channel> make_channel(const std::string& address,
                                            const ClientSecurity& security, bool own_connection) {
  route_grpc_log();
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(kMessageLimit);
  args.SetMaxSendMessageSize(kMessageLimit);
  // Pings find a peer whose machine vanished without closing the connection.
  args.SetInt(GRPC_ARG_KEEPALIVE_TIME_MS, 10000);
  args.SetInt(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, 5000);
  if (own_connection) args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  return grpc::CreateCustomChannel(address, channel_credentials(security), args);
}

void attach_token(grpc::ClientContext& context, const ClientSecurity& security) {
  if (!security.token.empty()) context.AddMetadata("authorization", "Bearer " + security.token);
}

grpc::Status authorize(const grpc::ServerContextBase& context, Role role,
                       const ServerSecurity& security, std::string_view rpc, Caller* caller) {
  // The role's callers; a client call may be the admin's or a named client's.
  std::vector<Caller> callers;
  std::vector<std::string_view> tokens;
  if (role == Role::kWorker) {
    if (!security.worker_token.empty()) {
      callers.push_back({"", false, ""});
      tokens.push_back(security.worker_token);
    }
  } else {
    if (!security.admin_token.empty()) {
      callers.push_back({std::string(kAdminName), true, ""});
      tokens.push_back(security.admin_token);
    }
    for (const ClientToken& c : security.clients) {
      callers.push_back({c.name, false, ""});
      tokens.push_back(c.token);
    }
  }
  if (tokens.empty()) {  // no tokens: everyone is everyone's admin, as one user's server is
    if (caller) *caller = {"", true, context.peer()};
    return grpc::Status::OK;
  }
  const auto& metadata = context.client_metadata();
  const auto it = metadata.find("authorization");
  std::string reason;
  if (it == metadata.end()) {
    reason = std::string("no token: this server requires a ") + to_string(role) +
             " token (--token-file)";
  } else {
    const std::string_view value(it->second.data(), it->second.size());
    const std::string_view prefix = "Bearer ";
    const std::string_view given =
        value.substr(0, prefix.size()) == prefix ? value.substr(prefix.size()) : "";
    // Every token is compared, so the time does not tell which one (or how many) came close.
    size_t match = tokens.size();
    for (size_t i = 0; i < tokens.size(); ++i)
      if (equal_constant_time(given, tokens[i])) match = i;
    if (match < tokens.size()) {
      if (caller) {
        *caller = std::move(callers[match]);
        caller->peer = context.peer();
      }
      return grpc::Status::OK;
    }
    // The other role's token (a client that took the worker's line of the token file, a worker
    // given a client's): say which it is, as the caller holds it already.
    std::vector<std::string_view> others;
    if (role == Role::kWorker) {
      if (!security.admin_token.empty()) others.push_back(security.admin_token);
      for (const ClientToken& c : security.clients) others.push_back(c.token);
    } else if (!security.worker_token.empty()) {
      others.push_back(security.worker_token);
    }
    bool other_role = false;
    for (std::string_view t : others) other_role = equal_constant_time(given, t) || other_role;
    reason = other_role ? role == Role::kWorker
                              ? "that is a client's token: a worker needs the worker token "
                                "(the server's 'worker:' line)"
                              : "that is the worker token: a client needs its own token or "
                                "the admin's (the server's 'client NAME:' or 'admin:' line)"
                        : std::string("wrong ") + to_string(role) + " token";
  }
  spdlog::warn("refused {} from {}: {}", rpc, context.peer(), reason);
  return {grpc::StatusCode::UNAUTHENTICATED, reason};
}

TlsFailure tls_failure(const grpc::Status& status, bool uses_tls) {
  if (status.error_code() != grpc::StatusCode::UNAVAILABLE) return {};
  const std::string& m = status.error_message();
  auto has = [&](std::string_view part) { return m.find(part) != std::string::npos; };
  // BoringSSL names its errors in capitals with underscores, OpenSSL 3 in words.
  if (has("CERTIFICATE_VERIFY_FAILED") || has("certificate verify failed"))
    return {"TLS: the server's certificate is not signed by the CA of --tls-ca", true};
  if (has("WRONG_VERSION_NUMBER") || has("wrong version number") || has("PACKET_LENGTH_TOO_LONG") ||
      has("packet length too long") || has("HTTP_REQUEST") || has("http request"))
    return {"TLS: the server does not answer in TLS (it serves plaintext: drop --tls-ca)", true};
  if (has("Ssl handshake failed") || has("SSL_ERROR") || has("handshake failed"))
    return {"TLS handshake with the server failed (" + m + ")", true};
  // A plaintext call to a TLS server: the server drops a connection that does not start with a
  // TLS hello, which the client sees as a closed socket, like a server going down at that moment.
  if (!uses_tls && (has("Socket closed") || has("Connection reset") || has("connection reset")))
    return {
        "the server closes every plaintext connection: it probably serves TLS only (give "
        "--tls-ca with the CA of its certificate)",
        false};
  return {};
}

Error status_error(const grpc::Status& status, const std::string& address, std::string_view what) {
  std::string detail = status.error_message();
  for (char& c : detail)
    if (c == '\n' || c == '\r') c = ' ';
  const std::string server = "the tuning server at " + address;
  switch (status.error_code()) {
    case grpc::StatusCode::UNAVAILABLE: {
      std::string line = "cannot reach " + server + " (" + detail + ")";
      const bool tls_hint = !tls_failure(status, false).reason.empty() ||
                            detail.find("SSL") != std::string::npos ||
                            detail.find("TLS") != std::string::npos;
      if (tls_hint)
        line +=
            "; if one side uses TLS and the other does not, or the CA (--tls-ca) does not match, "
            "this is how it fails";
      return Error(ErrorKind::kIo, line);
    }
    case grpc::StatusCode::DEADLINE_EXCEEDED:
      return Error(ErrorKind::kIo, server + " did not answer in time (" + detail + ")");
    case grpc::StatusCode::UNAUTHENTICATED:
      return Error(ErrorKind::kInvalidArgument, server + " refused: " + detail);
    case grpc::StatusCode::NOT_FOUND:
      return Error(ErrorKind::kNotFound, detail);
    case grpc::StatusCode::INVALID_ARGUMENT:
      return Error(ErrorKind::kInvalidArgument, detail);
    case grpc::StatusCode::FAILED_PRECONDITION:
      return Error(ErrorKind::kUnsupported, detail);
    case grpc::StatusCode::RESOURCE_EXHAUSTED:
      return Error(ErrorKind::kIo, server + " refused to " + std::string(what) + ": " + detail);
    default:
      return Error(ErrorKind::kIo, server + " could not " + std::string(what) + ": " + detail);
  }
}

}  // namespace ktune::rpc_runner
