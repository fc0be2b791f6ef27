package plan

import (
	"testing"

	"github.com/tfswap/tfswap/rewrite"
)

// TestUnchangedCountsEveryGraphChange: a plan whose only changes are ordering edges, tuple
// Identities bypassed, spacers or widened gates is not unchanged. The benchmark's LSTM LM
// batch 15125 on h100 (simulated) planned "none+wbypass+space": reported as unchanged, the
// input was written back and the VirtualCluster read 104,410,963,980 B against the
// 84,011,909,120 B budget the plan fitted.
func TestUnchangedCountsEveryGraphChange(t *testing.T) {
	if !(&Planned{Result: &rewrite.Result{}}).Unchanged() {
		t.Fatal("an empty plan is not unchanged")
	}
	for name, r := range map[string]*rewrite.Result{
		"orders":   {Orders: []rewrite.OrderEdge{{Node: "a", After: "b"}}},
		"bypassed": {Bypassed: []string{"id"}},
		"spacers":  {Spacers: []rewrite.Spacer{{}}},
		"wide":     {WideGates: []string{"t"}},
	} {
		if (&Planned{Result: r}).Unchanged() {
			t.Errorf("a plan with only %s is reported unchanged", name)
		}
	}
}
