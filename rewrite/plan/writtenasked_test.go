package plan

import "testing"

// TestAutoMonotoneWrittenAsked: where the written bypass may win at a tighter budget only,
// it is tried at the budget asked for too (issue 14 item 3). The ResNet fixture on v100-16gb,
// by every accounting: at 3100 KiB the written-bypass pass runs (+29.0%, simulated when this
// test was written); at 3136 KiB it does not, and the written bypass at 95% of that budget
// alone gave +32.7%. The test fails when the plan for the larger budget is slower than the one
// for the smaller, and when turning WrittenAsked off no longer makes it slower (the case would
// no longer test it).
func TestAutoMonotoneWrittenAsked(t *testing.T) {
	fixtureMonotone(t, 3100<<10, 3136<<10, &WrittenAsked, "+wbypass")
}
