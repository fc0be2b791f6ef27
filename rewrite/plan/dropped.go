package plan

import (
	"fmt"
	"testing"
)

// StrictPasses says whether an internal error in a pass that only adds candidates (the
// written bypass) fails the rewrite. Under go test it does, so that such errors fail the
// tests; otherwise the candidate is dropped, the plan is the best found without it, and the
// rewrite's report warns of the error (Planned.Dropped), as a Grappler optimizer that fails
// leaves the graph to the next one.
var StrictPasses = testing.Testing()

// dropPass returns err when StrictPasses holds; otherwise it records in st that what was
// dropped on err and returns nil.
func (st *planState) dropPass(what string, err error) error {
	if StrictPasses {
		return err
	}
	st.dropped = append(st.dropped, fmt.Sprintf("%s was dropped: %v", what, err))
	return nil
}
