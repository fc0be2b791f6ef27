// tfswap_plugin: tfswap as a TensorFlow 2 PluggableDevice graph optimizer.
//
// The library exports TF_InitGraph (tensorflow/c/experimental/grappler/grappler.h), which
// TensorFlow calls when the library is loaded with
// tensorflow.python.framework.load_library.load_pluggable_device_library(path) or found in
// site-packages/tensorflow-plugins/. From then on Grappler hands every graph it optimizes
// for the registered device type to OptimizeFunc: the graphs of tf.function and of Keras'
// train functions (function bodies: _Arg/_Retval nodes, resource variables as arguments, no
// _output_shapes) as well as tf.compat.v1 session graphs.
//
// Like the v1 bridge (tfswap_optimizer.cc) the plugin does not embed tfswap's Go engine: it
// runs the tfswap binary as a child process ("tfswap rewrite IN -o OUT FLAGS..."), and checks
// that what comes back is a rewrite of what went in. Whatever goes wrong, the graph runs
// unchanged and the process logs one warning per kind of problem. The plugin never fails
// Grappler.
//
// Configuration. The device type is read once, when TensorFlow loads the library:
//   TFSWAP_DEVICE_TYPE   GPU (default) or CPU (the two-device CPU emulation, for tests)
// Everything else is read from the environment each time a graph is optimized, so that
// tfswap.enable()/disable() take effect without restarting Python:
//   TFSWAP_ENABLED         0 turns the plugin off (default 1)
//   TFSWAP_BINARY          the tfswap binary (default: "tfswap" on PATH)
//   TFSWAP_BUDGET          --budget;   TFSWAP_STRATEGY  --strategy;   TFSWAP_DEVICE  --device
//   TFSWAP_RECOMPUTE       --recompute; TFSWAP_MIN_BYTES --min-bytes
//   TFSWAP_COMPUTE_DEVICE  --compute-device: one device or a comma list (e.g. /device:CPU:1 in
//                          the CPU emulation); unset on a CPU registration: every CPU but CPU:0
//   TFSWAP_FLAGS           more tfswap rewrite flags, separated by spaces
//   TFSWAP_TIMEOUT         seconds one rewrite may take (default 60)
//   TFSWAP_LOG             0: warnings only; 1 (default): one line per plan; 2: also tfswap's
//                          whole summary
//   TFSWAP_PLAN_LOG        a file to which one JSON line per plan is appended (what
//                          tfswap.plan_summary() reads)
//   TFSWAP_BATCH_SIZE      the batch size to assume where the leading dimension is unknown
//                          (Keras traces its train function for any batch size)
//   TFSWAP_DUMP_DIR        a directory to which every graph handed to tfswap is written, as
//                          ID.pb (for running tfswap on it by hand)
//   TFSWAP_ALL_GRAPHS      1: also rewrite graphs that hold no training step
//
// When. Grappler's meta-optimizer runs its passes in two iterations by default and calls the
// plugin in each, last in the list. The plugin acts in the last one only (it counts the calls
// per graph id), so that no default pass runs after it and rewrites around its swap nodes; and
// only on graphs that update variables (a training step). Shapes come from Grappler's static
// shape inference (TF_NewGraphProperties/TF_InferStatically) and are written into the
// _output_shapes attrs tfswap sizes tensors from; the item's fetch nodes are passed as --fetch.

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cctype>
#include <cstdint>
#include <fstream>
#include <map>
#include <mutex>
#include <set>
#include <sstream>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "tensorflow/c/experimental/grappler/grappler.h"
#include "tensorflow/c/tf_status.h"
#include "tensorflow/core/framework/attr_value.pb.h"
#include "tensorflow/core/framework/graph.pb.h"
#include "tensorflow/core/framework/node_def.pb.h"
#include "tensorflow/core/grappler/costs/op_performance_data.pb.h"
#include "tensorflow/core/grappler/grappler_item.h"

extern char** environ;

namespace tfswap_plugin {
namespace {

using tensorflow::AttrValue;
using tensorflow::GraphDef;
using tensorflow::NodeDef;

constexpr char kName[] = "tfswap";
constexpr char kScope[] = "tfswap/";
constexpr char kRoleAttr[] = "_tfswap_role";
constexpr char kShapesAttr[] = "_output_shapes";
// The meta-optimizer's default number of iterations (RewriterConfig.meta_optimizer_iterations
// DEFAULT means TWO); TFSWAP_ITERATIONS overrides it for programs that set another number.
constexpr int kDefaultIterations = 2;

std::string Env(const char* name, const char* def = "") {
  const char* v = getenv(name);
  return v ? v : def;
}

// Warn logs msg to stderr the first time this process meets a problem of this kind: Grappler
// calls the plugin for every function and iteration, and one broken binary would otherwise
// repeat its warning for each.
void Warn(const std::string& kind, const std::string& msg) {
  static std::mutex mu;
  static std::set<std::string>* seen = new std::set<std::string>;
  {
    std::lock_guard<std::mutex> lock(mu);
    if (!seen->insert(kind).second) return;
  }
  fprintf(stderr, "tfswap: warning: %s\n", msg.c_str());
  fflush(stderr);
}

void Info(const std::string& msg) {
  fprintf(stderr, "tfswap: %s\n", msg.c_str());
  fflush(stderr);
}

double Now() {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

std::string NodeName(const std::string& t) {
  size_t start = (!t.empty() && t[0] == '^') ? 1 : 0;
  size_t colon = t.find(':', start);
  return t.substr(start, colon == std::string::npos ? std::string::npos : colon - start);
}

bool ReadFile(const std::string& path, std::string* out) {
  std::ifstream f(path, std::ios::binary);
  if (!f) return false;
  std::stringstream ss;
  ss << f.rdbuf();
  *out = ss.str();
  return true;
}

bool WriteFile(const std::string& path, const std::string& data) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f << data;
  return static_cast<bool>(f);
}

// TempDir is a private directory for one rewrite's files, removed with them.
class TempDir {
 public:
  TempDir() {
    std::string tmpl = Env("TMPDIR", "/tmp") + "/tfswap-plugin-XXXXXX";
    std::vector<char> buf(tmpl.begin(), tmpl.end());
    buf.push_back('\0');
    if (mkdtemp(buf.data())) path_ = buf.data();
  }
  ~TempDir() {
    if (path_.empty()) return;
    for (const char* f : {"in.pb", "out.pb", "out.pb.tmp", "err.txt", "report.json"}) {
      unlink((path_ + "/" + f).c_str());
    }
    rmdir(path_.c_str());
  }
  bool ok() const { return !path_.empty(); }
  std::string File(const char* name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

// Child is how one run of tfswap ended.
struct Child {
  std::string start_error;  // non-empty: it could not be started
  bool timed_out = false;
  bool exited = false;
  int status = 0;  // exit status when exited, else the signal that killed it
};

// RunChild runs argv (argv[0] looked up on PATH when it has no '/') with stdin from /dev/null
// and stdout and stderr into err_path (tfswap's summary), killing it after timeout seconds. posix_spawn is safe in
// TensorFlow's multi-threaded processes; the child starts with default signal dispositions.
Child RunChild(const std::vector<std::string>& argv, const std::string& err_path,
               double timeout) {
  Child c;
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&actions, 1, err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC,
                                   0600);
  posix_spawn_file_actions_adddup2(&actions, 1, 2);
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  sigset_t none, all;
  sigemptyset(&none);
  sigfillset(&all);
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
    c.start_error = strerror(rc);
    return c;
  }
  const double deadline = Now() + timeout;
  int status = 0;
  for (;;) {
    pid_t w = waitpid(pid, &status, WNOHANG);
    if (w == pid) break;
    if (w < 0 && errno == EINTR) continue;
    if (w < 0) {
      c.start_error = std::string("waitpid: ") + strerror(errno);
      return c;
    }
    if (Now() >= deadline) {
      c.timed_out = true;
      kill(pid, SIGKILL);
      while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
      }
      return c;
    }
    struct timespec nap = {0, 2 * 1000 * 1000};
    nanosleep(&nap, nullptr);
  }
  if (WIFEXITED(status)) {
    c.exited = true;
    c.status = WEXITSTATUS(status);
  } else if (WIFSIGNALED(status)) {
    c.status = WTERMSIG(status);
  }
  return c;
}

// OneLine joins the lines of tfswap's stderr with " / ".
std::string OneLine(const std::string& s) {
  std::string out, line;
  auto flush = [&] {
    while (!line.empty() && line.back() == ' ') line.pop_back();
    size_t b = line.find_first_not_of(' ');
    if (b != std::string::npos && line.find("--help") == std::string::npos) {
      out += (out.empty() ? "" : " / ") + line.substr(b);
    }
    line.clear();
  };
  for (char ch : s) {
    if (ch == '\n') {
      flush();
    } else {
      line.push_back(ch);
    }
  }
  flush();
  return out.empty() ? "(no message)" : out;
}

// SummaryField returns the text after "key:" on the line of tfswap's summary that starts
// with it ("tensors swapped: 43 (45 swap-ins)" -> "43 (45 swap-ins)"), or "". With all, the
// texts of every such line, joined by ", " (tfswap prints one "predicted peak:" line per
// compute device: the replicas of a MirroredStrategy step).
std::string SummaryField(const std::string& summary, const std::string& key, bool all = false) {
  std::istringstream in(summary);
  std::string line, out;
  while (std::getline(in, line)) {
    size_t b = line.find_first_not_of(' ');
    if (b == std::string::npos || line.compare(b, key.size() + 1, key + ":") != 0) continue;
    std::string v = line.substr(b + key.size() + 1);
    v.erase(0, v.find_first_not_of(' '));
    if (!all) return v;
    out += (out.empty() ? "" : ", ") + v;
  }
  return out;
}

std::string JsonString(const std::string& s) {
  std::string out = "\"";
  for (unsigned char ch : s) {
    switch (ch) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\t': out += "\\t"; break;
      default:
        if (ch < 0x20) {
          char buf[8];
          snprintf(buf, sizeof buf, "\\u%04x", ch);
          out += buf;
        } else {
          out.push_back(ch);
        }
    }
  }
  return out + "\"";
}

// AppendLine appends one line to the plan log with a single write(2) on an O_APPEND file,
// so that lines from concurrent optimizations (and processes) never interleave.
void AppendLine(const std::string& path, const std::string& line) {
  int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd < 0) {
    Warn("plan-log", "cannot append to TFSWAP_PLAN_LOG " + path + ": " + strerror(errno));
    return;
  }
  std::string data = line + "\n";
  ssize_t w = write(fd, data.data(), data.size());
  (void)w;
  close(fd);
}

bool IsRewritten(const GraphDef& g) {
  for (const NodeDef& n : g.node()) {
    if (n.name().rfind(kScope, 0) == 0 || n.attr().count(kRoleAttr)) return true;
  }
  return false;
}

// IsTrainingStep reports whether the graph is a training step: it updates a variable (an
// optimizer's apply op or a resource variable assignment, as Keras 3's optimizers do) and
// computes gradients (a gradient op, or a node of a gradient scope), which tells it from
// variable initializers and metric updates.
bool IsTrainingStep(const GraphDef& g) {
  bool update = false, gradient = false;
  for (const NodeDef& n : g.node()) {
    const std::string& op = n.op();
    if (op.rfind("ResourceApply", 0) == 0 || op.rfind("Apply", 0) == 0 ||
        op.rfind("ResourceSparseApply", 0) == 0 || op == "AssignSubVariableOp" ||
        op == "AssignVariableOp" || op == "AssignAddVariableOp") {
      update = true;
    }
    if (op.find("Grad") != std::string::npos || op.find("Backprop") != std::string::npos ||
        n.name().find("gradient") != std::string::npos) {
      gradient = true;
    }
    if (update && gradient) return true;
  }
  return false;
}

// CheckRewrite returns why out is not a tfswap rewrite of in, or "": every node of the input
// (fetch and preserved nodes among them) is still there with its op, and every added node is
// a tfswap swap node.
std::string CheckRewrite(const GraphDef& in, const GraphDef& out,
                         const std::vector<std::string>& must_keep) {
  std::unordered_map<std::string, const NodeDef*> by_name;
  for (const NodeDef& n : out.node()) by_name[n.name()] = &n;
  std::unordered_set<std::string> original;
  for (const NodeDef& n : in.node()) {
    original.insert(n.name());
    auto it = by_name.find(n.name());
    if (it == by_name.end()) return "node " + n.name() + " is missing";
    if (it->second->op() != n.op()) return "node " + n.name() + " changed its op";
  }
  for (const std::string& k : must_keep) {
    if (!by_name.count(NodeName(k))) return "node " + k + " is missing";
  }
  for (const NodeDef& n : out.node()) {
    if (original.count(n.name())) continue;
    if (n.name().rfind(kScope, 0) != 0 || !n.attr().count(kRoleAttr)) {
      return "added node " + n.name() + " is not a tfswap swap node";
    }
    for (const std::string& i : n.input()) {
      if (!by_name.count(NodeName(i))) return "node " + n.name() + " reads missing " + i;
    }
  }
  return "";
}

// StringList reads one of the C API's string lists (fetch nodes, nodes to preserve).
std::vector<std::string> StringList(
    const TF_GrapplerItem* item, void (*size_fn)(const TF_GrapplerItem*, int*, size_t*, TF_Status*),
    void (*list_fn)(const TF_GrapplerItem*, char**, size_t*, int, void*, size_t, TF_Status*)) {
  std::vector<std::string> out;
  TF_Status* s = TF_NewStatus();
  int n = 0;
  size_t storage = 0;
  size_fn(item, &n, &storage, s);
  if (TF_GetCode(s) == TF_OK && n > 0) {
    std::vector<char*> values(n);
    std::vector<size_t> lengths(n);
    std::vector<char> buf(storage + 1);
    list_fn(item, values.data(), lengths.data(), n, buf.data(), storage, s);
    if (TF_GetCode(s) == TF_OK) {
      for (int i = 0; i < n; i++) out.emplace_back(values[i], lengths[i]);
    }
  }
  TF_DeleteStatus(s);
  return out;
}

// Annotate gives every node of g without _output_shapes the output shapes Grappler's static
// shape inference finds for it, and records which nodes it annotated.
// A positive batch replaces an unknown leading dimension: Keras traces its train function
// for batches of any size (None), and tfswap can size only tensors of known shape.
bool Annotate(const TF_GrapplerItem* item, GraphDef* g, int64_t batch,
              std::unordered_set<std::string>* added, std::string* why) {
  TF_GraphProperties* props = TF_NewGraphProperties(item);
  TF_Status* s = TF_NewStatus();
  TF_InferStatically(props, /*assume_valid_feeds=*/true, /*aggressive_shape_inference=*/false,
                     /*include_input_tensor_values=*/false,
                     /*include_output_tensor_values=*/false, s);
  bool ok = TF_GetCode(s) == TF_OK;
  if (!ok) *why = TF_Message(s);
  for (NodeDef& n : *g->mutable_node()) {
    if (!ok) break;
    if (n.attr().count(kShapesAttr)) continue;
    int num = 0;
    TF_GetOutputPropertiesListSize(props, n.name().c_str(), &num, s);
    if (TF_GetCode(s) != TF_OK || num <= 0) continue;
    std::vector<TF_Buffer*> bufs(num);
    for (auto& b : bufs) b = TF_NewBuffer();
    TF_GetOutputPropertiesList(props, n.name().c_str(), bufs.data(), num, s);
    if (TF_GetCode(s) == TF_OK) {
      AttrValue shapes;
      auto* list = shapes.mutable_list();
      bool good = true;
      for (TF_Buffer* b : bufs) {
        tensorflow::OpInfo::TensorProperties p;
        if (!p.ParseFromArray(b->data, static_cast<int>(b->length))) {
          good = false;
          break;
        }
        tensorflow::TensorShapeProto* shape = list->add_shape();
        *shape = p.shape();
        if (batch > 0 && !shape->unknown_rank() && shape->dim_size() > 0 &&
            shape->dim(0).size() < 0) {
          shape->mutable_dim(0)->set_size(batch);
        }
      }
      if (good) {
        (*n.mutable_attr())[kShapesAttr] = std::move(shapes);
        added->insert(n.name());
      }
    }
    for (TF_Buffer* b : bufs) TF_DeleteBuffer(b);
  }
  TF_DeleteStatus(s);
  TF_DeleteGraphProperties(props);
  return ok;
}

// ComputeDevices returns the --compute-device value for graph (empty for tfswap's default,
// every GPU). TFSWAP_COMPUTE_DEVICE names one device or several, comma separated (the
// replicas of a MirroredStrategy step); a function graph is placed with full device names
// (/job:localhost/replica:0/task:0/device:CPU:1), and tfswap compares names whole, so each
// short name becomes the full name of the first of the graph's devices it ends with. Without
// it, a plugin registered for CPU (the CPU emulation) plans every CPU of the graph but CPU:0
// of its task, the host: the emulated GPUs, one per replica; sorted, so the flag is the same
// for the same graph.
std::string ComputeDevices(const GraphDef& graph) {
  std::vector<std::string> out;
  const std::string spec = Env("TFSWAP_COMPUTE_DEVICE");
  if (!spec.empty()) {
    std::istringstream in(spec);
    std::string c;
    while (std::getline(in, c, ',')) {
      const size_t b = c.find_first_not_of(" \t");
      if (b == std::string::npos) continue;
      c = c.substr(b, c.find_last_not_of(" \t") - b + 1);
      std::string full = c;
      for (const NodeDef& n : graph.node()) {
        const std::string& d = n.device();
        if (d.size() > c.size() && d.compare(d.size() - c.size(), c.size(), c) == 0 &&
            d[d.size() - c.size() - 1] != ':') {
          full = d;
          break;
        }
      }
      out.push_back(full);
    }
  } else if (Env("TFSWAP_DEVICE_TYPE", "GPU") == "CPU") {
    std::set<std::string> cpus;
    for (const NodeDef& n : graph.node()) {
      const std::string& d = n.device();
      const size_t slash = d.rfind('/');
      std::string last = slash == std::string::npos ? d : d.substr(slash + 1);
      if (last.compare(0, 7, "device:") == 0) last = last.substr(7);
      const size_t colon = last.find(':');
      if (colon == std::string::npos) continue;
      std::string type = last.substr(0, colon);
      for (char& ch : type) ch = toupper(static_cast<unsigned char>(ch));
      const std::string index = last.substr(colon + 1);
      if (type == "CPU" && !index.empty() && index != "0" &&
          index.find_first_not_of("0123456789") == std::string::npos) {
        cpus.insert(d);
      }
    }
    out.assign(cpus.begin(), cpus.end());
  }
  std::string flag;
  for (const std::string& d : out) flag += (flag.empty() ? "" : ",") + d;
  return flag;
}

// CallCount returns how many times a graph with this id has been handed to the plugin,
// this call included.
int CallCount(const std::string& id) {
  static std::mutex mu;
  static std::map<std::string, int>* calls = new std::map<std::string, int>;
  std::lock_guard<std::mutex> lock(mu);
  return ++(*calls)[id];
}

void Unchanged(TF_Status* status, const std::string& why) {
  // Grappler's convention for "did nothing": the meta-optimizer keeps its own graph and
  // says nothing.
  TF_SetStatus(status, TF_ABORTED, ("tfswap: " + why).c_str());
}

void FreeData(void* data, size_t) { free(data); }

std::string Fmt(double v) {
  char buf[32];
  snprintf(buf, sizeof buf, "%.3f", v);
  return buf;
}

void OptimizeFunc(void*, const TF_Buffer* graph_buf, const TF_GrapplerItem* c_item,
                  TF_Buffer* out_buf, TF_Status* status) {
  const std::string enabled = Env("TFSWAP_ENABLED", "1");
  if (enabled == "0" || enabled == "false") return Unchanged(status, "disabled");
  // The C API's item is Grappler's own GrapplerItem (grappler.cc casts between them); its id
  // names the function or graph, for counting iterations and for the log.
  const auto* item = reinterpret_cast<const tensorflow::grappler::GrapplerItem*>(c_item);
  const std::string id = item->id;
  int iterations = atoi(Env("TFSWAP_ITERATIONS", "0").c_str());
  if (iterations <= 0) iterations = kDefaultIterations;
  const int call = CallCount(id);
  if (call % iterations != 0) return Unchanged(status, "not the last iteration");

  GraphDef graph;
  if (!graph.ParseFromArray(graph_buf->data, static_cast<int>(graph_buf->length))) {
    Warn("parse", "graph " + id + " left unchanged: cannot parse the GraphDef Grappler passed");
    return Unchanged(status, "unparsable input");
  }
  if (IsRewritten(graph)) return Unchanged(status, "already rewritten");
  const std::string all = Env("TFSWAP_ALL_GRAPHS", "0");
  if (all != "1" && !IsTrainingStep(graph)) return Unchanged(status, "no training step");

  const double started = Now();
  std::vector<std::string> fetch = StringList(c_item, TF_GetFetchNodesListSize,
                                              TF_GetFetchNodesList);
  std::vector<std::string> preserve = StringList(c_item, TF_GetNodesToPreserveListSize,
                                                 TF_GetNodesToPreserveList);
  GraphDef annotated = graph;
  std::unordered_set<std::string> added_shapes;
  std::string why;
  const int64_t batch = atoll(Env("TFSWAP_BATCH_SIZE", "0").c_str());
  if (!Annotate(c_item, &annotated, batch, &added_shapes, &why)) {
    Warn("shapes", "static shape inference failed on graph " + id + " (" + why +
                       "); tfswap sizes only the nodes that carry _output_shapes");
  }
  const double shaped = Now();

  TempDir dir;
  if (!dir.ok()) {
    Warn("tempdir", std::string("graphs run unchanged: cannot make a temporary directory: ") +
                        strerror(errno));
    return Unchanged(status, "no temp dir");
  }
  std::string serialized;
  if (!annotated.SerializeToString(&serialized) || !WriteFile(dir.File("in.pb"), serialized)) {
    Warn("write", "graph " + id + " left unchanged: cannot write it for tfswap");
    return Unchanged(status, "write failed");
  }
  const std::string dump = Env("TFSWAP_DUMP_DIR");
  if (!dump.empty()) WriteFile(dump + "/" + id + ".pb", serialized);
  const std::string binary = Env("TFSWAP_BINARY", "tfswap");
  std::vector<std::string> argv = {binary, "rewrite", dir.File("in.pb"), "-o",
                                   dir.File("out.pb"), "--report", dir.File("report.json")};
  struct Opt {
    const char* env;
    const char* flag;
  };
  for (const Opt& o : {Opt{"TFSWAP_BUDGET", "--budget"}, Opt{"TFSWAP_STRATEGY", "--strategy"},
                       Opt{"TFSWAP_DEVICE", "--device"}, Opt{"TFSWAP_RECOMPUTE", "--recompute"},
                       Opt{"TFSWAP_MIN_BYTES", "--min-bytes"}}) {
    std::string v = Env(o.env);
    if (!v.empty()) argv.push_back(std::string(o.flag) + "=" + v);
  }
  const std::string compute = ComputeDevices(graph);
  if (!compute.empty()) argv.push_back("--compute-device=" + compute);
  {
    std::istringstream extra(Env("TFSWAP_FLAGS"));
    std::string f;
    while (extra >> f) argv.push_back(f);
  }
  // Only the fetch nodes that are in the graph: tfswap refuses a --fetch it cannot find.
  std::unordered_set<std::string> names;
  for (const NodeDef& n : graph.node()) names.insert(n.name());
  std::set<std::string> fetch_nodes;
  for (const std::string& f : fetch) {
    if (names.count(NodeName(f))) fetch_nodes.insert(NodeName(f));
  }
  for (const std::string& f : fetch_nodes) argv.push_back("--fetch=" + f);

  double timeout = atof(Env("TFSWAP_TIMEOUT", "60").c_str());
  if (!(timeout > 0)) timeout = 60;
  Child c = RunChild(argv, dir.File("err.txt"), timeout);
  const double ran = Now();
  std::string err;
  ReadFile(dir.File("err.txt"), &err);
  if (!c.start_error.empty()) {
    Warn("spawn", "graphs run unchanged: cannot run the tfswap binary '" + binary + "': " +
                      c.start_error + " (set TFSWAP_BINARY or put tfswap on PATH)");
    return Unchanged(status, "no binary");
  }
  if (c.timed_out) {
    Warn("timeout", "graph " + id + " left unchanged: tfswap did not finish within " +
                        Fmt(timeout) + " s (TFSWAP_TIMEOUT) and was killed");
    return Unchanged(status, "timeout");
  }
  if (!c.exited) {
    Warn("signal", "graph " + id + " left unchanged: tfswap was killed by signal " +
                       std::to_string(c.status));
    return Unchanged(status, "killed");
  }
  if (c.status != 0) {
    Warn("exit" + std::to_string(c.status),
         "graph " + id + " left unchanged: tfswap failed (exit status " +
                     std::to_string(c.status) + "): " + OneLine(err));
    return Unchanged(status, "tfswap failed");
  }
  std::string out_bytes;
  GraphDef out;
  if (!ReadFile(dir.File("out.pb"), &out_bytes) || !out.ParseFromString(out_bytes)) {
    Warn("output", "graph " + id + " left unchanged: tfswap's output is not a binary GraphDef");
    return Unchanged(status, "bad output");
  }
  std::vector<std::string> keep(fetch);
  keep.insert(keep.end(), preserve.begin(), preserve.end());
  std::string bad = CheckRewrite(graph, out, keep);
  if (!bad.empty()) {
    Warn("not-rewrite", "graph " + id + " left unchanged: tfswap's output is not a rewrite of "
                        "its input (" + bad + ")");
    return Unchanged(status, "invalid rewrite");
  }
  const int added = out.node_size() - graph.node_size();
  const int log_level = atoi(Env("TFSWAP_LOG", "1").c_str());
  std::string swapped = SummaryField(err, "tensors swapped");
  std::string recomputed = SummaryField(err, "recomputed");
  std::string peak = SummaryField(err, "predicted peak", true);
  std::string step = SummaryField(err, "predicted step");
  if (added > 0) {
    // The shapes the plugin added stay out of the original nodes: the rewrite changes nothing
    // in them but the inputs tfswap rewired. The swap nodes keep theirs.
    for (NodeDef& n : *out.mutable_node()) {
      if (added_shapes.count(n.name())) n.mutable_attr()->erase(kShapesAttr);
    }
    *out.mutable_library() = graph.library();
    *out.mutable_versions() = graph.versions();
  }
  if (log_level >= 1) {
    std::string line = "graph " + id + ": ";
    if (added == 0) {
      line += "nothing to swap";
      std::string plan = SummaryField(err, "nothing needed");
      if (!plan.empty()) line += " (" + plan + ")";
    } else {
      line += "swapped " + (swapped.empty() ? "?" : swapped);
      if (!recomputed.empty()) line += ", recomputed " + recomputed;
      line += "; peak " + (peak.empty() ? "?" : peak);
      line += "; step " + (step.empty() ? "?" : step);
    }
    line += "; shapes " + Fmt(shaped - started) + " s, tfswap " + Fmt(ran - shaped) + " s";
    Info(line);
    if (log_level >= 2) Info(err);
  }
  const std::string plan_log = Env("TFSWAP_PLAN_LOG");
  if (!plan_log.empty()) {
    std::string report;
    ReadFile(dir.File("report.json"), &report);
    while (!report.empty() && (report.back() == '\n' || report.back() == ' ')) report.pop_back();
    if (report.empty() || report[0] != '{') report = "null";
    // One line: JSON strings hold no raw newlines, so these are whitespace between tokens.
    for (char& ch : report) {
      if (ch == '\n' || ch == '\r') ch = ' ';
    }
    AppendLine(plan_log,
               "{\"graph\": " + JsonString(id) + ", \"nodes\": " +
                   std::to_string(graph.node_size()) + ", \"swap_nodes\": " +
                   std::to_string(added) + ", \"swapped\": " + JsonString(swapped) +
                   ", \"recomputed\": " + JsonString(recomputed) + ", \"peak\": " +
                   JsonString(peak) + ", \"step\": " + JsonString(step) +
                   ", \"shape_seconds\": " + Fmt(shaped - started) +
                   ", \"tfswap_seconds\": " + Fmt(ran - shaped) + ", \"report\": " + report +
                   "}");
  }
  if (added == 0) return Unchanged(status, "nothing to swap");
  std::string result;
  if (!out.SerializeToString(&result)) {
    Warn("serialize", "graph " + id + " left unchanged: cannot serialize the rewrite");
    return Unchanged(status, "serialize");
  }
  void* data = malloc(result.size());
  if (data == nullptr) return Unchanged(status, "out of memory");
  memcpy(data, result.data(), result.size());
  out_buf->data = data;
  out_buf->length = result.size();
  out_buf->data_deallocator = FreeData;
  TF_SetStatus(status, TF_OK, "");
}

}  // namespace
}  // namespace tfswap_plugin

// TF_InitGraph registers the optimizer for the device type TFSWAP_DEVICE_TYPE names (GPU
// by default), leaving every default Grappler pass as the user's configuration has it.
extern "C" __attribute__((visibility("default"))) void TF_InitGraph(
    TP_OptimizerRegistrationParams* params, TF_Status* status) {
  static std::string device_type = [] {
    std::string t = tfswap_plugin::Env("TFSWAP_DEVICE_TYPE", "GPU");
    return t.empty() ? std::string("GPU") : t;
  }();
  params->struct_size = TP_OPTIMIZER_REGISTRATION_PARAMS_STRUCT_SIZE;
  params->major_version = GO_MAJOR;
  params->minor_version = GO_MINOR;
  params->patch_version = GO_PATCH;
  params->device_type = device_type.c_str();
  params->optimizer_configs->struct_size = TP_OPTIMIZER_CONFIGS_STRUCT_SIZE;
  params->optimizer->struct_size = TP_OPTIMIZER_STRUCT_SIZE;
  params->optimizer->create_func = nullptr;
  params->optimizer->optimize_func = tfswap_plugin::OptimizeFunc;
  params->optimizer->destroy_func = nullptr;
  TF_SetStatus(status, TF_OK, "");
}
