// HTTP servers on the loopback interface that the remote tests start and stop themselves: nginx
// serving a directory (a real server's ranges, keep-alive and If-Match), and fault_server.py
// (failures chosen per run). Each runs as a child process of the test, as the user running it
// (root or not), with every file it writes inside a temporary directory, and is killed when its
// owner goes out of scope. A server that cannot start leaves its owner empty with the reason, so
// the test can skip (nginx not installed) or fail (it would not start).
#pragma once

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "test_util.hpp"

extern char** environ;

namespace gpufeed::test {

// A child process, sent SIGTERM (then SIGKILL) and reaped on destruction. Its stdout goes to a
// pipe the owner reads (stdout_fd()) when `capture_stdout`.
class child_process {
 public:
  child_process() noexcept = default;
  child_process(const std::vector<std::string>& argv, bool capture_stdout) {
    int out[2] = {-1, -1};
    if (capture_stdout && ::pipe2(out, O_CLOEXEC) != 0) return;
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    if (capture_stdout) posix_spawn_file_actions_adddup2(&fa, out[1], STDOUT_FILENO);
    std::vector<char*> args;
    for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    pid_t pid = -1;
    const int rc = ::posix_spawnp(&pid, args[0], &fa, nullptr, args.data(), environ);
    posix_spawn_file_actions_destroy(&fa);
    if (capture_stdout) ::close(out[1]);
    if (rc != 0) {
      if (capture_stdout) ::close(out[0]);
      return;
    }
    pid_ = pid;
    out_ = capture_stdout ? out[0] : -1;
  }
  child_process(const child_process&) = delete;
  child_process& operator=(const child_process&) = delete;
  child_process(child_process&& o) noexcept
      : pid_(std::exchange(o.pid_, -1)), out_(std::exchange(o.out_, -1)) {}
  child_process& operator=(child_process&& o) noexcept {
    std::swap(pid_, o.pid_);
    std::swap(out_, o.out_);
    return *this;
  }
  ~child_process() { stop(); }

  [[nodiscard]] bool running() const noexcept { return pid_ > 0; }
  [[nodiscard]] int stdout_fd() const noexcept { return out_; }
  // True when the child has exited (and is reaped).
  bool exited() noexcept {
    if (pid_ <= 0) return true;
    int status = 0;
    if (::waitpid(pid_, &status, WNOHANG) == pid_) {
      pid_ = -1;
      return true;
    }
    return false;
  }
  // Waits for the child to exit (up to `limit`): its exit status, or -1 (it is then stopped).
  int wait_exit(std::chrono::milliseconds limit) noexcept {
    const auto end = std::chrono::steady_clock::now() + limit;
    while (pid_ > 0 && std::chrono::steady_clock::now() < end) {
      int status = 0;
      if (::waitpid(pid_, &status, WNOHANG) == pid_) {
        pid_ = -1;
        return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    stop();
    return -1;
  }
  void stop() noexcept {
    if (out_ >= 0) ::close(out_);
    out_ = -1;
    if (pid_ <= 0) return;
    ::kill(pid_, SIGTERM);
    for (int i = 0; i < 200 && !exited(); ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    if (pid_ > 0) {
      ::kill(pid_, SIGKILL);
      int status = 0;
      ::waitpid(pid_, &status, 0);
      pid_ = -1;
    }
  }

 private:
  pid_t pid_ = -1;
  int out_ = -1;
};

// A TCP port on 127.0.0.1 that nothing listens on now (the kernel's choice).
inline int free_port() {
  const int s = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  int port = -1;
  if (::bind(s, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0 &&
      ::getsockname(s, reinterpret_cast<sockaddr*>(&a), &len) == 0)
    port = ntohs(a.sin_port);
  ::close(s);
  return port;
}

// True once something accepts connections on 127.0.0.1:port (false after `limit`).
inline bool wait_for_port(int port, std::chrono::milliseconds limit) {
  const auto end = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < end) {
    const int s = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = htons(static_cast<std::uint16_t>(port));
    const bool ok = ::connect(s, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0;
    ::close(s);
    if (ok) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return false;
}

// The first executable `name` in PATH or the system's sbin directories, or "".
inline std::string find_program(const std::string& name) {
  std::string path = std::getenv("PATH") ? std::getenv("PATH") : "";
  path += ":/usr/sbin:/sbin:/usr/local/sbin";
  std::size_t from = 0;
  while (from <= path.size()) {
    const std::size_t colon = std::min(path.find(':', from), path.size());
    const std::string dir = path.substr(from, colon - from);
    from = colon + 1;
    if (dir.empty()) continue;
    const std::string p = dir + "/" + name;
    if (::access(p.c_str(), X_OK) == 0) return p;
  }
  return {};
}

// nginx serving `root` at http://127.0.0.1:<port>/, one process (master_process off: nothing
// changes user, so it runs as root and as anyone else), logs and temporary files in its own
// temporary directory. The access log records each request's connection number and protocol,
// so a test can count the connections its requests used. With `tls`: https:// with HTTP/2 on
// offer, under a self-signed certificate for 127.0.0.1 (cert_file()) made by the openssl tool.
class nginx_server {
 public:
  explicit nginx_server(const std::filesystem::path& root, bool tls = false)
      : dir_("nginx"), tls_(tls) {
    const std::string nginx = find_program("nginx");
    if (nginx.empty()) {
      why_ = "nginx is not installed (scripts/setup.sh installs it)";
      return;
    }
    if (tls && !make_certificate()) return;
    for (int attempt = 0; attempt < 5 && !child_.running(); ++attempt) {
      port_ = free_port();
      write_config(root);
      child_ = child_process({nginx, "-p", dir_.path().string() + "/", "-c",
                              (dir_ / "nginx.conf").string(), "-e",
                              (dir_ / "error.log").string()},
                             false);
      if (child_.running() && wait_for_port(port_, std::chrono::seconds(10)) && !child_.exited())
        break;
      child_.stop();  // the port was taken meanwhile, or nginx refused its configuration
    }
    if (!child_.running()) why_ = "nginx did not start: " + error_log();
  }

  [[nodiscard]] bool running() const noexcept { return child_.running(); }
  [[nodiscard]] const std::string& why_not() const noexcept { return why_; }
  [[nodiscard]] std::string url(const std::string& file) const {
    return std::string(tls_ ? "https" : "http") + "://127.0.0.1:" + std::to_string(port_) + "/" +
           file;
  }
  [[nodiscard]] std::filesystem::path cert_file() const { return dir_ / "cert.pem"; }
  // The connection numbers of the requests logged so far, one per request.
  [[nodiscard]] std::vector<long> logged_connections() const {
    std::vector<long> out;
    for (const auto& [connection, protocol] : settled_log()) out.push_back(connection);
    return out;
  }
  // The protocols of the requests logged so far ("HTTP/1.1", "HTTP/2.0"), one per request.
  [[nodiscard]] std::vector<std::string> logged_protocols() const {
    std::vector<std::string> out;
    for (const auto& [connection, protocol] : settled_log()) out.push_back(protocol);
    return out;
  }
  [[nodiscard]] std::string error_log() const {
    std::ifstream in(dir_ / "error.log");
    return std::string(std::istreambuf_iterator<char>(in), {});
  }

 private:
  using log_line = std::pair<long, std::string>;  // connection number, protocol

  [[nodiscard]] std::vector<log_line> read_log() const {
    std::vector<log_line> out;
    std::ifstream in(dir_ / "access.log");
    long c = 0;
    std::string protocol;
    while (in >> c >> protocol) out.emplace_back(c, protocol);
    return out;
  }
  // The access log once it has stopped growing for 100 ms (at most 5 s). nginx writes a
  // request's line after sending its last byte, so a client that already has the response can
  // read the log before the line is there; counting requests right after reading would then
  // give one of them to the next count.
  [[nodiscard]] std::vector<log_line> settled_log() const {
    using clock = std::chrono::steady_clock;
    const auto give_up = clock::now() + std::chrono::seconds(5);
    std::vector<log_line> seen = read_log();
    auto quiet_since = clock::now();
    while (clock::now() < give_up && clock::now() - quiet_since < std::chrono::milliseconds(100)) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
      std::vector<log_line> now = read_log();
      if (now.size() != seen.size()) {
        seen = std::move(now);
        quiet_since = clock::now();
      }
    }
    return seen;
  }

  bool make_certificate() {
    const std::string openssl = find_program("openssl");
    if (openssl.empty()) {
      why_ = "the openssl tool is not installed (it makes the HTTPS test's certificate)";
      return false;
    }
    child_process gen({openssl, "req", "-x509", "-newkey", "ec", "-pkeyopt",
                       "ec_paramgen_curve:prime256v1", "-nodes", "-days", "2", "-subj",
                       "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1", "-keyout",
                       (dir_ / "key.pem").string(), "-out", cert_file().string()},
                      true);  // its chatter on stdout stays in the pipe
    if (gen.wait_exit(std::chrono::seconds(30)) != 0) {
      why_ = "openssl could not make a certificate";
      return false;
    }
    return true;
  }

  void write_config(const std::filesystem::path& root) const {
    const std::string d = dir_.path().string();
    std::ofstream c(dir_ / "nginx.conf", std::ios::trunc);
    c << "daemon off;\nmaster_process off;\nworker_processes 1;\n"
      << "pid " << d << "/nginx.pid;\nerror_log " << d << "/error.log warn;\n"
      << "events { worker_connections 256; }\n"
      << "http {\n  log_format conn '$connection $server_protocol';\n"
      << "  access_log " << d << "/access.log conn;\n"
      << "  client_body_temp_path " << d << "/client_body;\n"
      << "  proxy_temp_path " << d << "/proxy;\n  fastcgi_temp_path " << d << "/fastcgi;\n"
      << "  uwsgi_temp_path " << d << "/uwsgi;\n  scgi_temp_path " << d << "/scgi;\n"
      << "  default_type application/octet-stream;\n  keepalive_requests 100000;\n"
      << "  server {\n    listen 127.0.0.1:" << port_ << (tls_ ? " ssl http2" : "") << ";\n";
    if (tls_)
      c << "    ssl_certificate " << cert_file().string() << ";\n    ssl_certificate_key " << d
        << "/key.pem;\n";
    c << "    root " << root.string() << ";\n  }\n}\n";
  }

  temp_dir dir_;
  bool tls_ = false;
  int port_ = -1;
  child_process child_;
  std::string why_;
};

// fault_server.py serving `root`, with its arguments `args` (--fault, --rate, --seed, ...).
class fault_server {
 public:
  fault_server(const std::filesystem::path& root, const std::vector<std::string>& args) {
    std::vector<std::string> argv{"python3", GPUFEED_FAULT_SERVER, "--root", root.string()};
    argv.insert(argv.end(), args.begin(), args.end());
    child_ = child_process(argv, true);
    if (!child_.running()) {
      why_ = "python3 could not be started";
      return;
    }
    // Its first line: "PORT <n>", once it listens.
    std::string line;
    const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while (line.find('\n') == std::string::npos && std::chrono::steady_clock::now() < end) {
      pollfd p{child_.stdout_fd(), POLLIN, 0};
      if (::poll(&p, 1, 100) <= 0) continue;
      char buf[64];
      const ssize_t got = ::read(child_.stdout_fd(), buf, sizeof buf);
      if (got <= 0) break;
      line.append(buf, static_cast<std::size_t>(got));
    }
    if (line.rfind("PORT ", 0) == 0) port_ = std::atoi(line.c_str() + 5);
    if (port_ <= 0) {
      why_ = "fault_server.py did not start (said '" + line + "')";
      child_.stop();
    }
  }

  [[nodiscard]] bool running() const noexcept { return port_ > 0; }
  [[nodiscard]] const std::string& why_not() const noexcept { return why_; }
  [[nodiscard]] std::string url(const std::string& file) const {
    return "http://127.0.0.1:" + std::to_string(port_) + "/" + file;
  }

 private:
  child_process child_;
  int port_ = -1;
  std::string why_;
};

}  // namespace gpufeed::test
