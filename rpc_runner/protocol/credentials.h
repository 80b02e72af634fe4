// Defines the tuning service's security: role tokens, TLS credentials and the per-call token check.
#pragma once

#include <grpcpp/grpcpp.h>

#include <memory>
#include <string>
#include <string_view>

#include "support/error.h"

namespace ktune::rpc_runner {

// Who calls: a device worker (Attach) or a client (everything else). Each has its own token, so
// a leaked client token cannot register a rogue device.
enum class Role { kWorker, kClient };
const char* to_string(Role role);

struct ServerSecurity {
  std::string worker_token;  // "" = workers attach without a token
  std::string client_token;  // "" = clients call without a token
  std::string tls_cert_pem;  // both empty = plaintext
  std::string tls_key_pem;
  bool tls() const { return !tls_cert_pem.empty(); }
  bool authenticates() const { return !worker_token.empty() || !client_token.empty(); }
};

// Reads a server token file (lines "worker: TOKEN" and "client: TOKEN"; blank lines and lines
// starting with # ignored; a leading UTF-8 byte order mark ignored) and the PEM files. token_file
// "" = no tokens; cert and key "" = no TLS. Throws Error(kIo) when a file cannot be read,
// Error(kInvalidArgument) naming the file (and line) for a token file group or others may access
// (unless allow_readable_token, as ssh refuses such a key), an unknown or repeated role, a missing
// role, a token shorter than 16 characters or with whitespace, equal worker and client tokens, a
// certificate without a key or the reverse, a certificate or key file that is not PEM.
ServerSecurity load_server_security(const std::string& token_file, const std::string& tls_cert_file,
                                    const std::string& tls_key_file,
                                    bool allow_readable_token = false);

struct ClientSecurity {
  std::string token;       // "" = none
  std::string tls_ca_pem;  // "" = plaintext
};

// Reads a worker's or client's token file: a file holding just the token (one line), or a server
// token file, of which the line of `role` is used. tls_ca_file "" = plaintext. Throws as above
// (a CA file that is not a PEM certificate included).
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

// Checks the call's token against the role's (constant-time). Returns OK when the role needs no
// token or it matches; otherwise UNAUTHENTICATED with a message a client prints as is, after one
// warning line in the server's log naming the peer, the call and the reason.
grpc::Status authorize(const grpc::ServerContextBase& context, Role role,
                       const ServerSecurity& security, std::string_view rpc);

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
// time, or the server's own message. Kinds: kIo (unreachable, deadline), kInvalidArgument
// (refused, bad request), kNotFound, kUnsupported (failed precondition), kIo otherwise.
Error status_error(const grpc::Status& status, const std::string& address, std::string_view what);

}  // namespace ktune::rpc_runner
