package session

import (
	"github.com/tfswap/tfswap/tfrun"
)

// Step is one training step: the tensors fed, the loss fetched, and the training op run.
type Step struct {
	// Feeds are the fed tensors, by tensor name ("input:0").
	Feeds map[string]*Tensor
	// Loss is the loss tensor fetched ("loss:0").
	Loss string
	// TrainOp is the node run as the step's target, the optimizer's update ("train").
	TrainOp string
}

// Fixture is a training graph of testmodels/ (testmodels/gen.py writes them): its GraphDef,
// its initialisation op, one training step on fixed feeds, and its trainable variables.
type Fixture struct {
	// Name is the fixture's name ("resnet") and Graph its GraphDef file.
	Name  string
	Graph string
	// InitOp is the op that initialises the variables, run once before training.
	InitOp string
	// Step is a training step on the fixture's feeds.
	Step Step
	// Variables are the tensors that read the trainable variables' values, in the
	// fixture's order, to fetch before and after training.
	Variables []string
}

// LoadFixture reads a fixture's sidecar JSON (testmodels/fixtures/NAME.json) and the .npy
// files of its feeds, checking each against the dtype and shape the sidecar declares.
// Errors name the file at fault.
func LoadFixture(path string) (*Fixture, error) {
	fx, err := tfrun.LoadFixture(path)
	if err != nil {
		return nil, err
	}
	return &Fixture{Name: fx.Name, Graph: fx.GraphPath(), InitOp: fx.InitOp,
		Step: Step{Feeds: fx.FeedTensors, Loss: fx.Loss, TrainOp: fx.TrainOp}, Variables: fx.VariableFetches()}, nil
}
