package rewrite

import (
	"testing"

	"github.com/tfswap/tfswap/graphdef"
)

// loadFixture loads the training graph testmodels/fixtures/NAME.pb.
func loadFixture(t *testing.T, name string) *graphdef.Model {
	t.Helper()
	m, err := graphdef.Load("../testmodels/fixtures/"+name+".pb", graphdef.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return m
}
