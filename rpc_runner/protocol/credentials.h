// Defines the tuning service's security: role tokens, TLS credentials and the per-call token check.
#pragma once

#include <grpcpp/grpcpp.h>

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "support/error.h"

namespace ktune::rpc_runner {

// Who calls: a device worker (Attach) or a client (everything else). Each has its own token, so
// a leaked client token cannot register a rogue device.
enum class Role { kWorker, kClient };
const char* to_string(Role role);

// A named client of the server ("client NAME: TOKEN" in its token file).
struct ClientToken {
  std::string name;
  std::string token;
};

struct ServerSecurity {
  std::string worker_token;  // "" = workers attach without a token
  // The admin (sees and cancels every job); "" = none. The token of the older format's
  // "client: TOKEN" line is the admin's.
  std::string admin_token;
  std::vector<ClientToken> clients;  // each sees and cancels its own jobs only
  // Set when the admin's token came from the older format's nameless "client:" line: "FILE:LINE",
  // for a warning at start (every client sharing that token is the admin).
  std::string nameless_client_line;
  std::string tls_cert_pem;  // both empty = plaintext
  std::string tls_key_pem;
  bool tls() const { return !tls_cert_pem.empty(); }
  bool authenticates() const {
    return !worker_token.empty() || !admin_token.empty() || !clients.empty();
  }
};

// The name the admin has in logs and as the client of its jobs.
inline constexpr std::string_view kAdminName = "admin";

// Who made a client call, as authorize() found it.
struct Caller {
  std::string name;    // the client's name, kAdminName, or "" on a server without client tokens
  bool admin = false;  // sees and cancels every job (so does everyone without client tokens)
  std::string peer;    // the network address
  // "client alice (PEER)", "admin (PEER)", or the address alone: what the server's log names.
  std::string label() const;
};

// Reads a server token file and the PEM files. A token file has one role a line:
//   worker: TOKEN          the device workers' token (required)
//   admin: TOKEN           the admin
//   client NAME: TOKEN     a client (NAME: letters, digits, '.', '_', '-'; at most 64)
//   client: TOKEN          the older format's client token, which is the admin's
// at least one admin or client line; blank lines and lines starting with # ignored; a leading
// UTF-8 byte order mark ignored. token_file "" = no tokens; cert and key "" = no TLS. Throws
// Error(kIo) when a file cannot be read, Error(kInvalidArgument) naming the file (and line) for a
// token file group or others may access (unless allow_readable_token, as ssh refuses such a key),
// an unknown role, a repeated role or client name (the older "client:" line and "admin:" count as
// one role), a bad or reserved client name ("admin"), a missing role, a token shorter than 16
// characters or with whitespace, two lines with one token, a certificate without a key or the
// reverse, a certificate or key file that is not PEM.
ServerSecurity load_server_security(const std::string& token_file, const std::string& tls_cert_file,
                                    const std::string& tls_key_file,
                                    bool allow_readable_token = false);

struct ClientSecurity {
  std::string token;       // "" = none
  std::string tls_ca_pem;  // "" = plaintext
};

// Reads a worker's or client's token file: a file holding just the token (one line), or lines of
// a server token file, of which this is used: for a worker, its "worker:" line; for a client, the
// admin's line when there is one (with a warning for an "admin:" line: the client acts as the
// admin), else the one "client NAME:" line. tls_ca_file "" = plaintext.
// Throws as above (a CA file that is not a PEM certificate included; a file without the line,
// or with several client lines and no admin line).
ClientSecurity load_client_security(const std::string& token_file, const std::string& tls_ca_file,
                                    Role role, bool allow_readable_token = false);

std::shared_ptr<grpc::ServerCredentials> server_credentials(const ServerSecurity& security);
std::shared_ptr<grpc::ChannelCredentials> channel_credentials(const ClientSecurity& security);
// A channel to "host:port" with these credentials and ktune's channel arguments: 64 MiB
// message limits both ways, keepalive pings every 10 s with a 5 s timeout. own_connection: a TCP
// connection of its own (gRPC otherwise shares one between a process's channels of the same
// address and arguments), as each of many simulated devices in one process needs to be a device.
std::shared_ptr<grpc::Channel> make_channel(const std::string& address,
                                            const ClientSecurity& security,
                                            bool own_connection = false);
// Puts the token in the call's metadata ("authorization: Bearer TOKEN") when there is one.
void attach_token(grpc::ClientContext& context, const ClientSecurity& security);

// Checks the call's token against the role's (constant-time: every token of the role is
// compared in full). Returns OK when the role needs no token or one matches, and then fills
// `caller` (may be null) with who it is; otherwise UNAUTHENTICATED with a message a client prints
// as is, after one warning line in the server's log naming the peer, the call and the reason.
grpc::Status authorize(const grpc::ServerContextBase& context, Role role,
                       const ServerSecurity& security, std::string_view rpc,
                       Caller* caller = nullptr);

// Why a call failed for TLS reasons, judged from its status: a server certificate the CA does not
// verify, TLS against a plaintext server, a failed handshake (certain), or, for a plaintext call
// (uses_tls false), a connection the server closed before answering, as a TLS-only server does
// (likely: a server going down looks the same once). reason "" = not a TLS failure.
struct TlsFailure {
  std::string reason;
  bool certain = false;
};
TlsFailure tls_failure(const grpc::Status& status, bool uses_tls);

// One clear line for a failed call to the server at `address` doing `what` ("submit the job"):
// unreachable (with a hint when TLS is on one side only), refused (token), not answering in
// time, a request over the client's rate limit, or the server's own message. Kinds: kIo
// (unreachable, deadline, rate limit), kInvalidArgument (refused, bad request), kNotFound,
// kUnsupported (failed precondition), kIo otherwise.
Error status_error(const grpc::Status& status, const std::string& address, std::string_view what);

}  // namespace ktune::rpc_runner
