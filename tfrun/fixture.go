package tfrun

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"

	"github.com/tfswap/tfswap/internal/npy"
)

// Fixture is a training-graph fixture made by testmodels/gen.py: the sidecar JSON
// (testmodels/fixtures/NAME.json) plus the feed arrays it names, loaded.
type Fixture struct {
	Name  string        `json:"name"`
	Seed  int64         `json:"seed"`
	Batch int           `json:"batch"`
	Feeds []FixtureFeed `json:"feeds"`
	// Loss is the loss tensor ("loss:0"); TrainOp and InitOp are node names run as targets.
	Loss      string            `json:"loss"`
	TrainOp   string            `json:"train_op"`
	InitOp    string            `json:"init_op"`
	Variables []FixtureVariable `json:"variables"`
	NodeCount int               `json:"node_count"`
	// Graph is the GraphDef file; gen.py leaves it out and it defaults to NAME.pb.
	Graph string `json:"graph,omitempty"`

	// Path is the sidecar's path and Dir its directory, which the file names are relative to.
	Path, Dir string `json:"-"`
	// FeedTensors holds each feed's array, by tensor name ("input:0").
	FeedTensors map[string]*Tensor `json:"-"`
}

// FixtureFeed is one fed placeholder: the tensor name, the .npy file holding its value, and
// the dtype and shape the file must have.
type FixtureFeed struct {
	Name  string  `json:"name"`
	File  string  `json:"file"`
	DType string  `json:"dtype"`
	Shape []int64 `json:"shape"`
}

// FixtureVariable is one trainable variable: its op name and the tensor that reads its
// value off the training path ("fetch_var/0:0").
type FixtureVariable struct {
	Name  string  `json:"name"`
	Fetch string  `json:"fetch"`
	DType string  `json:"dtype"`
	Shape []int64 `json:"shape"`
}

// LoadFixture reads a fixture sidecar and its feed arrays, checking that each array has the
// dtype and shape the sidecar declares. Errors name the file at fault.
func LoadFixture(jsonPath string) (*Fixture, error) {
	raw, err := os.ReadFile(jsonPath)
	if err != nil {
		return nil, fmt.Errorf("tfrun: fixture: %w", err)
	}
	fx := &Fixture{}
	if err := json.Unmarshal(raw, fx); err != nil {
		return nil, fmt.Errorf("tfrun: fixture %s: %w", jsonPath, err)
	}
	fx.Path, fx.Dir = jsonPath, filepath.Dir(jsonPath)
	switch {
	case fx.Name == "":
		return nil, fmt.Errorf("tfrun: fixture %s: no name", jsonPath)
	case fx.Loss == "" || fx.TrainOp == "" || fx.InitOp == "":
		return nil, fmt.Errorf("tfrun: fixture %s: loss, train_op and init_op are required", jsonPath)
	}
	if fx.Graph == "" {
		fx.Graph = fx.Name + ".pb"
	}
	fx.FeedTensors = make(map[string]*Tensor, len(fx.Feeds))
	for _, f := range fx.Feeds {
		path := filepath.Join(fx.Dir, f.File)
		a, err := npy.Read(path)
		if err != nil {
			return nil, fmt.Errorf("tfrun: fixture %s: feed %s: %w", jsonPath, f.Name, err)
		}
		t, err := TensorFromNpy(a)
		if err != nil {
			return nil, fmt.Errorf("tfrun: fixture %s: feed %s (%s): %w", jsonPath, f.Name, path, err)
		}
		want, err := ParseDataType(f.DType)
		if err != nil {
			return nil, fmt.Errorf("tfrun: fixture %s: feed %s: %w", jsonPath, f.Name, err)
		}
		if t.DType != want || !sameShape(t.Shape, f.Shape) {
			return nil, fmt.Errorf("tfrun: fixture %s: feed %s: %s holds %s, the sidecar says %s%v", jsonPath, f.Name, path, t, f.DType, f.Shape)
		}
		if _, dup := fx.FeedTensors[f.Name]; dup {
			return nil, fmt.Errorf("tfrun: fixture %s: feed %s listed twice", jsonPath, f.Name)
		}
		fx.FeedTensors[f.Name] = t
	}
	return fx, nil
}

// GraphPath returns the path of the fixture's GraphDef.
func (fx *Fixture) GraphPath() string { return filepath.Join(fx.Dir, fx.Graph) }

// GraphDef returns the bytes of the fixture's GraphDef.
func (fx *Fixture) GraphDef() ([]byte, error) {
	b, err := os.ReadFile(fx.GraphPath())
	if err != nil {
		return nil, fmt.Errorf("tfrun: fixture %s: %w", fx.Name, err)
	}
	return b, nil
}

// VariableFetches returns the fetch tensor of every variable, in sidecar order.
func (fx *Fixture) VariableFetches() []string {
	names := make([]string, len(fx.Variables))
	for i, v := range fx.Variables {
		names[i] = v.Fetch
	}
	return names
}

func sameShape(a, b []int64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
