package tune

import (
	"strings"
	"testing"

	"github.com/tfswap/tfswap/cost"
	"github.com/tfswap/tfswap/graphdef"
	"github.com/tfswap/tfswap/profiling"
	"github.com/tfswap/tfswap/profiling/fakegpu"
	sspb "github.com/wamuir/graft/tensorflow/core/framework/step_stats_go_proto"
)

// fakeGPU opens sessions whose traced step is the step fakegpu constructs for the plan on a
// V100 (step stats in the structure a GPU run produces; constructed, not measured), plus a
// temporary allocation of workspace bytes by one more node, as a convolution's scratch
// space would be. Peak reads it with profiling.GPUPeak, as the real session's Peak does.
type fakeGPU struct {
	fakeRunner
	workspace int64
	peaks     []int64 // what Peak returned, in order
}

type fakeGPUSession struct {
	fakeSession
	gpu *fakeGPU
	md  *profiling.RunMetadata
}

func (f *fakeGPU) Open(m *graphdef.Model) (Session, error) {
	s, err := f.fakeRunner.Open(m)
	if err != nil {
		return nil, err
	}
	g, err := graphdef.NewGraph(m.Graph, m.Source)
	if err != nil {
		return nil, err
	}
	p, _ := cost.LookupProfile("v100-16gb")
	st, err := fakegpu.Construct(g, p, fakegpu.Options{Fetch: []string{"train", "loss"}})
	if err != nil {
		return nil, err
	}
	if f.workspace > 0 {
		gpu := st.Metadata.GetStepStats().GetDevStats()[0]
		gpu.NodeStats = append(gpu.NodeStats, &sspb.NodeExecStats{NodeName: "workspace", Memory: []*sspb.AllocatorMemoryUsed{{
			AllocatorName: fakegpu.GPUAllocator, TotalBytes: f.workspace, PeakBytes: f.workspace,
			AllocatorBytesInUse: st.Peak + f.workspace,
			AllocationRecords:   []*sspb.AllocationRecord{{AllocMicros: 1, AllocBytes: f.workspace}, {AllocMicros: 2, AllocBytes: -f.workspace}},
		}}})
	}
	return &fakeGPUSession{fakeSession: s.(fakeSession), gpu: f, md: st.Metadata}, nil
}

func (s *fakeGPUSession) Peak() (int64, bool, error) {
	peak, _, ok := profiling.GPUPeak(s.md)
	s.gpu.peaks = append(s.gpu.peaks, peak)
	return peak, ok, nil
}

// TestTuneMeasuredPeakOnGPUSteps runs the search's GPU branch: every measured round reads
// the plan's peak from the GPU allocator's records of its traced step, and a plan whose
// measured peak is over the budget is rejected even when its steps are no slower.
func TestTuneMeasuredPeakOnGPUSteps(t *testing.T) {
	p, pr := resnetProblem(t)
	latest, _, _ := predictAt(p, pr, p.Latest())
	earliestAll, _, _ := predictAt(p, pr, p.Clamp(fill(len(p.Groups), 1<<20)))
	budget := latest.Peak + (earliestAll.Peak-latest.Peak)/2

	for _, workspace := range []int64{0, 64 << 20} {
		gpu := &fakeGPU{fakeRunner: fakeRunner{p: p}, workspace: workspace}
		var lines []string
		res, err := Tune(p, pr, gpu, Options{Budget: budget, Steps: 2, Report: func(r Round) { lines = append(lines, r.String()) }})
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("workspace %d:\n%s", workspace, strings.Join(lines, "\n"))
		measured := 0
		for _, r := range res.Rounds {
			if r.Phase != "latest" || r.Pairs == 0 {
				continue
			}
			if measured >= len(gpu.peaks) || r.MeasuredPeak != gpu.peaks[measured] || r.MeasuredPeak <= 0 {
				t.Fatalf("workspace %d: round %d measured peak %d, the GPU step's %v", workspace, r.N, r.MeasuredPeak, gpu.peaks)
			}
			measured++
			over := r.MeasuredPeak > budget
			if over && (r.Accepted || r.Note != "measured peak over budget") {
				t.Errorf("workspace %d: round %d over budget (%d > %d) but accepted %v, note %q", workspace, r.N, r.MeasuredPeak, budget, r.Accepted, r.Note)
			}
			if !over && !r.Accepted {
				t.Errorf("workspace %d: round %d within budget, no stall, rejected: %q", workspace, r.N, r.Note)
			}
		}
		if measured == 0 {
			t.Fatalf("workspace %d: no round was measured", workspace)
		}
		if workspace > 0 && !res.Final.Equal(res.Earliest) {
			t.Errorf("every plan measured over budget, yet the final triggers %v are not the earliest safe %v", res.Final, res.Earliest)
		}
	}
}
