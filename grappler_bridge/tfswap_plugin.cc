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
// Like the v1 bridge (tfswap_optimizer.cc) the plugin does not embed tfswap's Go engine, and
// it shares the v1 bridge's core (swap_core.h): tfswap runs as a child process ("tfswap
// rewrite - -o -" with a finite timeout, its process group killed on timeout and not run
// again after one, its output capped), its exit status and its own warning lines become
// warnings, and what comes back is checked to be a rewrite of what went in (op, attrs,
// device and inputs of every node). Whatever goes wrong, the graph runs unchanged and the
// process logs one warning per kind of problem. The plugin never fails Grappler. Only the
// registration, the configuration and the shapes (Grappler's C API) are its own.
//
// Configuration. The device type is read once, when TensorFlow loads the library:
//   TFSWAP_DEVICE_TYPE   GPU (default) or CPU (the two-device CPU emulation, for tests)
// Everything else is read from the environment each time a graph is optimized, so that
// tfswap.enable()/disable() take effect without restarting Python:
//   TFSWAP_ENABLED         0 turns the plugin off (default 1)
//   TFSWAP_BINARY          the tfswap binary (default: "tfswap" on PATH)
//   TFSWAP_BUDGET          --budget;   TFSWAP_STRATEGY  --strategy;   TFSWAP_DEVICE  --device
//   TFSWAP_RECOMPUTE       --recompute; TFSWAP_MIN_BYTES --min-bytes
//   TFSWAP_GATE_KIND       --gate-kind: identity (default) or reduce (L2Loss gates of 4 bytes)
//   TFSWAP_COMPUTE_DEVICE  --compute-device: one device or a comma list (e.g. /device:CPU:1 in
//                          the CPU emulation); unset on a CPU registration: every CPU but CPU:0
//   TFSWAP_FLAGS           more tfswap rewrite flags, separated by spaces
//   TFSWAP_TIMEOUT         seconds one rewrite may take (default 60)
//   TFSWAP_LOG             0: warnings only; 1 (default): one line per plan; 2: also tfswap's
//                          whole summary
//   TFSWAP_PLAN_LOG        a file to which one JSON line per plan is appended (what
//                          tfswap.plan_summary() reads)
//   TFSWAP_BATCH_SIZE      the batch size to assume where the leading dimension is unknown
//                          (Keras traces its train function for any batch size); without
//                          it, the plan's log line says how many tensors were left unsized
//   TFSWAP_PRESERVE        nodes tfswap must leave exactly as they are, separated by commas
//                          or spaces (with Grappler's nodes to preserve: tfswap --preserve)
//   TFSWAP_DUMP_DIR        a directory to which every graph handed to tfswap is written, as
//                          ID.pb (for running tfswap on it by hand)
//   TFSWAP_ALL_GRAPHS      1: also rewrite graphs that hold no training step
//   TFSWAP_OFFLOAD         --offload: none (default), all, or auto (taken as all, with a
//                          warning: see "Variables" below)
//
// Variables. TensorFlow 2 creates variables eagerly, outside the function, where the
// program's device scope puts them; a function graph receives each as a resource _Arg placed
// where its handle lives, and TensorFlow runs every op on a resource (its reads, its
// assignments, the optimizer's update) on the resource's device. So the plugin can move no
// variable: with TFSWAP_OFFLOAD, a variable created on the host (with tf.device("/CPU:0"),
// its optimizer's slots too) is read there, and tfswap gates each copy of its reads to the
// compute device behind a trigger, as it gates swap-ins; a variable created on a compute
// device stays there, and the plugin says so in one warning ("offload-pinned") naming the
// graph and how many such variables it holds, and lists them in the plan log
// ("offload_pinned"). offload=auto is taken as all: a function graph cannot choose where a
// variable lives, so nothing is left to choose but whether the host-resident ones' copies are
// gated.
//
// When. Grappler's meta-optimizer runs its passes in two iterations by default and calls the
// plugin in each, last in the list. The plugin acts in the last one only (it counts the calls
// per graph id), so that no default pass runs after it and rewrites around its swap nodes; and
// only on graphs that update variables (a training step). Shapes come from Grappler's static
// shape inference (TF_NewGraphProperties/TF_InferStatically) and are written into the
// _output_shapes attrs tfswap sizes tensors from; the item's fetch nodes are passed as --fetch.

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
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

#include "swap_core.h"
#include "tensorflow/c/experimental/grappler/grappler.h"
#include "tensorflow/c/tf_status.h"
#include "tensorflow/core/framework/attr_value.pb.h"
#include "tensorflow/core/framework/graph.pb.h"
#include "tensorflow/core/framework/node_def.pb.h"
#include "tensorflow/core/grappler/costs/op_performance_data.pb.h"
#include "tensorflow/core/grappler/grappler_item.h"

namespace tfswap_plugin {
namespace {

using tensorflow::AttrValue;
using tensorflow::GraphDef;
using tensorflow::NodeDef;

constexpr char kShapesAttr[] = "_output_shapes";
// The meta-optimizer's default number of iterations (RewriterConfig.meta_optimizer_iterations
// DEFAULT means TWO); TFSWAP_ITERATIONS overrides it for programs that set another number.
constexpr int kDefaultIterations = 2;

std::string Env(const char* name, const char* def = "") {
  const char* v = getenv(name);
  return v ? v : def;
}

// Warn logs msg to stderr the first time this process meets a problem of this kind
// (tfswap_core::FirstTime): Grappler calls the plugin for every function and iteration, and
// one broken binary would otherwise repeat its warning for each.
void Warn(const std::string& kind, const std::string& msg) {
  if (!tfswap_core::FirstTime(kind)) return;
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
    for (const char* f : {"report.json"}) {
      unlink((path_ + "/" + f).c_str());
    }
    rmdir(path_.c_str());
  }
  bool ok() const { return !path_.empty(); }
  std::string File(const char* name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

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

// IsVariableHandleOp reports whether op reads, updates or inspects a resource variable
// through its handle.
bool IsVariableHandleOp(const std::string& op) {
  return op == "ReadVariableOp" || op == "AssignVariableOp" || op == "AssignAddVariableOp" ||
         op == "AssignSubVariableOp" || op == "VariableShape" || op == "VarIsInitializedOp" ||
         op == "ResourceGather" || op == "ResourceGatherNd" || op.rfind("ResourceApply", 0) == 0 ||
         op.rfind("ResourceSparseApply", 0) == 0 || op.rfind("ResourceScatter", 0) == 0;
}

// PinnedVariables returns the names of the resource _Args of g on a compute device (one of
// compute, a comma list of full device names; empty: every GPU) whose every consumer is a
// variable op: variables TensorFlow 2 created on that device outside the function, which
// the function cannot move (see "Variables" above).
std::vector<std::string> PinnedVariables(const GraphDef& g, const std::string& compute) {
  std::set<std::string> devices;
  {
    std::istringstream in(compute);
    std::string d;
    while (std::getline(in, d, ',')) {
      if (!d.empty()) devices.insert(d);
    }
  }
  auto on_compute = [&](const std::string& d) {
    if (devices.empty()) return d.find("GPU:") != std::string::npos;
    return devices.count(d) > 0;
  };
  std::map<std::string, std::vector<std::string>> consumers;
  for (const NodeDef& n : g.node()) {
    for (const std::string& in : n.input()) {
      if (!in.empty() && in[0] != '^') consumers[NodeName(in)].push_back(n.op());
    }
  }
  std::vector<std::string> out;
  for (const NodeDef& n : g.node()) {
    if (n.op() != "_Arg" || !on_compute(n.device())) continue;
    auto t = n.attr().find("T");
    if (t == n.attr().end() || t->second.type() != tensorflow::DT_RESOURCE) continue;
    const auto& ops = consumers[n.name()];
    bool variable = !ops.empty();
    for (const std::string& op : ops) variable = variable && IsVariableHandleOp(op);
    if (variable) out.push_back(n.name());
  }
  return out;
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

// Split returns the names in s separated by commas or white space.
std::vector<std::string> Split(const std::string& s) {
  std::vector<std::string> out;
  std::string cur;
  for (char ch : s + ",") {
    if (ch == ',' || ch == ' ' || ch == '\t' || ch == '\n') {
      if (!cur.empty()) out.push_back(cur);
      cur.clear();
    } else {
      cur.push_back(ch);
    }
  }
  return out;
}

// Configure builds the core's configuration from the environment as it is now; false (with
// *error set) when a setting is bad. report is the file tfswap writes its JSON report to,
// fetch the item's fetch nodes that are in the graph, graph the graph (for its compute
// devices, ComputeDevices).
bool Configure(const GraphDef& graph, const std::string& report,
               const std::set<std::string>& fetch, tfswap_core::Config* cfg,
               std::string* error) {
  const std::string binary = Env("TFSWAP_BINARY");
  if (!binary.empty() && !tfswap_core::SetParameter(cfg, "tfswap_binary", {binary}, true, error)) {
    return false;
  }
  const std::string timeout = Env("TFSWAP_TIMEOUT");
  if (!timeout.empty() &&
      !tfswap_core::SetParameter(cfg, "timeout_seconds", {timeout}, true, error)) {
    *error = "TFSWAP_TIMEOUT must be a finite, positive number of seconds, not '" + timeout + "'";
    return false;
  }
  cfg->timeout_setting = "TFSWAP_TIMEOUT";
  struct Opt {
    const char* env;
    const char* key;
  };
  for (const Opt& o : {Opt{"TFSWAP_BUDGET", "budget"}, Opt{"TFSWAP_STRATEGY", "strategy"},
                       Opt{"TFSWAP_DEVICE", "device"}, Opt{"TFSWAP_RECOMPUTE", "recompute"},
                       Opt{"TFSWAP_MIN_BYTES", "min_bytes"},
                       Opt{"TFSWAP_GATE_KIND", "gate_kind"}}) {
    const std::string v = Env(o.env);
    if (!v.empty() && !tfswap_core::SetParameter(cfg, o.key, {v}, true, error)) {
      *error = std::string(o.env) + ": " + *error;
      return false;
    }
  }
  std::string offload = Env("TFSWAP_OFFLOAD");
  if (offload == "auto") {
    Warn("offload-auto",
         "TFSWAP_OFFLOAD=auto is taken as all: in TensorFlow 2 a variable lives where it was "
         "created, eagerly, outside the function, and no function graph can move it; with "
         "all, the reads of the variables created on the host (with tf.device(\"/CPU:0\")) "
         "are copied to the compute device behind triggers, and variables created on a compute "
         "device stay there");
    offload = "all";
  }
  if (!offload.empty() && !tfswap_core::SetParameter(cfg, "offload", {offload}, true, error)) {
    return false;
  }
  const std::string compute = ComputeDevices(graph);
  if (!compute.empty()) cfg->flags.push_back("--compute-device=" + compute);
  {
    std::istringstream extra(Env("TFSWAP_FLAGS"));
    std::string f;
    while (extra >> f) cfg->flags.push_back(f);
  }
  tfswap_core::FinishConfig(cfg);
  for (const auto& w : cfg->warnings) Warn(w.kind, w.text);
  cfg->call_flags.push_back("--report=" + report);
  for (const std::string& f : fetch) cfg->call_flags.push_back("--fetch=" + f);
  return true;
}

// UnknownBatch counts the tensors whose shape Annotate gave and whose leading dimension is
// still unknown: Keras traces its train function for a batch of any size.
int UnknownBatch(const GraphDef& g, const std::unordered_set<std::string>& annotated) {
  int n = 0;
  for (const NodeDef& node : g.node()) {
    if (!annotated.count(node.name())) continue;
    for (const auto& shape : node.attr().at(kShapesAttr).list().shape()) {
      if (!shape.unknown_rank() && shape.dim_size() > 0 && shape.dim(0).size() < 0) n++;
    }
  }
  return n;
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
  if (tfswap_core::IsRewritten(graph)) return Unchanged(status, "already rewritten");
  const std::string all = Env("TFSWAP_ALL_GRAPHS", "0");
  if (all != "1" && !IsTrainingStep(graph)) return Unchanged(status, "no training step");

  const double started = Now();
  std::vector<std::string> fetch = StringList(c_item, TF_GetFetchNodesListSize,
                                              TF_GetFetchNodesList);
  // Grappler's nodes to preserve and the user's (TFSWAP_PRESERVE): the core passes those of
  // this graph to tfswap as --preserve and checks they come back as they were.
  std::vector<std::string> preserve = StringList(c_item, TF_GetNodesToPreserveListSize,
                                                 TF_GetNodesToPreserveList);
  for (const std::string& p : Split(Env("TFSWAP_PRESERVE"))) preserve.push_back(p);
  GraphDef annotated = graph;
  std::unordered_set<std::string> added_shapes;
  std::string why;
  const int64_t batch = atoll(Env("TFSWAP_BATCH_SIZE", "0").c_str());
  if (!Annotate(c_item, &annotated, batch, &added_shapes, &why)) {
    Warn("shapes", "static shape inference failed on graph " + id + " (" + why +
                       "); tfswap sizes only the nodes that carry _output_shapes");
  }
  const int unknown_batch = batch > 0 ? 0 : UnknownBatch(annotated, added_shapes);
  const double shaped = Now();

  TempDir dir;
  if (!dir.ok()) {
    Warn("tempdir", std::string("graphs run unchanged: cannot make a temporary directory: ") +
                        strerror(errno));
    return Unchanged(status, "no temp dir");
  }
  std::string serialized;
  if (!annotated.SerializeToString(&serialized)) {
    Warn("write", "graph " + id + " left unchanged: cannot serialize it for tfswap");
    return Unchanged(status, "serialize failed");
  }
  const std::string dump = Env("TFSWAP_DUMP_DIR");
  if (!dump.empty()) WriteFile(dump + "/" + id + ".pb", serialized);
  // Only the fetch nodes that are in the graph: tfswap refuses a --fetch it cannot find.
  std::unordered_set<std::string> names;
  for (const NodeDef& n : graph.node()) names.insert(n.name());
  std::set<std::string> fetch_nodes;
  for (const std::string& f : fetch) {
    if (names.count(NodeName(f))) fetch_nodes.insert(NodeName(f));
  }
  tfswap_core::Config cfg;
  std::string bad_setting;
  if (!Configure(graph, dir.File("report.json"), fetch_nodes, &cfg, &bad_setting)) {
    Warn("config", "graphs run unchanged: bad setting: " + bad_setting);
    return Unchanged(status, "bad setting");
  }
  std::vector<std::string> pinned;
  if (tfswap_core::Offloads(cfg.flags)) {
    pinned = PinnedVariables(graph, ComputeDevices(graph));
    if (!pinned.empty()) {
      Warn("offload-pinned",
           "offload: graph " + id + " reads " + std::to_string(pinned.size()) +
               " variables that live on the compute device (e.g. " + pinned[0] +
               "): TensorFlow 2 created them eagerly, outside the function, and runs their "
               "reads and updates where they live, so they stay there; create them under "
               "tf.device(\"/CPU:0\") (the optimizer's slots too: build the optimizer there) "
               "to keep them on the host, where tfswap gates their copies");
    }
  }
  tfswap_core::Result r = tfswap_core::RunSwap(serialized, fetch, preserve, cfg, "graph " + id);
  const double ran = Now();
  for (const auto& w : r.warnings) Warn(w.kind, w.text);
  const std::string& err = r.summary;
  if (!r.rewritten && r.reason != "nothing to swap") return Unchanged(status, r.reason);

  GraphDef out;
  if (r.rewritten && !out.ParseFromString(r.graph)) {  // checked by RunSwap: cannot happen
    Warn("output", "graph " + id + " left unchanged: cannot parse tfswap's output");
    return Unchanged(status, "bad output");
  }
  const int added = r.rewritten ? r.added_nodes : 0;
  const int log_level = atoi(Env("TFSWAP_LOG", "1").c_str());
  std::string swapped = SummaryField(err, "tensors swapped");
  std::string recomputed = SummaryField(err, "recomputed");
  std::string peak = SummaryField(err, "predicted peak", true);
  std::string step = SummaryField(err, "predicted step");
  std::string offloaded = SummaryField(err, "offloaded");
  if (added > 0) {
    // The shapes the plugin added stay out of the original nodes: the rewrite changes nothing
    // in them but the inputs tfswap rewired. The swap nodes keep theirs.
    for (NodeDef& n : *out.mutable_node()) {
      if (added_shapes.count(n.name())) n.mutable_attr()->erase(kShapesAttr);
    }
    *out.mutable_library() = graph.library();
    *out.mutable_versions() = graph.versions();
  }
  const std::string batch_note =
      unknown_batch > 0
          ? "; batch unknown: " + std::to_string(unknown_batch) +
                " tensors have no leading dimension and were not sized (pass "
                "tfswap.enable(batch_size=N) or TFSWAP_BATCH_SIZE=N)"
          : "";
  if (log_level >= 1) {
    std::string line = "graph " + id + ": ";
    if (added == 0) {
      line += "nothing to swap";
      std::string plan = SummaryField(err, "nothing needed");
      if (!plan.empty()) line += " (" + plan + ")";
    } else {
      line += "swapped " + (swapped.empty() ? "?" : swapped);
      if (!recomputed.empty()) line += ", recomputed " + recomputed;
      if (!offloaded.empty()) line += "; offloaded " + offloaded;
      line += "; peak " + (peak.empty() ? "?" : peak);
      line += "; step " + (step.empty() ? "?" : step);
    }
    line += "; shapes " + Fmt(shaped - started) + " s, tfswap " + Fmt(ran - shaped) + " s";
    line += batch_note;
    if (!pinned.empty()) {
      line += "; " + std::to_string(pinned.size()) + " variables stay on the compute device";
    }
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
    std::string pinned_json = "[";
    for (size_t i = 0; i < pinned.size(); i++) {
      pinned_json += (i ? ", " : "") + JsonString(pinned[i]);
    }
    pinned_json += "]";
    // The gate kind tfswap was given: the last --gate-kind among its flags (TFSWAP_GATE_KIND's,
    // then TFSWAP_FLAGS'; tfswap takes the last), identity without one.
    std::string gate_kind = "identity";
    for (size_t i = 0; i < cfg.flags.size(); i++) {
      const std::string& f = cfg.flags[i];
      for (const std::string name : {"--gate-kind", "-gate-kind"}) {
        if (f.rfind(name + "=", 0) == 0) {
          gate_kind = f.substr(name.size() + 1);
        } else if (f == name && i + 1 < cfg.flags.size()) {
          gate_kind = cfg.flags[i + 1];
        }
      }
    }
    AppendLine(plan_log,
               "{\"graph\": " + JsonString(id) + ", \"nodes\": " +
                   std::to_string(graph.node_size()) + ", \"swap_nodes\": " +
                   std::to_string(added) + ", \"swapped\": " + JsonString(swapped) +
                   ", \"recomputed\": " + JsonString(recomputed) + ", \"peak\": " +
                   JsonString(peak) + ", \"step\": " + JsonString(step) +
                   ", \"batch\": " + (batch > 0 ? std::to_string(batch) : "null") +
                   ", \"unknown_batch_tensors\": " + std::to_string(unknown_batch) +
                   ", \"shape_seconds\": " + Fmt(shaped - started) +
                   ", \"tfswap_seconds\": " + Fmt(ran - shaped) + ", \"offloaded\": " +
                   JsonString(offloaded) + ", \"offload_pinned\": " + pinned_json +
                   ", \"gate_kind\": " + JsonString(gate_kind) +
                   ", \"report\": " + report +
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
