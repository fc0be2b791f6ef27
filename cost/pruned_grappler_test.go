package cost_test

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/tfswap/tfswap/cost"
	"github.com/tfswap/tfswap/internal/testgraph"
)

// TestPrunedNodesAgainstGrappler checks the nodes the simulator runs as NoOps for a step
// fetching train (cost.PrunedNodes) against Grappler's dependency optimizer itself, run alone on
// the same graph with the same fetch (tools/vcluster/dependency.py, TensorFlow's
// tf_optimizer.OptimizeGraph): every node tfswap prunes must come out of the optimizer as a
// NoOp or not at all. The graphs are those where rewrite's fetch-independent value-dead rule
// (rewrite's valueDead, which never marks what reaches a node without data readers, since such
// a sink may be fetched) and PrunedNodes differ: the zoo's rnn_v1 (a TensorArray gradient's
// flow_out, an Identity of a stack pop read only through a control edge) and concrete (the
// loss and Identity_6, which nothing in the step reads, and the five ops computing them),
// testmodels/controlflow's rnn_v1, and the zoo GPT (the gradient of the attention scale).
// rewrite's analysis adds PrunedNodes to its value-dead nodes when the fetches are known.
func TestPrunedNodesAgainstGrappler(t *testing.T) {
	py := requireVenv(t)
	paths := []string{"../testmodels/zoo/rnn_v1.pb", "../testmodels/zoo/concrete.pb",
		"../testmodels/controlflow/rnn_v1.pb", "../testmodels/zoo/gpt.pb"}
	script, err := filepath.Abs("../tools/vcluster/dependency.py")
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(py, append([]string{script, "--fetch", "train"}, paths...)...)
	cmd.Env = append(os.Environ(), "TF_CPP_MIN_LOG_LEVEL=3")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("dependency.py: %v", err)
	}
	var res struct {
		Graphs []struct {
			Path  string             `json:"path"`
			Nodes map[string]*string `json:"nodes"`
		} `json:"graphs"`
	}
	if err := json.Unmarshal(out, &res); err != nil || len(res.Graphs) != len(paths) {
		t.Fatalf("dependency.py output (%d graphs): %v", len(res.Graphs), err)
	}
	for i, path := range paths {
		_, g := testgraph.Load(t, path)
		pruned, err := cost.PrunedNodes(g, []string{"train"})
		if err != nil {
			t.Fatal(err)
		}
		after := res.Graphs[i].Nodes
		var names []string
		removed := 0
		for j, p := range pruned {
			n := g.Nodes[j]
			op, ok := after[n.Name]
			if !ok {
				t.Fatalf("%s: dependency.py does not list %s", path, n.Name)
			}
			if op == nil {
				removed++
			}
			if !p {
				continue
			}
			names = append(names, n.Name)
			if op != nil && *op != "NoOp" {
				t.Errorf("%s: tfswap runs %s (%s) as a NoOp, Grappler's dependency optimizer keeps it as %s", path, n.Name, n.Op, *op)
			}
		}
		count := len(names)
		if count > 8 {
			names = names[:8]
		}
		t.Logf("%s: %d node(s) pruned by tfswap (%v), %d removed by Grappler (NoOps and bypassed Identities)", path, count, names, removed)
		if count == 0 {
			t.Errorf("%s: tfswap prunes no node for fetch train: nothing checked", path)
		}
	}
}
