package fakegpu

import (
	"fmt"
	"github.com/tfswap/tfswap/rewrite/plan"
	"os"
	"path/filepath"

	"github.com/tfswap/tfswap/graphdef"
	"github.com/tfswap/tfswap/rewrite"
	cpb "github.com/wamuir/graft/tensorflow/core/protobuf/for_core_protos_go_proto"
	"google.golang.org/protobuf/encoding/prototext"
)

// Case is one of the constructed steps kept in testdata/: the step of the CNN fixture
// (testmodels/fixtures/cnn.pb), unswapped or swapped by tfswap's LMS rewrite.
type Case struct {
	// File is the step stats' file name in testdata/.
	File string
	// Swapped says whether the graph is the rewrite (SwappedOptions) of the fixture.
	Swapped bool
}

// Testdata lists the constructed steps kept in testdata/.
func Testdata() []Case {
	return []Case{{File: "cnn_gpu_step.pbtxt"}, {File: "cnn_swapped_gpu_step.pbtxt", Swapped: true}}
}

// SwappedOptions are the rewrite options of the swapped case: every tensor may be swapped
// (the fixture's are small) by consumers 4 levels away.
func SwappedOptions() rewrite.Options {
	return rewrite.Options{MinTensorBytes: -1, SwapoutThreshold: 4}
}

// Graph loads the case's graph; root is the repository's root directory.
func (c Case) Graph(root string) (*graphdef.Graph, error) {
	path := filepath.Join(root, "testmodels", "fixtures", "cnn.pb")
	m, err := graphdef.Load(path, graphdef.LoadOptions{})
	if err != nil {
		return nil, err
	}
	if c.Swapped {
		r, err := plan.Rewrite(m, SwappedOptions())
		if err != nil {
			return nil, fmt.Errorf("fakegpu: rewriting %s: %w", path, err)
		}
		if len(r.Swaps) == 0 {
			return nil, fmt.Errorf("fakegpu: the rewrite of %s swapped nothing", path)
		}
		m = r.Model
	}
	return graphdef.NewGraph(m.Graph, path)
}

// Path returns the case's step stats file; root is the repository's root directory.
func (c Case) Path(root string) string {
	return filepath.Join(root, "profiling", "fakegpu", "testdata", c.File)
}

// MarshalText writes RunMetadata as a text proto, deterministically.
func MarshalText(md *cpb.RunMetadata) ([]byte, error) {
	b, err := prototext.MarshalOptions{Multiline: true, Indent: "  "}.Marshal(md)
	if err != nil {
		return nil, err
	}
	return append([]byte("# Constructed by profiling/fakegpu, not recorded: see README.md.\n"), b...), nil
}

// LoadMetadata reads a RunMetadata text proto.
func LoadMetadata(path string) (*cpb.RunMetadata, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	md := &cpb.RunMetadata{}
	if err := prototext.Unmarshal(b, md); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return md, nil
}
