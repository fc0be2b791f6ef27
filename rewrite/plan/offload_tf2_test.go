package plan

import (
	"github.com/tfswap/tfswap/rewrite"
	"strings"
	"testing"

	"github.com/tfswap/tfswap/graphdef"
)

// tf2HostVariables is a TensorFlow 2 function graph as the TF2 plugin hands it to tfswap
// (written by TFSWAP_DUMP_DIR): a tf.function step with Adam on the two-device emulation,
// computing on CPU:1, whose two weights and Adam's slots, iteration count and learning rate
// were created on CPU:0 outside the function, so they reach it as resource _Args on CPU:0.
const tf2HostVariables = "testdata/tf2_host_variables.pb"

// TestOffloadHostArgVariables checks that the resource arguments of a TF2 function graph that
// live on the host form OnHost groups: offloading them moves no node, and gives their reads'
// consumers on the compute device gated copies on the host.
func TestOffloadHostArgVariables(t *testing.T) {
	m, err := graphdef.Load(tf2HostVariables, graphdef.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	res, err := rewrite.OffloadVariables(m, rewrite.Options{ComputeDevice: "/device:CPU:1"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	// w1, w3, Adam's m and v of each, its iteration count and its learning rate.
	if len(res.Variables) != 8 {
		t.Fatalf("%d groups, want 8: %+v", len(res.Variables), res.Variables)
	}
	for _, v := range res.Variables {
		if v.Nodes != 0 || !strings.HasSuffix(v.Host, "device:CPU:0") || !strings.Contains(v.Reason, "created on the host") {
			t.Errorf("group %+v: want an OnHost group on CPU:0 that moves no node", v)
		}
		if v.Bytes == 0 {
			t.Errorf("group %s: unsized (its _handle_shapes are known)", v.Name)
		}
	}
	if len(res.Copies) == 0 {
		t.Fatal("no gated copies")
	}
	for i, nd := range m.Graph.Node {
		if res.Model.Graph.Node[i].GetDevice() != nd.GetDevice() {
			t.Errorf("node %s moved from %s to %s", nd.GetName(), nd.GetDevice(), res.Model.Graph.Node[i].GetDevice())
		}
	}
}

// TestOffloadDeviceArgVariablesStay checks that resource arguments on the compute device
// (variables TF2 created there) form no group: no function graph can move them.
func TestOffloadDeviceArgVariablesStay(t *testing.T) {
	m, err := graphdef.Load(tf2HostVariables, graphdef.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	moved := 0
	for _, nd := range m.Graph.Node {
		if strings.HasSuffix(nd.GetDevice(), "device:CPU:0") {
			nd.Device = strings.TrimSuffix(nd.GetDevice(), "0") + "1"
			moved++
		}
	}
	if moved == 0 {
		t.Fatal("the graph has no node on CPU:0")
	}
	res, err := rewrite.OffloadVariables(m, rewrite.Options{ComputeDevice: "/device:CPU:1"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Variables) != 0 || len(res.Copies) != 0 {
		t.Fatalf("%d groups and %d copies, want none: %+v", len(res.Variables), len(res.Copies), res.Variables)
	}
}
