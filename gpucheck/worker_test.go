//go:build tensorflow

package gpucheck

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/tfswap/tfswap/graphdef"
	"github.com/tfswap/tfswap/profiling/fakegpu"
	"github.com/tfswap/tfswap/tfrun"
	cpb "github.com/wamuir/graft/tensorflow/core/protobuf/for_core_protos_go_proto"
	"google.golang.org/protobuf/proto"
)

// TestMain runs the tests with TensorFlow's oneDNN rewrites off, as the deterministic
// workers run (ProcessRunner sets TF_ENABLE_ONEDNN_OPTS=0 for them).
func TestMain(m *testing.M) {
	if err := tfrun.ReexecWithOneDNNOff(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	os.Exit(m.Run())
}

// TestWorkOnCPU runs the worker's code in this process on the real runtime (CPU only here):
// the CNN fixture and its swapped rewrite train to bit-identical losses and variables, the
// traced step is written, and a CPU step has no GPU allocator to measure.
func TestWorkOnCPU(t *testing.T) {
	dir := t.TempDir()
	fx, err := tfrun.LoadFixture(filepath.Join("..", "testmodels", "fixtures", "cnn.json"))
	if err != nil {
		t.Fatal(err)
	}
	sw := fakegpu.Testdata()[1]
	g, err := sw.Graph("..")
	if err != nil {
		t.Fatal(err)
	}
	swapped := filepath.Join(dir, "cnn.swap.pb")
	if err := (&graphdef.Model{Graph: g.Def, Source: swapped}).Save(swapped, graphdef.SaveOptions{}); err != nil {
		t.Fatal(err)
	}
	var results []*RunResult
	for i, path := range []string{fx.GraphPath(), swapped} {
		spec := RunSpec{Label: fmt.Sprint(i), Graph: path, Init: fx.InitOp, Train: fx.TrainOp, Loss: fx.Loss,
			Variables: fx.VariableFetches(), Seed: DefaultSeed, Warmup: 1, Steps: 3, Deterministic: true, Trace: true,
			TraceFile: filepath.Join(dir, fmt.Sprintf("%d.runmeta.pb", i))}
		res, err := Work(spec)
		if err != nil {
			t.Fatal(err)
		}
		if res.Status != StatusRan || len(res.StepNS) != 3 || len(res.LossDigests) != 3 || len(res.VariableDigests) != len(fx.Variables) || res.Measurement != nil || len(res.Devices) == 0 {
			t.Fatalf("%s: %+v", path, res)
		}
		b, err := os.ReadFile(spec.TraceFile)
		if err != nil {
			t.Fatal(err)
		}
		md := &cpb.RunMetadata{}
		if err := proto.Unmarshal(b, md); err != nil || len(md.GetStepStats().GetDevStats()) == 0 {
			t.Errorf("trace file: %v, %d devices", err, len(md.GetStepStats().GetDevStats()))
		}
		results = append(results, res)
	}
	id := &Identity{}
	var vars []Variable
	for _, v := range fx.Variables {
		vars = append(vars, Variable{Name: v.Name, Fetch: v.Fetch})
	}
	id.compare(results[0], results[1], vars)
	if id.Status != IdentityIdentical {
		t.Errorf("the swapped CNN is not bit-identical on CPU: %+v", id)
	}
	// A failure inside TensorFlow (the train op run as the init op, unfed and uninitialised) is
	// a result, not an error.
	res, err := Work(RunSpec{Label: "bad", Graph: fx.GraphPath(), Init: fx.TrainOp, Train: fx.TrainOp, Loss: fx.Loss, Steps: 1})
	if err != nil || res.Status != StatusFailed || res.Code == "" {
		t.Errorf("bad target: %+v, %v", res, err)
	}
}
