// TFSwapOptimizer: tfswap as a Grappler custom graph optimizer.
//
// The optimizer does not embed tfswap's Go engine. For every graph Grappler hands it, it runs
// the tfswap binary as a child process ("tfswap rewrite - -o - FLAGS..."), writes the graph as
// a binary GraphDef to the child's stdin and reads the rewritten GraphDef from its stdout.
// That part, and the check of the answer, is the shared core (swap_core.h); this file is the
// Grappler side: parameters, static shape inference, registration.
// A library without a Go runtime can be loaded into any process, Python and Go programs alike
// (one process can hold only one Go runtime).
//
// Whatever goes wrong (no binary, a bad parameter, tfswap failing, a timeout, an output that
// is not a valid rewrite of the input), the optimizer leaves the graph unchanged and logs one
// warning per kind of problem and process. It never fails the session.
//
// Parameters (RewriterConfig.CustomGraphOptimizer.parameter_map):
//   tfswap_binary    path of the tfswap binary (default: $TFSWAP_BINARY, else "tfswap" on PATH)
//   timeout_seconds  how long one rewrite may take, finite and positive (default 60;
//                    Grappler's own deadline, when shorter, wins)
//   verbose          0 (default): log nothing when all is well; 1: log tfswap's summary for
//                    every rewritten graph; 2: also list every swap (tfswap --verbose)
//   infer_shapes     true (default): give nodes without an _output_shapes attr, or with
//                    unknown dimensions in it, the shapes of Grappler's static shape inference
//                    before calling tfswap, which sizes tensors from that attr only (the graph
//                    TensorFlow runs keeps its own attrs)
//   batch_size       a positive integer: the batch of an unknown (None) leading dimension of
//                    the placeholders. A session optimizes its graph before any feed, so a
//                    placeholder of shape [None, ...] leaves every tensor downstream unsized
//                    and unswapped; with batch_size, shape inference and tfswap (--batch)
//                    assume this batch. The rewrite stays correct for other batches (it only
//                    moves tensors); only the choice of what to swap is made for this one.
//   anything else    passed to tfswap as --key=value, underscores turned into dashes
//                    (min_bytes=1MiB -> --min-bytes=1MiB; a list gives the flag once per
//                    element). New tfswap flags need no change here; a key tfswap does not know
//                    makes it exit with status 2, which becomes the warning.

#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "swap_core.h"
#include "tensorflow/core/framework/attr_value.pb.h"
#include "tensorflow/core/framework/graph.pb.h"
#include "tensorflow/core/framework/node_def.pb.h"
#include "tensorflow/core/framework/tensor_shape.pb.h"
#include "tensorflow/core/grappler/costs/graph_properties.h"
#include "tensorflow/core/grappler/grappler_item.h"
#include "tensorflow/core/grappler/optimizers/custom_graph_optimizer.h"
#include "tensorflow/core/grappler/optimizers/custom_graph_optimizer_registry.h"
#include "tensorflow/core/platform/logging.h"
#include "tensorflow/core/protobuf/rewriter_config.pb.h"

namespace tfswap_bridge {
namespace {

using tensorflow::AttrValue;
using tensorflow::GraphDef;
using tensorflow::NodeDef;

constexpr char kName[] = "TFSwapOptimizer";
constexpr char kShapesAttr[] = "_output_shapes";

// WarnOnce logs msg as a warning the first time this process meets a problem of this kind,
// and at VLOG(1) after that: Grappler calls the optimizer once per graph, per meta-optimizer
// iteration and per function, and one misconfiguration or broken binary would otherwise
// repeat its warning for each (TF_CPP_VMODULE=tfswap_optimizer=1 shows them all).
void WarnOnce(const std::string& kind, const std::string& msg) {
  if (tfswap_core::FirstTime(kind)) {
    LOG(WARNING) << kName << ": " << msg;
  } else {
    VLOG(1) << kName << ": " << msg;
  }
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

double NowSeconds() {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

std::string Trimmed(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
  if (s.empty()) return "(no message)";
  return s;
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
    if (config != nullptr) {
      // parameter_map is a protobuf map, whose iteration order is unspecified: sort the keys
      // so that the command line, and with it tfswap's output, is deterministic.
      std::vector<std::string> keys;
      for (const auto& kv : config->parameter_map()) keys.push_back(kv.first);
      std::sort(keys.begin(), keys.end());
      for (const std::string& key : keys) {
        const AttrValue& v = config->parameter_map().at(key);
        std::vector<std::string> vals;
        if (!FlagValues(v, &vals)) {
          config_error_ = absl::StrCat(
              "parameter '", key, "' must be a string, number, bool or a list of them");
          break;
        }
        if (key == "batch_size") {
          char* end = nullptr;
          long long b = 0;
          if (vals.size() == 1 && v.value_case() != AttrValue::kList) {
            b = strtoll(vals[0].c_str(), &end, 10);
          }
          if (end == nullptr || end == vals[0].c_str() || *end != '\0' || b <= 0) {
            config_error_ = absl::StrCat("parameter batch_size must be a positive integer, not '",
                                         vals.empty() ? "" : vals[0], "'");
            break;
          }
          batch_size_ = b;
          if (!tfswap_core::SetParameter(&cfg_, "batch", {std::to_string(b)}, true,
                                         &config_error_)) {
            break;
          }
          continue;
        }
        if (!tfswap_core::SetParameter(&cfg_, key, vals, v.value_case() != AttrValue::kList,
                                       &config_error_)) {
          break;
        }
      }
    }
    tfswap_core::FinishConfig(&cfg_);
    if (config_error_.empty()) {
      for (const auto& w : cfg_.warnings) WarnOnce(w.kind, w.text);
    }
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
    if (tfswap_core::IsRewritten(item.graph)) {
      VLOG(1) << kName << ": graph " << item.id << " already rewritten, left as is";
      return Unchanged("already rewritten");
    }
    const double started = NowSeconds();

    GraphDef annotated;
    const GraphDef* input = &item.graph;
    if (cfg_.infer_shapes && NeedsShapes(item.graph)) {
      std::string why;
      if (Annotate(item, batch_size_, &annotated, &why)) {
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

    double deadline = 0;
    if (deadline_usec() > 0) {
      struct timespec ts;
      clock_gettime(CLOCK_REALTIME, &ts);
      double now_usec = ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
      deadline = (deadline_usec() - now_usec) / 1e6;
      if (deadline <= 0) {
        WarnOnce("deadline",
                 "graph left unchanged: Grappler's deadline passed before tfswap could run");
        return Unchanged("deadline");
      }
    }
    if (batch_size_ == 0) {
      const std::string p = UnknownBatchPlaceholder(*input);
      if (!p.empty()) {
        WarnOnce("batch-size",
                 absl::StrCat("graph ", item.id, ": placeholder ", p,
                              " has an unknown leading (batch) dimension that shape inference "
                              "cannot find, so the tensors computed from it have no size and "
                              "are not swapped; set the parameter batch_size to the batch the "
                              "session feeds"));
      }
    }
    std::vector<std::string> preserve(item.keep_ops.begin(), item.keep_ops.end());
    tfswap_core::Result r = tfswap_core::RunSwap(serialized, item.fetch, preserve, cfg_,
                                                 absl::StrCat("graph ", item.id), deadline);
    for (const auto& w : r.warnings) WarnOnce(w.kind, w.text);
    if (!r.rewritten) {
      if (cfg_.verbose > 0 && r.warnings.empty()) {
        LOG(INFO) << kName << ": graph " << item.id << " (" << item.graph.node_size()
                  << " nodes) unchanged: " << r.reason << "\n"
                  << Trimmed(r.summary);
      }
      return Unchanged(r.reason);
    }
    GraphDef out;
    if (!out.ParseFromString(r.graph)) {  // checked by RunSwap: cannot happen
      WarnOnce("output", absl::StrCat("graph left unchanged: cannot parse tfswap's output for "
                                      "graph ", item.id));
      return Unchanged("bad output");
    }
    if (cfg_.verbose > 0) {
      LOG(INFO) << kName << ": graph " << item.id << " (" << item.graph.node_size()
                << " nodes): " << r.added_nodes << " swap nodes added; shapes "
                << FormatFloat(annotated_at - started) << " s, tfswap "
                << FormatFloat(r.seconds) << " s\n"
                << Trimmed(r.summary);
    } else {
      VLOG(1) << kName << ": graph " << item.id << ": " << r.added_nodes
              << " swap nodes added";
    }
    RestoreShapes(item.graph, &out);
    *out.mutable_library() = item.graph.library();
    *out.mutable_versions() = item.graph.versions();
    *optimized_graph = std::move(out);
    return absl::OkStatus();
  }

 private:
  // NeedsShapes reports whether some node of g lacks an _output_shapes attr or has an
  // unknown rank or dimension in it.
  static bool NeedsShapes(const GraphDef& g) {
    for (const NodeDef& n : g.node()) {
      auto it = n.attr().find(kShapesAttr);
      if (it == n.attr().end()) return true;
      for (const auto& shape : it->second.list().shape()) {
        if (shape.unknown_rank()) return true;
        for (const auto& d : shape.dim()) {
          if (d.size() < 0) return true;
        }
      }
    }
    return false;
  }

  // UnknownBatchPlaceholder returns the name of the first Placeholder of g whose shape attr
  // has an unknown leading dimension that its _output_shapes (as annotated) does not know
  // either, or "". A graph may pin the batch elsewhere (a constant shape), and Grappler's
  // symbolic shape inference then finds it for the placeholder too.
  static std::string UnknownBatchPlaceholder(const GraphDef& g) {
    for (const NodeDef& n : g.node()) {
      if (n.op() != "Placeholder" && n.op() != "PlaceholderV2") continue;
      auto it = n.attr().find("shape");
      if (it == n.attr().end()) continue;
      const auto& s = it->second.shape();
      if (s.unknown_rank() || s.dim_size() == 0 || s.dim(0).size() >= 0) continue;
      auto known = n.attr().find(kShapesAttr);
      if (known != n.attr().end() && known->second.list().shape_size() == 1) {
        const auto& k = known->second.list().shape(0);
        if (!k.unknown_rank() && k.dim_size() > 0 && k.dim(0).size() >= 0) continue;
      }
      return n.name();
    }
    return "";
  }

  // WithBatch sets the unknown leading dimension of every Placeholder's shape (its shape
  // attr and _output_shapes) in g to batch.
  static void WithBatch(int64_t batch, GraphDef* g) {
    auto fix = [batch](tensorflow::TensorShapeProto* s) {
      if (!s->unknown_rank() && s->dim_size() > 0 && s->dim(0).size() < 0) {
        s->mutable_dim(0)->set_size(batch);
      }
    };
    for (NodeDef& n : *g->mutable_node()) {
      if (n.op() != "Placeholder" && n.op() != "PlaceholderV2") continue;
      auto& attrs = *n.mutable_attr();
      if (attrs.count("shape")) fix(attrs["shape"].mutable_shape());
      if (attrs.count(kShapesAttr)) {
        for (auto& s : *attrs[kShapesAttr].mutable_list()->mutable_shape()) fix(&s);
      }
    }
  }

  // Merged returns have, with each unknown dimension (and an unknown rank) filled from
  // inferred where inferred knows it.
  static tensorflow::TensorShapeProto Merged(const tensorflow::TensorShapeProto& have,
                                             const tensorflow::TensorShapeProto& inferred) {
    if (have.unknown_rank()) return inferred;
    if (inferred.unknown_rank() || inferred.dim_size() != have.dim_size()) return have;
    tensorflow::TensorShapeProto out = have;
    for (int i = 0; i < out.dim_size(); ++i) {
      if (out.dim(i).size() < 0 && inferred.dim(i).size() >= 0) {
        out.mutable_dim(i)->set_size(inferred.dim(i).size());
      }
    }
    return out;
  }

  // Annotate copies the item's graph into *out and completes the _output_shapes attrs of its
  // nodes with what Grappler's static shape inference finds: a node without the attr gets
  // the inferred shapes, and an unknown dimension in an attr is filled where inference knows
  // it. With a positive batch, inference assumes it for the placeholders' unknown leading
  // dimension (WithBatch).
  static bool Annotate(const tensorflow::grappler::GrapplerItem& item, int64_t batch,
                       GraphDef* out, std::string* why) {
    GraphDef g = item.graph;
    if (batch > 0) WithBatch(batch, &g);
    tensorflow::grappler::GrapplerItem copy = item.WithGraph(std::move(g));
    tensorflow::grappler::GraphProperties props(copy);
    absl::Status s = props.InferStatically(/*assume_valid_feeds=*/true,
                                           /*aggressive_shape_inference=*/false,
                                           /*include_input_tensor_values=*/false,
                                           /*include_output_tensor_values=*/false);
    if (!s.ok()) {
      *why = s.ToString();
      return false;
    }
    *out = std::move(copy.graph);
    for (NodeDef& n : *out->mutable_node()) {
      if (!props.HasOutputProperties(n.name())) continue;
      const auto& inferred = props.GetOutputProperties(n.name());
      auto it = n.attr().find(kShapesAttr);
      AttrValue shapes;
      auto* list = shapes.mutable_list();
      if (it == n.attr().end()) {
        for (const auto& p : inferred) *list->add_shape() = p.shape();
      } else {
        const auto& have = it->second.list().shape();
        if (have.size() != static_cast<int>(inferred.size())) continue;
        for (int i = 0; i < have.size(); ++i) *list->add_shape() = Merged(have[i], inferred[i].shape());
      }
      (*n.mutable_attr())[kShapesAttr] = std::move(shapes);
    }
    return true;
  }

  // RestoreShapes gives the nodes of out that come from the item's graph their own
  // _output_shapes attrs back (or none), undoing Annotate, so that the rewrite changes nothing
  // in them but the inputs tfswap rewired. The swap nodes keep theirs.
  static void RestoreShapes(const GraphDef& original, GraphDef* out) {
    std::unordered_map<std::string, const NodeDef*> by_name;
    for (const NodeDef& n : original.node()) by_name[n.name()] = &n;
    for (NodeDef& n : *out->mutable_node()) {
      auto it = by_name.find(n.name());
      if (it == by_name.end()) continue;
      auto want = it->second->attr().find(kShapesAttr);
      if (want == it->second->attr().end()) {
        n.mutable_attr()->erase(kShapesAttr);
      } else {
        (*n.mutable_attr())[kShapesAttr] = want->second;
      }
    }
  }

  tfswap_core::Config cfg_;
  int64_t batch_size_ = 0;  // the batch_size parameter; 0 when not given
  std::string config_error_;
};

}  // namespace

REGISTER_GRAPH_OPTIMIZER_AS(TFSwapOptimizer, "TFSwapOptimizer");

}  // namespace tfswap_bridge
