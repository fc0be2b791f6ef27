// swap_core.cc: running tfswap as a child process and checking its answer; see swap_core.h.

#include "swap_core.h"

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
#include <cctype>
#include <cmath>
#include <cstdint>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "google/protobuf/io/coded_stream.h"
#include "google/protobuf/io/zero_copy_stream_impl_lite.h"
#include "tensorflow/core/framework/attr_value.pb.h"
#include "tensorflow/core/framework/attr_value_util.h"
#include "tensorflow/core/framework/graph.pb.h"
#include "tensorflow/core/framework/node_def.pb.h"

extern char** environ;

namespace tfswap_core {
namespace {

using tensorflow::AttrValue;
using tensorflow::GraphDef;
using tensorflow::NodeDef;

constexpr char kScope[] = "tfswap/";
constexpr char kRoleAttr[] = "_tfswap_role";
constexpr char kIDAttr[] = "_tfswap_id";
constexpr char kDoNotRemoveAttr[] = "_grappler_do_not_remove";
constexpr char kRecompute[] = "/recompute/";
constexpr char kShapesAttr[] = "_output_shapes";
constexpr char kWarningPrefix[] = "tfswap: warning: ";
// tfswap's exit statuses (cmd/tfswap/main.go, README's table).
constexpr int kBadInputExit = 1;
constexpr int kUsageExit = 2;
constexpr int kInternalExit = 3;
// Bytes of tfswap's stderr kept for messages and the summary.
constexpr size_t kKeptStderr = 64 << 10;
// How long the output of a child that has exited is still read (a grandchild holding the
// pipes open) before its process group is killed.
constexpr double kExitGraceSeconds = 1;
constexpr uint64_t kMaxGraphBytes = (uint64_t{2} << 30) - 1;

std::mutex state_mu;
// Command lines tfswap refused with a usage error.
std::set<std::string>* rejected = new std::set<std::string>;
// Whether tfswap timed out once in this process.
bool timed_out_before = false;

double NowSeconds() {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

std::string FormatSeconds(double v) {
  char buf[64];
  snprintf(buf, sizeof buf, "%.9g", v);
  return buf;
}

std::string Joined(const std::vector<std::string>& v) {
  std::string s;
  for (const auto& a : v) absl::StrAppend(&s, s.empty() ? "" : " ", a);
  return s.empty() ? "no flags" : s;
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

// ReservedFlag reports whether tfswap's flag must stay under the core's control.
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
  std::string start_error;  // why it could not be started or waited for
  bool timed_out = false;
  bool out_overflow = false;  // stdout exceeded its cap (the child was killed)
  bool err_overflow = false;  // stderr exceeded its cap (the child was killed)
  bool exited = false;        // exit_status is valid
  int exit_status = 0;
  int signal = 0;  // the signal that killed it, when not exited
  std::string out;
  std::string err;  // the first kKeptStderr bytes
};

// RunChild runs argv[0] (looked up on PATH when it has no '/') in a process group of its own
// with input on its stdin, and collects its stdout and stderr up to their caps. Once
// timeout_seconds have passed, or a cap is exceeded, the whole process group is killed
// (a wrapper script's children too); so is what remains of the group once the child has
// exited. It uses posix_spawn, which is safe in the multi-threaded processes TensorFlow runs
// in, and writes through a socket with MSG_NOSIGNAL, so a child that exits early cannot raise
// SIGPIPE in the host process.
ChildResult RunChild(const std::vector<std::string>& argv, const std::string& input,
                     double timeout_seconds, uint64_t out_cap, uint64_t err_cap) {
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
  // process (Python ignores SIGPIPE, Go installs its own handlers) has set up, in a new
  // process group (its id is the child's pid) that a timeout kills as a whole.
  posix_spawnattr_setsigmask(&attr, &none);
  posix_spawnattr_setsigdefault(&attr, &all);
  posix_spawnattr_setpgroup(&attr, 0);
  posix_spawnattr_setflags(&attr,
                           POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETPGROUP);

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
  double stop_at = deadline;  // shortened to the grace period once the child has exited
  bool exited = false;        // the child has exited (not yet reaped: its pid stays ours)
  bool kill_group = false;
  size_t written = 0;
  if (input.empty()) in_parent.Reset();
  bool out_open = true, err_open = true;
  uint64_t err_total = 0;
  char buf[1 << 16];
  while (out_open || err_open || !exited) {
    double now = NowSeconds();
    if (now >= stop_at) {
      if (!exited) r.timed_out = true;
      kill_group = true;
      break;
    }
    if (!exited) {
      siginfo_t info;
      info.si_pid = 0;
      // WNOWAIT: the child stays a zombie, so its pid (and process group id) cannot be
      // reused before the group is killed and the child reaped below.
      if (waitid(P_PID, pid, &info, WEXITED | WNOHANG | WNOWAIT) == 0 && info.si_pid == pid) {
        exited = true;
        stop_at = std::min(deadline, now + kExitGraceSeconds);
        in_parent.Reset();
      } else if (errno == ECHILD) {
        // The host process reaps children itself (SIGCHLD ignored): no status to be had.
        r.start_error = absl::StrCat("waitid: ", strerror(errno));
        kill_group = true;
        break;
      }
    }
    if (!out_open && !err_open) {
      // The child closed its output; it is exiting. Wait for it in short naps.
      struct timespec nap = {0, 1000 * 1000};  // 1 ms
      nanosleep(&nap, nullptr);
      continue;
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
    // Short polls: the child's exit is noticed by waitid, not by an event here.
    int ms = static_cast<int>(std::min((stop_at - now) * 1000 + 1, 50.0));
    int ready = poll(fds, n, ms);
    if (ready < 0) {
      if (errno == EINTR) continue;
      r.start_error = absl::StrCat("poll: ", strerror(errno));
      kill_group = true;
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
    // drain reads what fd holds; false when the total passed cap.
    auto drain = [&buf](int fd, std::string* dst, size_t keep, uint64_t* total, uint64_t cap,
                        bool* open) {
      for (;;) {
        ssize_t got = read(fd, buf, sizeof buf);
        if (got > 0) {
          *total += got;
          if (*total > cap) return false;
          if (dst->size() < keep) dst->append(buf, std::min<size_t>(got, keep - dst->size()));
          continue;
        }
        if (got == 0) *open = false;
        if (got < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
          *open = false;
        }
        return true;
      }
    };
    if (out_idx >= 0 && fds[out_idx].revents) {
      uint64_t total = r.out.size();
      if (!drain(out_parent.get(), &r.out, SIZE_MAX, &total, out_cap, &out_open)) {
        r.out_overflow = true;
        kill_group = true;
        break;
      }
    }
    if (err_idx >= 0 && fds[err_idx].revents) {
      if (!drain(err_parent.get(), &r.err, kKeptStderr, &err_total, err_cap, &err_open)) {
        r.err_overflow = true;
        kill_group = true;
        break;
      }
    }
  }
  in_parent.Reset();
  out_parent.Reset();
  err_parent.Reset();
  // Whatever of the group is still running (the child on a timeout or an overflow, a
  // wrapper's children that outlived it) is killed; the child is not reaped yet, so its
  // process group id still names this group.
  if (kill_group || exited) kill(-pid, SIGKILL);
  int status = 0;
  for (;;) {
    pid_t w = waitpid(pid, &status, 0);
    if (w == pid) break;
    if (w < 0 && errno == EINTR) continue;
    if (r.start_error.empty()) r.start_error = absl::StrCat("waitpid: ", strerror(errno));
    return r;
  }
  if (WIFEXITED(status)) {
    r.exited = true;
    r.exit_status = WEXITSTATUS(status);
  } else if (WIFSIGNALED(status)) {
    r.signal = WTERMSIG(status);
  }
  return r;
}

// OneLine returns tfswap's stderr as one line for a warning, its lines joined by " / ", the
// usage hint tfswap adds for a terminal user and its own warnings (reported apart) left out.
std::string OneLine(const std::string& s) {
  std::string out, line;
  auto flush = [&] {
    while (!line.empty() && line.back() == ' ') line.pop_back();
    if (!line.empty() && line.find("--help") == std::string::npos &&
        line.rfind(kWarningPrefix, 0) != 0) {
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

// TfswapWarnings returns tfswap's "tfswap: warning: " lines from its stderr.
std::vector<std::string> TfswapWarnings(const std::string& s) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start < s.size()) {
    size_t end = s.find('\n', start);
    if (end == std::string::npos) end = s.size();
    std::string line = s.substr(start, end - start);
    if (line.rfind(kWarningPrefix, 0) == 0) out.push_back(line.substr(strlen(kWarningPrefix)));
    start = end + 1;
  }
  return out;
}

// Tensor is one input of a node: its node, output port (-1 for a control input).
struct Tensor {
  std::string node;
  int port = 0;
  bool operator==(const Tensor& o) const { return node == o.node && port == o.port; }
};

// ParseInput splits an input name ("^a", "a", "a:1").
Tensor ParseInput(const std::string& s) {
  Tensor t;
  if (!s.empty() && s[0] == '^') {
    t.node = s.substr(1);
    t.port = -1;
    return t;
  }
  size_t colon = s.rfind(':');
  if (colon != std::string::npos && colon + 1 < s.size() &&
      s.find_first_not_of("0123456789", colon + 1) == std::string::npos &&
      s.size() - colon - 1 <= 9) {
    t.node = s.substr(0, colon);
    t.port = atoi(s.c_str() + colon + 1);
  } else {
    t.node = s;
  }
  return t;
}

// IsCPU reports whether a device name names a CPU ("/device:CPU:0", "/job:a/cpu:0").
bool IsCPU(const std::string& device) {
  std::string d = device;
  std::transform(d.begin(), d.end(), d.begin(), [](unsigned char c) { return tolower(c); });
  size_t at = d.rfind('/');
  std::string last = at == std::string::npos ? d : d.substr(at + 1);
  return last.rfind("cpu:", 0) == 0 || last.rfind("device:cpu:", 0) == 0;
}

// DevicesMoved reports whether a node of in has another device in out.
bool DevicesMoved(const GraphDef& in, const GraphDef& out) {
  std::unordered_map<std::string, const NodeDef*> by_name;
  for (const NodeDef& n : out.node()) by_name[n.name()] = &n;
  for (const NodeDef& n : in.node()) {
    auto it = by_name.find(n.name());
    if (it != by_name.end() && it->second->device() != n.device()) return true;
  }
  return false;
}

std::string Role(const NodeDef& n) {
  auto it = n.attr().find(kRoleAttr);
  return it == n.attr().end() ? "" : it->second.s();
}

// Checker holds the two graphs of a CheckRewrite.
class Checker {
 public:
  Checker(const GraphDef& in, const GraphDef& out, bool offload)
      : in_(in), out_(out), offload_(offload) {}

  std::string Run(const std::vector<std::string>& keep) {
    for (const NodeDef& n : in_.node()) orig_[n.name()] = &n;
    for (const NodeDef& n : out_.node()) {
      if (!by_name_.emplace(n.name(), &n).second) {
        return absl::StrCat("node ", n.name(), " appears twice");
      }
    }
    for (const NodeDef& n : in_.node()) {
      if (!by_name_.count(n.name())) return absl::StrCat("node ", n.name(), " is missing");
    }
    // Every input of every node resolves, data inputs before control inputs.
    for (const NodeDef& n : out_.node()) {
      bool control = false;
      for (const std::string& i : n.input()) {
        Tensor t = ParseInput(i);
        if (t.port < 0) {
          control = true;
        } else if (control) {
          return absl::StrCat("node ", n.name(), " has data input ", i,
                              " after a control input");
        }
        if (!by_name_.count(t.node)) {
          return absl::StrCat("input ", i, " of node ", n.name(), " names no node");
        }
      }
    }
    for (const NodeDef& n : out_.node()) {
      if (orig_.count(n.name())) continue;
      std::string role = Role(n);
      if (n.name().rfind(kScope, 0) != 0 ||
          (role != "swap_out" && role != "swap_in" && role != "gate" && role != "recompute" &&
           role != "weight_in" && role != "swap_relay" && role != "stack_out" &&
           role != "stack_in")) {
        return absl::StrCat("added node ", n.name(), " is not a tfswap node");
      }
      if (role == "recompute") {
        std::string bad = CopyOf(n, nullptr);
        if (!bad.empty()) return bad;
      } else if (role == "gate" && n.op() == "L2Loss") {
        // A gate of a few bytes (tfswap --gate-kind reduce): it reads one tensor of its
        // trigger and nothing reads its value; CheckRewrite's Carries never passes through it.
        if (DataInputs(n).size() != 1) {
          return absl::StrCat("tfswap gate ", n.name(), " is not an L2Loss of one tensor");
        }
      } else if (n.op() != "Identity" || DataInputs(n).size() != 1) {
        return absl::StrCat("tfswap node ", n.name(), " is not an Identity of one tensor");
      }
    }
    for (const NodeDef& n : in_.node()) {
      std::string bad = Original(n);
      if (!bad.empty()) return bad;
    }
    for (const std::string& k : keep) {
      if (k.empty()) continue;
      Tensor t = ParseInput(k);
      if (!by_name_.count(t.node)) return absl::StrCat("fetched or preserved ", k, " is missing");
    }
    return "";
  }

  // Strict returns "" when every node of names that is in the input kept its inputs (data
  // and control, in order) and its device, else why not.
  std::string Strict(const std::vector<std::string>& names) {
    for (const std::string& k : names) {
      if (k.empty()) continue;
      const std::string name = ParseInput(k).node;
      auto o = orig_.find(name);
      auto n = by_name_.find(name);
      if (o == orig_.end() || n == by_name_.end()) continue;
      const NodeDef& a = *o->second;
      const NodeDef& b = *n->second;
      if (a.device() != b.device()) {
        return absl::StrCat("preserved node ", name, " moved to ", b.device());
      }
      if (a.input_size() != b.input_size()) {
        return absl::StrCat("preserved node ", name, " has other inputs");
      }
      for (int i = 0; i < a.input_size(); i++) {
        if (a.input(i) != b.input(i)) {
          return absl::StrCat("preserved node ", name, " reads ", b.input(i), " instead of ",
                              a.input(i));
        }
      }
    }
    return "";
  }

 private:
  static std::vector<Tensor> DataInputs(const NodeDef& n) {
    std::vector<Tensor> v;
    for (const std::string& i : n.input()) {
      Tensor t = ParseInput(i);
      if (t.port >= 0) v.push_back(t);
    }
    return v;
  }

  // StackAccumulator reports whether the input node n is part of a stack accumulator: a
  // StackV2, StackPushV2, StackPopV2 or StackCloseV2, or an Enter or Identity whose data
  // input is (through such nodes) a StackV2's handle.
  bool StackAccumulator(const NodeDef& n, int depth) {
    if (n.op() == "StackV2" || n.op() == "StackPushV2" || n.op() == "StackPopV2" ||
        n.op() == "StackCloseV2") {
      return true;
    }
    if ((n.op() != "Enter" && n.op() != "Identity") || depth > 64) return false;
    std::vector<Tensor> in = DataInputs(n);
    if (in.size() != 1 || in[0].port != 0) return false;
    auto it = orig_.find(in[0].node);
    if (it == orig_.end()) return false;
    const NodeDef& src = *it->second;
    return (src.op() == "StackV2" || src.op() == "Enter" || src.op() == "Identity") &&
           StackAccumulator(src, depth + 1);
  }

  // ListAccumulator reports whether the input node n is part of a TensorList accumulator of
  // a lowered while loop: an EmptyTensorList, or a TensorListPushBack, TensorListPopBack,
  // Enter, Merge, Switch, Identity, NextIteration or Exit whose input 0 is (through such
  // nodes) an EmptyTensorList's list (output 0, or either output of a Switch). Input 0 of each leads back to the list's start
  // (a loop's Merge reads its Enter first), so the walk ends without cycles.
  bool ListAccumulator(const NodeDef& n, int depth) {
    if (n.op() == "EmptyTensorList") return true;
    static const std::set<std::string> carry = {"TensorListPushBack", "TensorListPopBack", "Enter",
                                                "Merge", "Switch", "Identity", "NextIteration",
                                                "Exit"};
    if (!carry.count(n.op()) || depth > 256) return false;
    std::vector<Tensor> in = DataInputs(n);
    if (in.empty()) return false;
    auto it = orig_.find(in[0].node);
    // Only a Switch gives the list on through its output 1 (into the loop body).
    return it != orig_.end() && (in[0].port == 0 || it->second->op() == "Switch") &&
           ListAccumulator(*it->second, depth + 1);
  }

  // SameAttrs returns "" when b has a's attrs, but at most the names in lost, plus at most
  // the names in extra.
  static std::string SameAttrs(const NodeDef& a, const NodeDef& b,
                               const std::set<std::string>& extra,
                               const std::set<std::string>& lost = {}) {
    for (const auto& kv : a.attr()) {
      auto it = b.attr().find(kv.first);
      if (it == b.attr().end() && lost.count(kv.first)) continue;
      if (it == b.attr().end()) return absl::StrCat("lost its attr ", kv.first);
      if (!tensorflow::AreAttrValuesEqual(kv.second, it->second)) {
        return absl::StrCat("changed its attr ", kv.first);
      }
    }
    for (const auto& kv : b.attr()) {
      if (!a.attr().count(kv.first) && !extra.count(kv.first)) {
        return absl::StrCat("gained the attr ", kv.first);
      }
    }
    return "";
  }

  // Original checks an original node's counterpart in out.
  std::string Original(const NodeDef& n) {
    auto it = by_name_.find(n.name());
    if (it == by_name_.end()) return absl::StrCat("node ", n.name(), " is missing");
    const NodeDef& m = *it->second;
    if (m.op() != n.op()) return absl::StrCat("node ", n.name(), " changed its op");
    // tfswap's LMS rewrite places a while loop's stack accumulator on the host (the stack,
    // the nodes carrying its handle, its push, pop and close ops), and a lowered loop's
    // TensorList accumulator (the list's loop plumbing, its pushes and pops), dropping their
    // colocation attr, whose group stays on the compute device.
    const bool stack = StackAccumulator(n, 0) || ListAccumulator(n, 0);
    if (m.device() != n.device() && !(offload_ && IsCPU(m.device())) &&
        !(stack && IsCPU(m.device()))) {
      return absl::StrCat("node ", n.name(), " changed its device");
    }
    std::string bad = SameAttrs(n, m, {}, stack ? std::set<std::string>{"_class"}
                                                : std::set<std::string>{});
    if (!bad.empty()) return absl::StrCat("node ", n.name(), " ", bad);
    std::vector<Tensor> want = DataInputs(n), got = DataInputs(m);
    if (want.size() != got.size()) {
      return absl::StrCat("node ", n.name(), " has ", got.size(), " data inputs, not ",
                          want.size());
    }
    for (size_t i = 0; i < want.size(); i++) {
      if (!Carries(got[i], want[i], 0)) {
        return absl::StrCat("data input ", i, " of node ", n.name(), " does not carry ",
                            want[i].node, ":", want[i].port);
      }
    }
    std::set<std::string> controls;
    for (const std::string& i : m.input()) {
      if (!i.empty() && i[0] == '^') controls.insert(i.substr(1));
    }
    for (const std::string& i : n.input()) {
      if (!i.empty() && i[0] == '^' && !controls.count(i.substr(1))) {
        return absl::StrCat("node ", n.name(), " lost its control input ", i);
      }
    }
    return "";
  }

  // Carries reports whether tensor got of out holds the value of tensor want of in.
  bool Carries(const Tensor& got, const Tensor& want, int depth) {
    if (depth > 256) return false;  // a cycle of tfswap nodes
    if (orig_.count(got.node)) return got == want;
    auto it = by_name_.find(got.node);
    if (it == by_name_.end()) return false;
    const NodeDef& n = *it->second;
    std::string role = Role(n);
    if (n.name().rfind(kScope, 0) != 0) return false;
    if (role == "swap_out" || role == "swap_in" || role == "gate" || role == "weight_in" ||
        role == "swap_relay" || role == "stack_out" || role == "stack_in") {
      std::vector<Tensor> in = DataInputs(n);
      return n.op() == "Identity" && got.port == 0 && in.size() == 1 &&
             Carries(in[0], want, depth + 1);
    }
    if (role == "recompute") {
      const NodeDef* of = nullptr;
      return CopyOf(n, &of, depth).empty() && of->name() == want.node && got.port == want.port;
    }
    return false;
  }

  // CopyOf checks that the recompute node n copies an original node (its name ends with
  // "/recompute/" and that node's name), with the same op, device and attrs and inputs that
  // carry the same tensors; *of is the original.
  std::string CopyOf(const NodeDef& n, const NodeDef** of, int depth = 0) {
    auto memo = copies_.find(n.name());
    if (memo != copies_.end()) {
      if (of) *of = memo->second.first;
      return memo->second.second;
    }
    std::string why = absl::StrCat("recompute node ", n.name(), " copies no original node");
    const NodeDef* found = nullptr;
    for (size_t at = n.name().find(kRecompute); at != std::string::npos && found == nullptr;
         at = n.name().find(kRecompute, at + 1)) {
      auto o = orig_.find(n.name().substr(at + strlen(kRecompute)));
      if (o == orig_.end()) continue;
      const NodeDef& src = *o->second;
      std::string bad;
      if (n.op() != src.op() || n.device() != src.device()) {
        bad = "a different op or device";
      } else {
        bad = SameAttrs(src, n, {kRoleAttr, kIDAttr, kDoNotRemoveAttr});
      }
      std::vector<Tensor> want = DataInputs(src), got = DataInputs(n);
      if (bad.empty() && want.size() != got.size()) bad = "a different number of inputs";
      for (size_t i = 0; bad.empty() && i < want.size(); i++) {
        if (!Carries(got[i], want[i], depth + 1)) bad = absl::StrCat("input ", i, " differs");
      }
      if (bad.empty()) {
        found = &src;
      } else {
        why = absl::StrCat("recompute node ", n.name(), " is not a copy of ", src.name(), " (",
                           bad, ")");
      }
    }
    if (found) why.clear();
    copies_[n.name()] = {found, why};
    if (of) *of = found;
    return why;
  }

  const GraphDef& in_;
  const GraphDef& out_;
  const bool offload_;
  std::unordered_map<std::string, const NodeDef*> orig_, by_name_;
  std::unordered_map<std::string, std::pair<const NodeDef*, std::string>> copies_;
};

Result Unchanged(Result r, const std::string& reason) {
  r.rewritten = false;
  r.graph.clear();
  r.reason = reason;
  return r;
}

void Warn(Result* r, const std::string& kind, const std::string& text) {
  r->warnings.push_back({kind, text});
}

// KeepInputShapes gives every node of out that is also a node of in (by name) the
// _output_shapes attr it has in in, or none when it has none there, and reports whether it
// changed anything. tfswap infers shapes on load (and --batch fills an unknown batch), and
// writes what it inferred into the nodes it returns; the graph TensorFlow runs must keep its
// own attrs, and the attr is only a hint, so the bridge puts the input's back rather than
// refusing the rewrite. tfswap's nodes keep theirs.
// SerializeDeterministic writes g to *out with map fields (attrs) in key order, so that the
// same graph always gives the same bytes.
bool SerializeDeterministic(const GraphDef& g, std::string* out) {
  out->clear();
  {
    google::protobuf::io::StringOutputStream stream(out);
    google::protobuf::io::CodedOutputStream coded(&stream);
    coded.SetSerializationDeterministic(true);
    if (!g.SerializeToCodedStream(&coded)) return false;
  }
  return true;
}

bool KeepInputShapes(const GraphDef& in, GraphDef* out) {
  std::unordered_map<std::string, const NodeDef*> by_name;
  for (const NodeDef& n : in.node()) by_name[n.name()] = &n;
  bool changed = false;
  for (NodeDef& n : *out->mutable_node()) {
    auto it = by_name.find(n.name());
    if (it == by_name.end()) continue;
    auto want = it->second->attr().find(kShapesAttr);
    auto got = n.attr().find(kShapesAttr);
    if (want == it->second->attr().end()) {
      if (got != n.attr().end()) {
        n.mutable_attr()->erase(kShapesAttr);
        changed = true;
      }
    } else if (got == n.attr().end() ||
               !tensorflow::AreAttrValuesEqual(got->second, want->second)) {
      (*n.mutable_attr())[kShapesAttr] = want->second;
      changed = true;
    }
  }
  return changed;
}

}  // namespace

// Offloads reports whether flags ask tfswap to move variables to the host (--offload all or
// auto, or --offload-variables naming some).
bool Offloads(const std::vector<std::string>& flags) {
  bool on = false, named = false;
  for (size_t i = 0; i < flags.size(); i++) {
    const std::string& f = flags[i];
    if (f.rfind("--offload-variables=", 0) == 0) {
      named = named || f.size() > strlen("--offload-variables=");
    } else if (f == "--offload-variables" && i + 1 < flags.size()) {
      named = named || !flags[i + 1].empty();
    } else if (f.rfind("--offload=", 0) == 0) {
      on = f != "--offload=none" && f != "--offload=";
    } else if (f == "--offload" && i + 1 < flags.size()) {
      on = flags[i + 1] != "none" && !flags[i + 1].empty();
    }
  }
  return on || named;
}

bool SetParameter(Config* cfg, const std::string& key, const std::vector<std::string>& values,
                  bool scalar, std::string* error) {
  const std::string s = values.size() == 1 ? values[0] : "";
  const bool one = scalar && values.size() == 1;
  if (key == "tfswap_binary") {
    if (!one || s.empty()) {
      *error = "parameter tfswap_binary must be a non-empty string";
      return false;
    }
    cfg->binary = s;
  } else if (key == "timeout_seconds") {
    char* end = nullptr;
    double t = 0;
    if (one) t = strtod(s.c_str(), &end);
    if (!one || end == s.c_str() || *end != '\0' || !std::isfinite(t) || !(t > 0)) {
      *error = absl::StrCat(
          "parameter timeout_seconds must be a finite, positive number of seconds, not '", s,
          "'");
      return false;
    }
    cfg->timeout_seconds = t;
  } else if (key == "verbose") {
    bool b;
    if (one && s == "2") {
      cfg->verbose = 2;
    } else if (one && ParseBool(s, &b)) {
      cfg->verbose = b ? 1 : 0;
    } else {
      *error = absl::StrCat("parameter verbose must be 0, 1, 2, true or false, not '", s, "'");
      return false;
    }
  } else if (key == "infer_shapes") {
    if (!one || !ParseBool(s, &cfg->infer_shapes)) {
      *error = "parameter infer_shapes must be true or false";
      return false;
    }
  } else if (key == "gate_kind") {
    // Checked here, not left to tfswap's usage error: the graphs would run unchanged with a
    // warning about tfswap's flags rather than about the setting.
    if (!one || (s != "identity" && s != "reduce")) {
      *error = absl::StrCat(
          "parameter gate_kind must be identity (Identity gates) or reduce (L2Loss gates), "
          "not '", s, "'");
      return false;
    }
    cfg->flags.push_back("--gate-kind=" + s);
  } else {
    if (!ValidKey(key)) {
      *error = absl::StrCat("parameter name '", key,
                            "' is not a flag name (letters, digits, _ and -)");
      return false;
    }
    std::string flag = key;
    std::replace(flag.begin(), flag.end(), '_', '-');
    if (ReservedFlag(flag)) {
      *error = absl::StrCat("parameter '", key, "' is set by the bridge and cannot be given");
      return false;
    }
    for (const auto& val : values) cfg->flags.push_back(absl::StrCat("--", flag, "=", val));
  }
  return true;
}

void FinishConfig(Config* cfg) {
  if (cfg->binary.empty()) {
    const char* env = getenv("TFSWAP_BINARY");
    cfg->binary = (env != nullptr && *env != '\0') ? env : "tfswap";
  }
  if (cfg->verbose >= 2) cfg->flags.push_back("--verbose");
  // --offload auto chooses per graph; every graph of a session must place each variable
  // alike (FinishConfig's comment in swap_core.h), so all is passed instead.
  bool autos = false;
  for (size_t i = 0; i < cfg->flags.size(); i++) {
    std::string& f = cfg->flags[i];
    if (f == "--offload=auto") {
      f = "--offload=all";
      autos = true;
    } else if (f == "--offload" && i + 1 < cfg->flags.size() && cfg->flags[i + 1] == "auto") {
      cfg->flags[i + 1] = "all";
      autos = true;
    }
  }
  if (autos) {
    cfg->warnings.push_back(
        {"offload-auto",
         "offload=auto is not safe through the bridge: it chooses the variables to move from "
         "each graph, and every graph of a session (the initialiser's, the training step's) "
         "must place each variable alike, or a run fails with \"Could not find variable\"; "
         "the initialiser's graph, which fixes where each variable lives, runs first and "
         "holds no training step to choose from. offload=all is used instead (every variable "
         "on the host in every graph); to move only some, plan the training graph offline "
         "with tfswap rewrite --offload auto and give the variables it moved as the "
         "parameter offload_variables"});
  }
}

bool FirstTime(const std::string& kind) {
  static std::mutex mu;
  static std::set<std::string>* seen = new std::set<std::string>;
  std::lock_guard<std::mutex> lock(mu);
  return seen->insert(kind).second;
}

bool IsRewritten(const GraphDef& g) {
  for (const NodeDef& n : g.node()) {
    if (n.attr().count(kRoleAttr)) return true;
  }
  return false;
}

std::string CheckRewrite(const GraphDef& in, const GraphDef& out,
                         const std::vector<std::string>& keep, bool offload,
                         const std::vector<std::string>& strict) {
  Checker c(in, out, offload);
  std::string bad = c.Run(keep);
  if (bad.empty()) bad = c.Strict(strict);
  return bad;
}

Result RunSwap(const std::string& graph, const std::vector<std::string>& fetch,
               const std::vector<std::string>& preserve, const Config& cfg,
               const std::string& what, double deadline_seconds) {
  Result r;
  GraphDef in;
  if (!in.ParseFromString(graph)) {
    Warn(&r, "input", absl::StrCat(what, " runs unchanged: it is not a GraphDef"));
    return Unchanged(r, "bad input");
  }
  if (IsRewritten(in)) return Unchanged(r, "already rewritten");
  std::vector<std::string> argv = {cfg.binary, "rewrite", "-", "-o", "-"};
  argv.insert(argv.end(), cfg.flags.begin(), cfg.flags.end());
  // What a usage refusal remembers: the flags of the configuration, not those of one call.
  const std::string cmdline = Joined(argv);
  argv.insert(argv.end(), cfg.call_flags.begin(), cfg.call_flags.end());
  // The preserved nodes of this graph, once each, in a stable order.
  std::set<std::string> preserved;
  {
    std::unordered_set<std::string> names;
    for (const NodeDef& n : in.node()) names.insert(n.name());
    for (const std::string& p : preserve) {
      std::string name = ParseInput(p).node;
      if (!p.empty() && names.count(name)) preserved.insert(name);
    }
  }
  for (const std::string& p : preserved) argv.push_back(absl::StrCat("--preserve=", p));
  {
    std::lock_guard<std::mutex> lock(state_mu);
    if (timed_out_before) {
      Warn(&r, "timeout",
           absl::StrCat(what, " runs unchanged: tfswap timed out before in this process and "
                              "is not run again"));
      return Unchanged(r, "timed out before");
    }
    if (rejected->count(cmdline)) {
      Warn(&r, "usage",
           absl::StrCat(what, " runs unchanged: tfswap rejected these parameters before (",
                        Joined(cfg.flags), ")"));
      return Unchanged(r, "parameters rejected");
    }
  }
  double timeout = cfg.timeout_seconds;
  if (deadline_seconds > 0) timeout = std::min(timeout, deadline_seconds);
  if (!(timeout > 0) || !std::isfinite(timeout)) {
    Warn(&r, "deadline",
         absl::StrCat(what, " runs unchanged: the deadline passed before tfswap could run"));
    return Unchanged(r, "deadline");
  }
  uint64_t out_cap = cfg.max_output_bytes;
  if (out_cap == 0) out_cap = std::min<uint64_t>(2 * graph.size() + (64 << 20), kMaxGraphBytes);
  const double started = NowSeconds();
  ChildResult c = RunChild(argv, graph, timeout, out_cap, cfg.max_stderr_bytes);
  r.seconds = NowSeconds() - started;
  r.summary = c.err;
  if (!c.started) {
    Warn(&r, "spawn",
         absl::StrCat("graphs run unchanged: cannot run the tfswap binary '", cfg.binary,
                      "': ", c.start_error,
                      " (set the parameter tfswap_binary or the environment variable "
                      "TFSWAP_BINARY, or put tfswap on PATH)"));
    return Unchanged(r, "no binary");
  }
  for (const std::string& w : TfswapWarnings(c.err)) {
    Warn(&r, absl::StrCat("tfswap-warning: ", w), absl::StrCat("tfswap warns: ", w));
  }
  if (c.timed_out) {
    {
      std::lock_guard<std::mutex> lock(state_mu);
      timed_out_before = true;
    }
    Warn(&r, "timeout",
         absl::StrCat(what, " runs unchanged: tfswap did not finish within ",
                      FormatSeconds(timeout),
                      " s (", cfg.timeout_setting,
                      ") and its process group was killed; tfswap "
                      "is not run again in this process"));
    return Unchanged(r, "timeout");
  }
  if (c.out_overflow || c.err_overflow) {
    Warn(&r, "output-limit",
         absl::StrCat(what, " runs unchanged: tfswap wrote more than ",
                      c.out_overflow ? out_cap : cfg.max_stderr_bytes, " bytes to its ",
                      c.out_overflow ? "standard output (twice the graph plus 64 MiB)"
                                     : "standard error",
                      " and was killed"));
    return Unchanged(r, "output limit");
  }
  if (!c.exited) {
    Warn(&r, "killed",
         absl::StrCat(what, " runs unchanged: tfswap ",
                      c.signal ? absl::StrCat("was killed by signal ", c.signal)
                               : c.start_error));
    return Unchanged(r, "child failed");
  }
  if (c.exit_status != 0) {
    std::string msg = OneLine(c.err);
    if (msg.find("already rewritten") != std::string::npos) {
      return Unchanged(r, "already rewritten");
    }
    if (c.exit_status == kUsageExit) {
      {
        std::lock_guard<std::mutex> lock(state_mu);
        rejected->insert(cmdline);
      }
      Warn(&r, "usage",
           absl::StrCat("graphs run unchanged: tfswap rejected the parameters (",
                        Joined(cfg.flags),
                        ") with a usage error (exit status 2) and is not run with them again "
                        "in this process: ",
                        msg));
    }
    if (c.exit_status == kBadInputExit) {
      Warn(&r, "bad-input",
           absl::StrCat(what, " runs unchanged: tfswap refused it as bad input (exit status 1): ",
                        msg));
    } else if (c.exit_status == kInternalExit) {
      Warn(&r, "internal",
           absl::StrCat(what, " runs unchanged: tfswap hit an internal error (exit status 3, a "
                              "bug in tfswap; other graphs are still rewritten): ",
                        msg));
    } else if (c.exit_status != kUsageExit) {
      Warn(&r, "failed",
           absl::StrCat(what, " runs unchanged: tfswap failed (exit status ", c.exit_status,
                        "): ", msg));
    }
    return Unchanged(r, "tfswap failed");
  }
  GraphDef out;
  if (!out.ParseFromString(c.out)) {
    Warn(&r, "output",
         absl::StrCat(what, " runs unchanged: tfswap's output is not a binary GraphDef"));
    return Unchanged(r, "bad output");
  }
  const bool shapes_restored = KeepInputShapes(in, &out);
  std::vector<std::string> keep = fetch;
  keep.insert(keep.end(), preserve.begin(), preserve.end());
  const bool offload = Offloads(cfg.flags);
  std::string bad = CheckRewrite(in, out, keep, offload,
                                 std::vector<std::string>(preserved.begin(), preserved.end()));
  if (!bad.empty()) {
    Warn(&r, "not-rewrite",
         absl::StrCat(what, " runs unchanged: tfswap's output is not a rewrite of its input (",
                      bad, ")"));
    return Unchanged(r, "not a rewrite");
  }
  r.added_nodes = out.node_size() - in.node_size();
  // An offload may add nothing and only move nodes: --offload places variables and their
  // updates on the host, in every graph a session runs (the initialiser's too), so that each
  // run finds the variables' resources on the device that holds them.
  if (r.added_nodes == 0 && !(offload && DevicesMoved(in, out))) {
    return Unchanged(r, "nothing to swap");
  }
  if (shapes_restored) {
    if (!SerializeDeterministic(out, &r.graph)) {
      Warn(&r, "output", absl::StrCat(what, " runs unchanged: cannot serialize the rewrite"));
      return Unchanged(r, "bad output");
    }
  } else {
    r.graph = std::move(c.out);
  }
  r.rewritten = true;
  return r;
}

}  // namespace tfswap_core

extern "C" int tfswap_check_rewrite(const char* in, size_t in_len, const char* out,
                                    size_t out_len, const char* keep, int offload, char* why,
                                    size_t why_len) {
  tensorflow::GraphDef a, b;
  std::string msg;
  int rc;
  if (!a.ParseFromArray(in, static_cast<int>(in_len)) ||
      !b.ParseFromArray(out, static_cast<int>(out_len))) {
    msg = "not a GraphDef";
    rc = -1;
  } else {
    std::vector<std::string> k;
    if (keep != nullptr) {
      std::string s = keep;
      size_t start = 0;
      while (start <= s.size()) {
        size_t end = s.find('\n', start);
        if (end == std::string::npos) end = s.size();
        k.push_back(s.substr(start, end - start));
        start = end + 1;
      }
    }
    msg = tfswap_core::CheckRewrite(a, b, k, offload != 0);
    rc = msg.empty() ? 1 : 0;
  }
  if (why != nullptr && why_len > 0) {
    size_t n = std::min(msg.size(), why_len - 1);
    memcpy(why, msg.data(), n);
    why[n] = '\0';
  }
  return rc;
}
