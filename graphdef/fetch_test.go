package graphdef

import (
	"path/filepath"
	"strings"
	"testing"
)

// TestDefaultFetchFindsTrainingStep: on every committed training fixture, whose graph holds
// the initialisers ("init") and the training op ("train") as separate sinks, DefaultFetch
// finds the training op and not the initialisers (issue 12, item 5).
func TestDefaultFetchFindsTrainingStep(t *testing.T) {
	for _, name := range fixtureNames {
		_, g := loadGraph(t, filepath.Join(fixtures, name+".pb"))
		f := DefaultFetch(g)
		if !f.Found || strings.Join(f.Nodes, ",") != "train" {
			t.Errorf("%s: default fetch %v (found %v: %s), want train", name, f.Nodes, f.Found, f.Reason)
		}
		if !strings.Contains(f.String(), "train (found: the sink whose fan-in holds the ") {
			t.Errorf("%s: %s", name, f)
		}
	}
}

// TestDefaultFetchSynthetic checks DefaultFetch on small graphs: initialisers and reads
// of variables outside the step are left out, resource-variable optimisers (handles as
// inputs) count, several sinks are all kept, and a graph with no training update falls back
// to every node and says why.
func TestDefaultFetchSynthetic(t *testing.T) {
	const vars = `
node { name: "w" op: "VarHandleOp" attr { key: "dtype" value { type: DT_FLOAT } } attr { key: "shape" value { shape { } } } }
node { name: "m" op: "VarHandleOp" attr { key: "dtype" value { type: DT_FLOAT } } attr { key: "shape" value { shape { } } } }
node { name: "zero" op: "Const" attr { key: "dtype" value { type: DT_FLOAT } } attr { key: "value" value { tensor { dtype: DT_FLOAT tensor_shape { } float_val: 0 } } } }
node { name: "w/init" op: "AssignVariableOp" input: "w" input: "zero" attr { key: "dtype" value { type: DT_FLOAT } } }
node { name: "m/init" op: "AssignVariableOp" input: "m" input: "zero" attr { key: "dtype" value { type: DT_FLOAT } } }
node { name: "init" op: "NoOp" input: "^w/init" input: "^m/init" }
node { name: "read" op: "ReadVariableOp" input: "w" attr { key: "dtype" value { type: DT_FLOAT } } }
node { name: "fetch_read" op: "ReadVariableOp" input: "m" attr { key: "dtype" value { type: DT_FLOAT } } }
node { name: "grad" op: "Mul" input: "read" input: "read" attr { key: "T" value { type: DT_FLOAT } } }
`
	const apply = `node { name: "apply_w" op: "ResourceApplyMomentum" input: "w" input: "m" input: "zero" input: "grad" input: "zero" attr { key: "T" value { type: DT_FLOAT } } }
`
	for _, tc := range []struct {
		name, pbtxt, want string
		found             bool
	}{
		{"noop sink", vars + apply + `node { name: "step" op: "NoOp" input: "^apply_w" }`, "step", true},
		{"update is the sink", vars + apply, "apply_w", true},
		{"two sinks", vars + apply + `node { name: "apply_m" op: "AssignAddVariableOp" input: "m" input: "grad" attr { key: "dtype" value { type: DT_FLOAT } } }`, "apply_w,apply_m", true},
		{"inference", vars, "", false},
	} {
		m, err := Parse([]byte(tc.pbtxt), FormatPBTXT, tc.name+".pbtxt")
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		g, err := NewGraph(m.Graph, m.Source)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		f := DefaultFetch(g)
		if strings.Join(f.Nodes, ",") != tc.want || f.Found != tc.found || f.Reason == "" {
			t.Errorf("%s: fetch %v found %v (%s), want %q found %v", tc.name, f.Nodes, f.Found, f.Reason, tc.want, tc.found)
		}
		if !tc.found && !strings.HasPrefix(f.String(), "every node of the graph (no node updates a variable") {
			t.Errorf("%s: %s", tc.name, f)
		}
	}
	if f := UserFetch(nil, []string{"x"}); f.String() != "x (--fetch)" {
		t.Errorf("user fetch: %s", f)
	}
}
