// swap_core.h: the part of tfswap's TensorFlow integrations that does not depend on how the
// graph arrives. Both the Grappler custom optimizer (tfswap_optimizer.cc) and a TF2
// PluggableDevice graph-optimizer plugin build on it.
//
// RunSwap runs the tfswap binary as a child process on one serialized GraphDef
// ("tfswap rewrite - -o - FLAGS": the graph on its stdin, the rewritten graph on its stdout),
// checks that the answer is a rewrite of the input (CheckRewrite), and returns the graph to
// use: the rewritten one, or none (keep the input unchanged) together with warnings saying
// why. It never throws and never fails the caller; every problem becomes a warning.
//
// Usage:
//
//   tfswap_core::Config cfg;
//   std::string err;
//   if (!tfswap_core::SetParameter(&cfg, "min_bytes", {"1MiB"}, /*scalar=*/true, &err)) ...
//   tfswap_core::Result r = tfswap_core::RunSwap(serialized, fetch, preserve, cfg, "graph 1");
//   for (const auto& w : r.warnings) if (tfswap_core::FirstTime(w.kind)) LOG(WARNING) << w.text;
//   if (r.rewritten) use r.graph;
//
// Process-wide state: a flag set tfswap refused with a usage error (exit status 2) is not run
// again in the process, and after one timeout tfswap is not run again at all (a hanging
// binary would otherwise cost the timeout for every graph).

#ifndef TFSWAP_GRAPPLER_BRIDGE_SWAP_CORE_H_
#define TFSWAP_GRAPPLER_BRIDGE_SWAP_CORE_H_

#include <stddef.h>

#include <cstdint>
#include <string>
#include <vector>

namespace tensorflow {
class GraphDef;
}  // namespace tensorflow

namespace tfswap_core {

// kDefaultTimeoutSeconds is how long one run of tfswap may take unless configured.
constexpr double kDefaultTimeoutSeconds = 60;

// Warning is one problem RunSwap met. kind groups warnings for FirstTime ("timeout",
// "usage", "not-rewrite", "tfswap-warning: TEXT", ...); text is a full sentence naming the
// graph and, for refusals, saying that the graph runs unchanged.
struct Warning {
  std::string kind;
  std::string text;
};

// Config is what RunSwap needs to run tfswap.
struct Config {
  // binary is the tfswap binary: a path, or a name looked up on PATH. Empty means
  // $TFSWAP_BINARY, else "tfswap".
  std::string binary;
  // timeout_seconds bounds one run; finite and positive (SetParameter refuses anything else).
  double timeout_seconds = kDefaultTimeoutSeconds;
  // verbose is 0 (quiet), 1 (the caller logs tfswap's summary) or 2 (tfswap --verbose too).
  int verbose = 0;
  // infer_shapes asks the caller to annotate nodes with inferred _output_shapes first; the
  // core only records it.
  bool infer_shapes = true;
  // flags are passed to "tfswap rewrite" after "- -o -", e.g. "--min-bytes=1MiB".
  std::vector<std::string> flags;
  // max_output_bytes caps tfswap's stdout; 0 means 2 x the input + 64 MiB, at most 2 GiB
  // (protobuf cannot parse more). max_stderr_bytes caps its stderr (default 4 MiB). A child
  // that writes more is killed and the graph kept.
  uint64_t max_output_bytes = 0;
  uint64_t max_stderr_bytes = 4 << 20;
  // call_flags are more tfswap flags for this call only (a --report file, --fetch): unlike
  // flags they are not part of what a usage refusal (exit status 2) remembers.
  std::vector<std::string> call_flags;
  // timeout_setting names where the timeout was set, for the timeout warning.
  std::string timeout_setting = "parameter timeout_seconds";
  // warnings are problems with the configuration itself (FinishConfig's), for the caller to
  // log once by kind after FinishConfig.
  std::vector<Warning> warnings;
};

// SetParameter applies one parameter to cfg: tfswap_binary, timeout_seconds, verbose and
// infer_shapes are the core's own; any other key becomes a tfswap flag "--key=value"
// (underscores turned into dashes, once per value). scalar says the parameter was given as a
// single value rather than a list. It returns false and sets *error on a bad parameter: an
// empty binary, a timeout that is not a finite positive number of seconds (inf, nan, 0 and
// negative values are refused), a gate_kind other than identity or reduce (tfswap's
// --gate-kind), a key that is no flag name, a flag the core sets itself (-o, --output,
// --format, ...).
bool SetParameter(Config* cfg, const std::string& key, const std::vector<std::string>& values,
                  bool scalar, std::string* error);

// FinishConfig completes cfg once every parameter is set: the binary's default, and
// --verbose for verbose 2. Call it once, after the last SetParameter. It also refuses
// --offload auto (given as offload=auto, --offload=auto or "--offload auto"): auto chooses
// the variables to move from each graph, and every graph a session runs (the initialiser's,
// the training step's) must place each variable alike, or a run looks for a variable's
// resource on a device that does not hold it ("Could not find variable"). The first graph
// that creates a variable fixes its device, and in a session that graph is the
// initialiser's, which holds no training step for auto to plan from, so no per-graph choice
// can be both safe and useful. FinishConfig passes --offload=all instead, which places every
// variable on the host in every graph, and adds an "offload-auto" warning to cfg->warnings
// saying so and naming the safe way to move only some: the parameter offload_variables
// (tfswap's --offload-variables), a list of variables that every graph places alike.
void FinishConfig(Config* cfg);

// Offloads reports whether flags ask tfswap to move variables to the host (--offload all or
// auto, or --offload-variables naming some).
bool Offloads(const std::vector<std::string>& flags);

// Result is what RunSwap returns.
struct Result {
  // rewritten is true when graph holds a checked rewrite that adds a node (or, with
  // --offload, moves one); false means: run the input unchanged.
  bool rewritten = false;
  std::string graph;  // the serialized rewritten GraphDef, when rewritten
  int added_nodes = 0;
  // reason says in a few words why the graph is unchanged ("nothing to swap", "timeout", ...).
  std::string reason;
  // warnings are the problems met; none when all went well or the graph was unchanged for a
  // reason that deserves none (already rewritten, nothing to swap). tfswap's own
  // "tfswap: warning:" lines come back here too, even when the graph was rewritten.
  std::vector<Warning> warnings;
  // summary is tfswap's stderr (at most 64 KiB of it), for verbose logging.
  std::string summary;
  double seconds = 0;  // the child process's wall time
};

// RunSwap rewrites one graph with tfswap. graph is the serialized GraphDef to send; fetch
// and preserve name nodes or tensors ("a", "a:1") that must survive (every original node must
// anyway); the preserved nodes of the graph are also passed as --preserve, and must come back
// exactly as they were (tfswap neither swaps nor recomputes their outputs nor redirects or
// adds to their inputs); what names the graph in warnings ("graph 3"); deadline_seconds, when
// positive, shortens cfg.timeout_seconds. Thread-safe.
Result RunSwap(const std::string& graph, const std::vector<std::string>& fetch,
               const std::vector<std::string>& preserve, const Config& cfg,
               const std::string& what, double deadline_seconds = 0);

// CheckRewrite returns "" when out is a tfswap rewrite of in, else why not (one sentence
// naming the node). A rewrite keeps every node of in with the same op, device and attrs and
// all its control inputs; each data input of an original node carries the same tensor as
// before, directly or through tfswap's nodes: swap-out, swap-in and gate Identities (which
// carry their input; a gate may also be an L2Loss of one tensor, which carries nothing) and
// recompute copies (same op, device and attrs as the node they copy,
// inputs that carry the same tensors); every node added is such a tfswap node (named under
// "tfswap/" with a _tfswap_role attr); every input of every node names a node of out; every
// fetch and preserved node is still there. With offload (tfswap's --offload all or auto), an
// original node may also move to a CPU device (the host), and host copies of variable reads
// (role weight_in, Identities) carry their input too.
// Each node of strict (names, "a:1" and "^a" name a) must also keep its inputs, in order, and
// its device: a preserved node (RunSwap's preserve).
std::string CheckRewrite(const tensorflow::GraphDef& in, const tensorflow::GraphDef& out,
                         const std::vector<std::string>& keep, bool offload,
                         const std::vector<std::string>& strict = {});

// IsRewritten reports whether g already holds tfswap's nodes (a _tfswap_role attr).
bool IsRewritten(const tensorflow::GraphDef& g);

// FirstTime reports whether this process meets a warning of this kind for the first time;
// callers log the first one as a warning and later ones only at a debug level.
bool FirstTime(const std::string& kind);

}  // namespace tfswap_core

extern "C" {
// tfswap_check_rewrite checks, for tests and other languages, that the serialized GraphDef
// out is a tfswap rewrite of the serialized GraphDef in (tfswap_core::CheckRewrite; keep is a
// newline-separated list of fetched or preserved names, or NULL; offload non-zero allows
// tfswap's variable offload). It returns 1 when it is, 0 when it is not (with the reason in
// why, NUL-terminated and cut to why_len bytes), -1 when either buffer is not a GraphDef.
int tfswap_check_rewrite(const char* in, size_t in_len, const char* out, size_t out_len,
                         const char* keep, int offload, char* why, size_t why_len);
}

#endif  // TFSWAP_GRAPPLER_BRIDGE_SWAP_CORE_H_
