// TFSwapOptimizer: tfswap as a Grappler custom graph optimizer.
//
// The optimizer does not embed tfswap's Go engine. For every graph Grappler hands it, it runs
// the tfswap binary as a child process ("tfswap rewrite - -o - FLAGS..."), writes the graph as
// a binary GraphDef to the child's stdin and reads the rewritten GraphDef from its stdout.
// A library without a Go runtime can be loaded into any process, Python and Go programs alike
// (one process can hold only one Go runtime).
//
// Whatever goes wrong (no binary, a bad parameter, tfswap failing, a timeout, an output that
// is not a valid rewrite of the input), the optimizer leaves the graph unchanged and logs one
// warning per kind of problem and process. It never fails the session.
//
// Parameters (RewriterConfig.CustomGraphOptimizer.parameter_map):
//   tfswap_binary    path of the tfswap binary (default: $TFSWAP_BINARY, else "tfswap" on PATH)
//   timeout_seconds  how long one rewrite may take (default 60; Grappler's own deadline, when
//                    shorter, wins)
//   verbose          0 (default): log nothing when all is well; 1: log tfswap's summary for
//                    every rewritten graph; 2: also list every swap (tfswap --verbose)
//   infer_shapes     true (default): give nodes without an _output_shapes attr the shapes of
//                    Grappler's static shape inference before calling tfswap, which sizes
//                    tensors from that attr only
//   anything else    passed to tfswap as --key=value, underscores turned into dashes
//                    (min_bytes=1MiB -> --min-bytes=1MiB; a list gives the flag once per
//                    element). New tfswap flags need no change here; a key tfswap does not know
//                    makes it exit with status 2, which becomes the warning.

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <mutex>
#include <set>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "tensorflow/core/framework/attr_value.pb.h"
#include "tensorflow/core/framework/graph.pb.h"
#include "tensorflow/core/framework/node_def.pb.h"
#include "tensorflow/core/grappler/costs/graph_properties.h"
#include "tensorflow/core/grappler/grappler_item.h"
#include "tensorflow/core/grappler/optimizers/custom_graph_optimizer.h"
#include "tensorflow/core/grappler/optimizers/custom_graph_optimizer_registry.h"
#include "tensorflow/core/platform/logging.h"
#include "tensorflow/core/protobuf/rewriter_config.pb.h"

extern char** environ;

namespace tfswap_bridge {
namespace {

using tensorflow::AttrValue;
using tensorflow::GraphDef;
using tensorflow::NodeDef;

constexpr char kName[] = "TFSwapOptimizer";
constexpr char kScope[] = "tfswap/";
constexpr char kRoleAttr[] = "_tfswap_role";
constexpr char kShapesAttr[] = "_output_shapes";
constexpr double kDefaultTimeoutSeconds = 60;
// tfswap's exit status for a usage error (unknown flag, bad option value).
constexpr int kUsageExit = 2;
// Bytes of tfswap's stderr kept for messages.
constexpr size_t kMaxStderr = 64 << 10;

// WarnOnce logs msg as a warning the first time this process meets a problem of this kind,
// and at VLOG(1) after that: Grappler calls the optimizer once per graph, per meta-optimizer
// iteration and per function, and one misconfiguration or broken binary would otherwise
// repeat its warning for each (TF_CPP_VMODULE=tfswap_optimizer=1 shows them all).
void WarnOnce(const char* kind, const std::string& msg) {
  static std::mutex mu;
  static std::set<std::string>* seen = new std::set<std::string>;
  bool first;
  {
    std::lock_guard<std::mutex> lock(mu);
    first = seen->insert(kind).second;
  }
  if (first) {
    LOG(WARNING) << kName << ": " << msg;
  } else {
    VLOG(1) << kName << ": " << msg;
  }
}

// Rejected remembers the command lines tfswap refused with a usage error (exit status 2),
// so that the other graphs of the process do not run it again to hear the same answer.
bool Rejected(const std::string& cmdline, bool add) {
  static std::mutex mu;
  static std::set<std::string>* rejected = new std::set<std::string>;
  std::lock_guard<std::mutex> lock(mu);
  if (add) return !rejected->insert(cmdline).second;
  return rejected->count(cmdline) > 0;
}

// Unchanged is what Optimize returns when it leaves the graph as it was: Grappler's
// convention for "did nothing" is an Aborted status, which the meta-optimizer swallows
// silently, keeping its own copy of the input graph.
absl::Status Unchanged(const std::string& why) {
  return absl::AbortedError(absl::StrCat(kName, ": ", why));
}

std::string FormatFloat(double v) {
  char buf[64];
  snprintf(buf, sizeof buf, "%.9g", v);
  return buf;
}

// FlagValues turns a parameter into the values of its command-line flag; false when the
// AttrValue holds something no flag can take (a tensor, a function, a shape).
bool FlagValues(const AttrValue& v, std::vector<std::string>* out) {
  switch (v.value_case()) {
    case AttrValue::kS:
      out->push_back(v.s());
      return true;
    case AttrValue::kI:
      out->push_back(std::to_string(v.i()));
      return true;
    case AttrValue::kF:
      out->push_back(FormatFloat(v.f()));
      return true;
    case AttrValue::kB:
      out->push_back(v.b() ? "true" : "false");
      return true;
    case AttrValue::kList: {
      const auto& l = v.list();
      if (l.shape_size() || l.tensor_size() || l.func_size() || l.type_size()) return false;
      for (const auto& s : l.s()) out->push_back(s);
      for (int64_t i : l.i()) out->push_back(std::to_string(i));
      for (float f : l.f()) out->push_back(FormatFloat(f));
      for (bool b : l.b()) out->push_back(b ? "true" : "false");
      return true;
    }
    default:
      return false;
  }
}

// ScalarString returns a scalar parameter as text, for the parameters the bridge reads.
bool ScalarString(const AttrValue& v, std::string* out) {
  std::vector<std::string> vals;
  if (v.value_case() == AttrValue::kList || !FlagValues(v, &vals) || vals.size() != 1) {
    return false;
  }
  *out = vals[0];
  return true;
}

bool ParseBool(const std::string& s, bool* b) {
  if (s == "1" || s == "true" || s == "True" || s == "TRUE") {
    *b = true;
    return true;
  }
  if (s == "0" || s == "false" || s == "False" || s == "FALSE") {
    *b = false;
    return true;
  }
  return false;
}

// Flags tfswap takes that the bridge itself must control.
bool ReservedFlag(const std::string& flag) {
  static const char* const kReserved[] = {"o",      "output", "output-format", "in-place",
                                          "format", "tags",   "help",          "h"};
  for (const char* r : kReserved) {
    if (flag == r) return true;
  }
  return false;
}

bool ValidKey(const std::string& key) {
  if (key.empty() || key[0] == '-' || key[0] == '_') return false;
  for (char c : key) {
    if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
          c == '_' || c == '-')) {
      return false;
    }
  }
  return true;
}

double NowSeconds() {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

// Fd is an owned file descriptor.
class Fd {
 public:
  Fd() = default;
  explicit Fd(int fd) : fd_(fd) {}
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  ~Fd() { Reset(); }
  int get() const { return fd_; }
  void Reset(int fd = -1) {
    if (fd_ >= 0) close(fd_);
    fd_ = fd;
  }

 private:
  int fd_ = -1;
};

// AboveStdio moves fd to a close-on-exec descriptor greater than 2, so that the child's
// dup2 onto 0, 1 or 2 never meets the same number (which would keep close-on-exec set) even
// when the host process runs with its standard descriptors closed.
bool AboveStdio(Fd* fd) {
  if (fd->get() > 2) return true;
  int moved = fcntl(fd->get(), F_DUPFD_CLOEXEC, 3);
  if (moved < 0) return false;
  fd->Reset(moved);
  return true;
}

bool SetNonBlocking(int fd) {
  int flags = fcntl(fd, F_GETFL);
  return flags >= 0 && fcntl(fd, F_SETFL, flags | O_NONBLOCK) == 0;
}

// ChildResult is how a run of the child process ended.
struct ChildResult {
  bool started = false;
  std::string start_error;  // why it could not be started
  bool timed_out = false;
  bool exited = false;  // exit_status is valid
  int exit_status = 0;
  int signal = 0;  // the signal that killed it, when not exited
  std::string out;
  std::string err;
};

// RunChild runs argv[0] (looked up on PATH when it has no '/') with input on its stdin and
// collects its stdout and stderr, killing it once timeout_seconds have passed. It uses
// posix_spawn, which is safe in the multi-threaded processes TensorFlow runs in, and writes
// through a socket with MSG_NOSIGNAL, so a child that exits early cannot raise SIGPIPE in the
// host process.
ChildResult RunChild(const std::vector<std::string>& argv, const std::string& input,
                     double timeout_seconds) {
  ChildResult r;
  int sv[2];
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) {
    r.start_error = absl::StrCat("socketpair: ", strerror(errno));
    return r;
  }
  Fd in_parent(sv[0]), in_child(sv[1]);
  int p[2];
  if (pipe2(p, O_CLOEXEC) != 0) {
    r.start_error = absl::StrCat("pipe: ", strerror(errno));
    return r;
  }
  Fd out_parent(p[0]), out_child(p[1]);
  if (pipe2(p, O_CLOEXEC) != 0) {
    r.start_error = absl::StrCat("pipe: ", strerror(errno));
    return r;
  }
  Fd err_parent(p[0]), err_child(p[1]);
  if (!AboveStdio(&in_child) || !AboveStdio(&out_child) || !AboveStdio(&err_child)) {
    r.start_error = absl::StrCat("fcntl: ", strerror(errno));
    return r;
  }
  // The child reads its stdin only; shut the other direction so that nothing it writes
  // there can block it.
  shutdown(in_child.get(), SHUT_WR);

  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, in_child.get(), 0);
  posix_spawn_file_actions_adddup2(&actions, out_child.get(), 1);
  posix_spawn_file_actions_adddup2(&actions, err_child.get(), 2);
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  sigset_t none, all;
  sigemptyset(&none);
  sigfillset(&all);
  // The child starts with no blocked signals and default dispositions, whatever the host
  // process (Python ignores SIGPIPE, Go installs its own handlers) has set up.
  posix_spawnattr_setsigmask(&attr, &none);
  posix_spawnattr_setsigdefault(&attr, &all);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);

  std::vector<char*> cargv;
  for (const auto& a : argv) cargv.push_back(const_cast<char*>(a.c_str()));
  cargv.push_back(nullptr);
  pid_t pid;
  int rc = posix_spawnp(&pid, cargv[0], &actions, &attr, cargv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attr);
  if (rc != 0) {
    r.start_error = strerror(rc);
    return r;
  }
  r.started = true;
  in_child.Reset();
  out_child.Reset();
  err_child.Reset();
  SetNonBlocking(in_parent.get());
  SetNonBlocking(out_parent.get());
  SetNonBlocking(err_parent.get());

  const double deadline = NowSeconds() + timeout_seconds;
  size_t written = 0;
  if (input.empty()) in_parent.Reset();
  bool out_open = true, err_open = true;
  char buf[1 << 16];
  while (out_open || err_open) {
    double left = deadline - NowSeconds();
    if (left <= 0) {
      r.timed_out = true;
      break;
    }
    struct pollfd fds[3];
    int n = 0;
    int in_idx = -1, out_idx = -1, err_idx = -1;
    if (in_parent.get() >= 0) {
      fds[n] = {in_parent.get(), POLLOUT, 0};
      in_idx = n++;
    }
    if (out_open) {
      fds[n] = {out_parent.get(), POLLIN, 0};
      out_idx = n++;
    }
    if (err_open) {
      fds[n] = {err_parent.get(), POLLIN, 0};
      err_idx = n++;
    }
    int ms = static_cast<int>(std::min(left * 1000 + 1, 1000.0));
    int ready = poll(fds, n, ms);
    if (ready < 0) {
      if (errno == EINTR) continue;
      r.start_error = absl::StrCat("poll: ", strerror(errno));
      r.timed_out = true;  // treated as a failure below: kill and reap
      break;
    }
    if (in_idx >= 0 && fds[in_idx].revents) {
      ssize_t w = send(in_parent.get(), input.data() + written, input.size() - written,
                       MSG_NOSIGNAL | MSG_DONTWAIT);
      if (w > 0) {
        written += w;
        if (written == input.size()) in_parent.Reset();  // EOF for the child
      } else if (w < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
        in_parent.Reset();  // the child stopped reading (EPIPE); its exit status will tell
      }
    }
    auto drain = [&buf](int fd, std::string* dst, size_t cap, bool* open) {
      for (;;) {
        ssize_t got = read(fd, buf, sizeof buf);
        if (got > 0) {
          if (dst->size() < cap) dst->append(buf, std::min<size_t>(got, cap - dst->size()));
          continue;
        }
        if (got == 0) *open = false;
        if (got < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
          *open = false;
        }
        return;
      }
    };
    if (out_idx >= 0 && fds[out_idx].revents) {
      drain(out_parent.get(), &r.out, SIZE_MAX, &out_open);
    }
    if (err_idx >= 0 && fds[err_idx].revents) {
      drain(err_parent.get(), &r.err, kMaxStderr, &err_open);
    }
  }
  in_parent.Reset();

  // Reap the child. It has closed its output, so it is exiting; wait for it until the
  // deadline, then kill it.
  int status = 0;
  for (;;) {
    pid_t w = waitpid(pid, &status, WNOHANG);
    if (w == pid) break;
    if (w < 0 && errno == EINTR) continue;
    if (w < 0) {
      // ECHILD: the host process reaps children itself (SIGCHLD ignored); no status.
      r.start_error = absl::StrCat("waitpid: ", strerror(errno));
      return r;
    }
    if (r.timed_out || NowSeconds() >= deadline) {
      r.timed_out = true;
      kill(pid, SIGKILL);
      while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
      }
      return r;
    }
    struct timespec nap = {0, 1000 * 1000};  // 1 ms
    nanosleep(&nap, nullptr);
  }
  if (WIFEXITED(status)) {
    r.exited = true;
    r.exit_status = WEXITSTATUS(status);
  } else if (WIFSIGNALED(status)) {
    r.signal = WTERMSIG(status);
  }
  return r;
}

// Trimmed returns tfswap's stderr without its trailing newline.
std::string Trimmed(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
  if (s.empty()) return "(no message)";
  return s;
}

// OneLine returns tfswap's stderr as one line for a warning, its lines joined by " / " and
// the usage hint tfswap adds for a terminal user left out.
std::string OneLine(const std::string& s) {
  std::string out, line;
  auto flush = [&] {
    while (!line.empty() && line.back() == ' ') line.pop_back();
    if (!line.empty() && line.find("--help") == std::string::npos) {
      absl::StrAppend(&out, out.empty() ? "" : " / ", line);
    }
    line.clear();
  };
  for (char c : s) {
    if (c == '\n') {
      flush();
    } else {
      line.push_back(c);
    }
  }
  flush();
  return out.empty() ? "(no message)" : out;
}

// NodeName returns the node of a tensor or control input name ("^a", "a:1" -> "a").
std::string NodeName(const std::string& t) {
  size_t start = (!t.empty() && t[0] == '^') ? 1 : 0;
  size_t colon = t.find(':', start);
  return t.substr(start, colon == std::string::npos ? std::string::npos : colon - start);
}

bool IsRewritten(const GraphDef& g) {
  for (const NodeDef& n : g.node()) {
    if (n.name().rfind(kScope, 0) == 0 || n.attr().count(kRoleAttr)) return true;
  }
  return false;
}

class TFSwapOptimizer : public tensorflow::grappler::CustomGraphOptimizer {
 public:
  std::string name() const override { return kName; }

  // The rewrite never instantiates functions: Grappler may hand it a stub library.
  bool UsesFunctionLibrary() const override { return false; }

  // Init reads the parameters. It always succeeds: an error here would fail the whole
  // meta-optimizer, and with it every other Grappler pass of the user's session. A bad
  // parameter is remembered and reported, once, by Optimize.
  absl::Status Init(const tensorflow::RewriterConfig_CustomGraphOptimizer* config) override {
    if (const char* env = getenv("TFSWAP_BINARY")) binary_ = env;
    if (binary_.empty()) binary_ = "tfswap";
    if (config == nullptr) return absl::OkStatus();
    // parameter_map is a protobuf map, whose iteration order is unspecified: sort the keys
    // so that the command line, and with it tfswap's output, is deterministic.
    std::vector<std::string> keys;
    for (const auto& kv : config->parameter_map()) keys.push_back(kv.first);
    std::sort(keys.begin(), keys.end());
    for (const std::string& key : keys) {
      const AttrValue& v = config->parameter_map().at(key);
      std::string s;
      if (key == "tfswap_binary") {
        if (!ScalarString(v, &s) || s.empty()) {
          return Misconfigured("parameter tfswap_binary must be a non-empty string");
        }
        binary_ = s;
      } else if (key == "timeout_seconds") {
        char* end = nullptr;
        double t = 0;
        if (ScalarString(v, &s)) t = strtod(s.c_str(), &end);
        if (end == nullptr || end == s.c_str() || *end != '\0' || !(t > 0)) {
          return Misconfigured(
              absl::StrCat("parameter timeout_seconds must be a positive number of seconds, "
                           "not '", s, "'"));
        }
        timeout_seconds_ = t;
      } else if (key == "verbose") {
        bool b;
        if (!ScalarString(v, &s)) s = "?";
        if (s == "2") {
          verbose_ = 2;
        } else if (ParseBool(s, &b)) {
          verbose_ = b ? 1 : 0;
        } else {
          return Misconfigured(
              absl::StrCat("parameter verbose must be 0, 1, 2, true or false, not '", s, "'"));
        }
      } else if (key == "infer_shapes") {
        if (!ScalarString(v, &s) || !ParseBool(s, &infer_shapes_)) {
          return Misconfigured("parameter infer_shapes must be true or false");
        }
      } else {
        if (!ValidKey(key)) {
          return Misconfigured(absl::StrCat("parameter name '", key,
                                            "' is not a flag name (letters, digits, _ and -)"));
        }
        std::string flag = key;
        std::replace(flag.begin(), flag.end(), '_', '-');
        if (ReservedFlag(flag)) {
          return Misconfigured(
              absl::StrCat("parameter '", key, "' is set by the bridge and cannot be given"));
        }
        std::vector<std::string> vals;
        if (!FlagValues(v, &vals)) {
          return Misconfigured(absl::StrCat("parameter '", key,
                                            "' must be a string, number, bool or a list of "
                                            "them"));
        }
        for (const auto& val : vals) flags_.push_back(absl::StrCat("--", flag, "=", val));
      }
    }
    if (verbose_ >= 2) flags_.push_back("--verbose");
    return absl::OkStatus();
  }

  absl::Status Optimize(tensorflow::grappler::Cluster* cluster,
                        const tensorflow::grappler::GrapplerItem& item,
                        GraphDef* optimized_graph) override {
    if (!config_error_.empty()) {
      WarnOnce("config", absl::StrCat("graphs run unchanged: bad parameter: ", config_error_));
      return Unchanged(config_error_);
    }
    // Grappler runs its passes twice by default, and the first pass's result comes back:
    // a graph tfswap already rewrote is left alone, silently.
    if (IsRewritten(item.graph)) {
      VLOG(1) << kName << ": graph " << item.id << " already rewritten, left as is";
      return Unchanged("already rewritten");
    }
    std::vector<std::string> argv = {binary_, "rewrite", "-", "-o", "-"};
    argv.insert(argv.end(), flags_.begin(), flags_.end());
    const std::string cmdline = Joined(argv);
    if (Rejected(cmdline, false)) {
      VLOG(1) << kName << ": tfswap rejected these parameters before: " << cmdline;
      return Unchanged("parameters rejected");
    }
    const double started = NowSeconds();

    GraphDef annotated;
    const GraphDef* input = &item.graph;
    std::unordered_set<std::string> unannotated;
    for (const NodeDef& n : item.graph.node()) {
      if (!n.attr().count(kShapesAttr)) unannotated.insert(n.name());
    }
    if (infer_shapes_ && !unannotated.empty()) {
      std::string why;
      if (Annotate(item, &annotated, &why)) {
        input = &annotated;
      } else {
        VLOG(1) << kName << ": static shape inference failed (" << why
                << "); tfswap sizes only the nodes that carry _output_shapes";
      }
    }
    const double annotated_at = NowSeconds();

    std::string serialized;
    if (!input->SerializeToString(&serialized)) {
      WarnOnce("serialize",
               absl::StrCat("graph left unchanged: cannot serialize graph ", item.id));
      return Unchanged("serialize");
    }

    double timeout = timeout_seconds_;
    if (deadline_usec() > 0) {
      struct timespec ts;
      clock_gettime(CLOCK_REALTIME, &ts);
      double now_usec = ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
      timeout = std::min(timeout, (deadline_usec() - now_usec) / 1e6);
    }
    if (timeout <= 0) {
      WarnOnce("deadline",
               "graph left unchanged: Grappler's deadline passed before tfswap could run");
      return Unchanged("deadline");
    }
    ChildResult r = RunChild(argv, serialized, timeout);
    const double ran_at = NowSeconds();
    if (!r.started) {
      WarnOnce("spawn",
               absl::StrCat("graphs run unchanged: cannot run the tfswap binary '", binary_,
                            "': ", r.start_error,
                            " (set the parameter tfswap_binary or the environment variable "
                            "TFSWAP_BINARY, or put tfswap on PATH)"));
      return Unchanged("no binary");
    }
    if (r.timed_out) {
      WarnOnce("timeout", absl::StrCat("graph left unchanged: tfswap did not finish within ",
                                       FormatFloat(timeout),
                                       " s (parameter timeout_seconds) and was killed"));
      return Unchanged("timeout");
    }
    if (!r.exited) {
      WarnOnce("killed", absl::StrCat("graph left unchanged: tfswap ",
                                      r.signal ? absl::StrCat("was killed by signal ", r.signal)
                                               : r.start_error));
      return Unchanged("child failed");
    }
    if (r.exit_status != 0) {
      std::string msg = OneLine(r.err);
      if (msg.find("already rewritten") != std::string::npos) {
        VLOG(1) << kName << ": " << msg;
        return Unchanged("already rewritten");
      }
      if (r.exit_status == kUsageExit) {
        Rejected(cmdline, true);
        WarnOnce("usage", absl::StrCat("graphs run unchanged: tfswap rejected the parameters (",
                                       Joined(flags_), "): ", msg));
      } else {
        WarnOnce("failed", absl::StrCat("graph left unchanged: tfswap failed (exit status ",
                                        r.exit_status, ") on graph ", item.id, ": ", msg));
      }
      return Unchanged("tfswap failed");
    }

    GraphDef out;
    if (!out.ParseFromString(r.out)) {
      WarnOnce("output", absl::StrCat("graph left unchanged: tfswap's output for graph ",
                                      item.id, " is not a binary GraphDef"));
      return Unchanged("bad output");
    }
    std::string bad = CheckRewrite(item, out);
    if (!bad.empty()) {
      WarnOnce("not-rewrite", absl::StrCat("graph left unchanged: tfswap's output for graph ",
                                           item.id, " is not a rewrite of its input (", bad,
                                           ")"));
      return Unchanged("bad output");
    }
    const int added = out.node_size() - item.graph.node_size();
    if (verbose_ > 0) {
      LOG(INFO) << kName << ": graph " << item.id << " (" << item.graph.node_size()
                << " nodes): " << added << " swap nodes added; shapes "
                << FormatFloat(annotated_at - started) << " s, tfswap "
                << FormatFloat(ran_at - annotated_at) << " s\n"
                << Trimmed(r.err);
    } else {
      VLOG(1) << kName << ": graph " << item.id << ": " << added << " swap nodes added";
    }
    // A rewrite may add nothing and only move nodes: --offload places variables and their
    // updates on the host, in every graph a session runs (the initialiser's too), so that
    // each run finds the variables' resources on the device that holds them.
    if (added == 0 && !DevicesMoved(item.graph, out)) return Unchanged("nothing to swap");
    RestoreShapes(unannotated, &out);
    *out.mutable_library() = item.graph.library();
    *out.mutable_versions() = item.graph.versions();
    *optimized_graph = std::move(out);
    return absl::OkStatus();
  }

 private:
  absl::Status Misconfigured(const std::string& msg) {
    config_error_ = msg;
    return absl::OkStatus();
  }

  static std::string Joined(const std::vector<std::string>& v) {
    std::string s;
    for (const auto& a : v) absl::StrAppend(&s, s.empty() ? "" : " ", a);
    return s.empty() ? "no flags" : s;
  }

  // Annotate copies the item's graph into *out and gives every node that has no
  // _output_shapes attr the output shapes Grappler's static shape inference finds.
  static bool Annotate(const tensorflow::grappler::GrapplerItem& item, GraphDef* out,
                       std::string* why) {
    tensorflow::grappler::GraphProperties props(item);
    absl::Status s = props.InferStatically(/*assume_valid_feeds=*/true,
                                           /*aggressive_shape_inference=*/false,
                                           /*include_input_tensor_values=*/false,
                                           /*include_output_tensor_values=*/false);
    if (!s.ok()) {
      *why = s.ToString();
      return false;
    }
    *out = item.graph;
    for (NodeDef& n : *out->mutable_node()) {
      if (n.attr().count(kShapesAttr) || !props.HasOutputProperties(n.name())) continue;
      AttrValue shapes;
      auto* list = shapes.mutable_list();
      for (const auto& p : props.GetOutputProperties(n.name())) *list->add_shape() = p.shape();
      (*n.mutable_attr())[kShapesAttr] = std::move(shapes);
    }
    return true;
  }

  // RestoreShapes takes away the _output_shapes attrs Annotate added to the input's nodes,
  // so that the rewrite changes nothing in them but the inputs tfswap rewired. The swap
  // nodes keep theirs.
  static void RestoreShapes(const std::unordered_set<std::string>& bare, GraphDef* out) {
    if (bare.empty()) return;
    for (NodeDef& n : *out->mutable_node()) {
      if (bare.count(n.name())) n.mutable_attr()->erase(kShapesAttr);
    }
  }

  // CheckRewrite returns why out is not a tfswap rewrite of the item's graph, or "": every
  // node of the input (the fetch, feed and preserved nodes among them) must still be there,
  // and every added node must be a tfswap swap node.
  // DevicesMoved reports whether a node of in has another device in out.
  static bool DevicesMoved(const GraphDef& in, const GraphDef& out) {
    std::unordered_map<std::string, const NodeDef*> by_name;
    for (const NodeDef& n : out.node()) by_name[n.name()] = &n;
    for (const NodeDef& n : in.node()) {
      auto it = by_name.find(n.name());
      if (it != by_name.end() && it->second->device() != n.device()) return true;
    }
    return false;
  }

  static std::string CheckRewrite(const tensorflow::grappler::GrapplerItem& item,
                                  const GraphDef& out) {
    std::unordered_map<std::string, const NodeDef*> by_name;
    for (const NodeDef& n : out.node()) by_name[n.name()] = &n;
    for (const NodeDef& n : item.graph.node()) {
      auto it = by_name.find(n.name());
      if (it == by_name.end()) return absl::StrCat("node ", n.name(), " is missing");
      if (it->second->op() != n.op()) return absl::StrCat("node ", n.name(), " changed its op");
    }
    for (const std::string& f : item.fetch) {
      if (!by_name.count(NodeName(f))) return absl::StrCat("fetch ", f, " is missing");
    }
    std::unordered_set<std::string> original;
    for (const NodeDef& n : item.graph.node()) original.insert(n.name());
    for (const NodeDef& n : out.node()) {
      if (original.count(n.name())) continue;
      if (n.name().rfind(kScope, 0) != 0 || !n.attr().count(kRoleAttr)) {
        return absl::StrCat("added node ", n.name(), " is not a tfswap swap node");
      }
    }
    return "";
  }

  std::string binary_;
  double timeout_seconds_ = kDefaultTimeoutSeconds;
  int verbose_ = 0;
  bool infer_shapes_ = true;
  std::vector<std::string> flags_;
  std::string config_error_;
};

}  // namespace

REGISTER_GRAPH_OPTIMIZER_AS(TFSwapOptimizer, "TFSwapOptimizer");

}  // namespace tfswap_bridge
