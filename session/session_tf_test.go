//go:build tensorflow

package session_test

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tfswap/tfswap"
	"github.com/tfswap/tfswap/session"
	"github.com/tfswap/tfswap/tfrun"
)

// TestMain makes the test process run with TensorFlow's oneDNN optimizations off (it
// re-executes itself with TF_ENABLE_ONEDNN_OPTS=0 when the variable is unset), so that the
// losses of two graphs compare to the bit.
func TestMain(m *testing.M) {
	if err := tfrun.ReexecWithOneDNNOff(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	os.Exit(m.Run())
}

// TestTwoDeviceSession: the emulation's session has CPU:0 and CPU:1; a rewritten fixture
// trains to the unswapped graph's losses, bit for bit, and its traced step carries exactly
// the report's swap-outs (but those of fed tensors, which arrive on the host) and swap-ins
// between the devices; TensorFlow's failures are
// *session.Error naming the node.
func TestTwoDeviceSession(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts tfswap.Options
	}{
		{"resnet", tfswap.Options{Budget: 6 << 20, Fetch: []string{"train"}}},
		{"cnn", tfswap.Options{Strategy: "lms-fixed", NoMinTensorBytes: true}},
	} {
		m, err := tfswap.Load(filepath.Join("..", "testmodels", "fixtures", tc.name+".pb"))
		if err != nil {
			t.Fatal(err)
		}
		placed, err := m.Place("/device:CPU:1")
		if err != nil {
			t.Fatal(err)
		}
		tc.opts.ComputeDevice = "/device:CPU:1"
		res, err := tfswap.Plan(placed, tc.opts)
		if err != nil {
			t.Fatal(err)
		}
		swapIns := 0
		for _, s := range res.Report.Swaps {
			swapIns += len(s.SwapIns)
		}
		if len(res.Report.Swaps) == 0 {
			t.Fatalf("%s: nothing swapped with %+v", tc.name, tc.opts)
		}
		fx, err := session.LoadFixture(filepath.Join("..", "testmodels", "fixtures", tc.name+".json"))
		if err != nil {
			t.Fatal(err)
		}
		var losses [2][]float64
		for i, model := range []*tfswap.Model{placed, res.Model} {
			s, err := session.Open(model, session.Config{TwoDevice: true})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			devs, err := s.Devices()
			if err != nil || len(devs) != 2 || !strings.HasSuffix(devs[0].Name, "CPU:0") || !strings.HasSuffix(devs[1].Name, "CPU:1") {
				t.Fatalf("%s: devices %+v, %v", tc.name, devs, err)
			}
			if _, err := s.Run(nil, nil, fx.InitOp); err != nil {
				t.Fatal(err)
			}
			if losses[i], err = s.Train(fx.Step, 3); err != nil {
				t.Fatal(err)
			}
			st, err := s.TraceStep(fx.Step)
			if err != nil {
				t.Fatal(err)
			}
			wantOut, wantIn := 0, 0
			if i == 1 {
				// A fed tensor comes to the session on the host (an _Arg on CPU:0): its
				// swap-out copies nothing across.
				for _, s := range res.Report.Swaps {
					if fx.Step.Feeds[s.Tensor] == nil {
						wantOut++
					}
				}
				wantIn = swapIns
			}
			if st.SwapOuts != wantOut || st.SwapIns != wantIn || st.ToHost < wantOut || st.ToDevice < wantIn+len(fx.Step.Feeds) {
				t.Errorf("%s graph %d: %d swap-outs and %d swap-ins crossed (of %d and %d transfers), want %d and %d",
					tc.name, i, st.SwapOuts, st.SwapIns, st.ToHost, st.ToDevice, wantOut, wantIn)
			}
			if len(st.Devices) != 2 || !st.Devices[1].Compute || st.Devices[1].PeakBytes <= 0 || !st.Devices[1].Shared {
				t.Errorf("%s graph %d: devices %+v", tc.name, i, st.Devices)
			}
		}
		for j := range losses[0] {
			if math.Float64bits(losses[0][j]) != math.Float64bits(losses[1][j]) {
				t.Errorf("%s: step %d: loss %v, unswapped %v", tc.name, j+1, losses[1][j], losses[0][j])
			}
		}
	}

	s, err := session.OpenGraphDef(nil, session.Config{TwoDevice: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	_, err = s.Run(nil, []string{"nowhere:0"})
	if err == nil || !strings.Contains(err.Error(), "nowhere") {
		t.Errorf("fetching a missing node: %v", err)
	}
	if _, err := s.Train(session.Step{}, 1); err == nil {
		t.Error("a step without loss or training op ran")
	}
}

// TestVisibleGPUsWithRuntime: the runtime lists the GPUs it sees (none on a machine without
// one), in tfswap's form.
func TestVisibleGPUsWithRuntime(t *testing.T) {
	gpus, err := session.VisibleGPUs()
	if err != nil {
		t.Fatal(err)
	}
	for _, g := range gpus {
		if g.MemoryBytes <= 0 || g.Device == "" {
			t.Errorf("GPU %+v", g)
		}
	}
	t.Logf("%d GPUs", len(gpus))
}
