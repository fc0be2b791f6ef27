package plan

// TighterWritten says whether auto tries the written bypass at the tighter budgets where it
// did not run at the budget asked for (passTighterWritten); tests turn it off to compare.
var TighterWritten = true

// passTighterWritten keeps auto monotone in the budget where the written bypass
// (passWrittenBypass) pays at a tighter budget only: its gate, a plan costlier than
// tupleOrderOverhead or none, holds at a tighter budget and not at the budget asked for, whose
// plan is then slower than the one the written bypass makes at the tighter budget. Where the
// written-bypass pass did not run, it takes the tighter budgets the tighter pass planned
// (st.tighter.runs), in order, and at each where the written bypass may win there
// (tighterWrittenWanted) it plans the input by tfswap's accounting for that budget as the
// tighter pass plans one (without the passes in tighterRetrySkips), writes that plan with the
// tuple Identities bypassed and spaces it by the budgets asked for (writtenAt). The first
// rewrite that fits them by every accounting and beats the best plan so far becomes the
// plan. The ResNet fixture (testmodels/fixtures/resnet.pb, v100-16gb, all accountings,
// simulated at 1643e41): the written bypass gave +29.0% at 3 MiB, where the plan without it
// costs more than +50%, and did not run at 3200 KiB, whose plan (window+recompute+bypass)
// was +44.6%.
func passTighterWritten(st *planState) error {
	if !TighterWritten || st.writtenRan || !writtenMay(st) {
		return nil
	}
	asked := false
	for _, r := range st.tighter.runs {
		if !tighterWrittenWanted(st.final.ev, r) {
			continue
		}
		if !asked {
			asked = true
			if err := st.writtenAsked(); err != nil {
				return err
			}
		}
		best, sub, err := st.writtenAt(r.pr.Opts, tighterRetrySkips, st.final.ev)
		if err != nil {
			return err
		}
		if best != nil {
			st.keepWritten(best, sub)
			return nil
		}
	}
	return nil
}

// tighterWrittenWanted reports whether the written bypass may beat cur, the best plan for the
// budget asked for, at r, a tighter budget the tighter pass planned: the written-bypass pass's
// gate holds there (nothing fits, or the better of r's plans is costly), and a plan of r's
// problems that fitted tfswap's accounting but not Grappler's is faster than cur
// (grapplerBound), which the written bypass, taking tfswap's choice, needs to win.
func tighterWrittenWanted(cur *Evaluation, r tighterRun) bool {
	if r.pr == nil || r.at == nil {
		return false
	}
	if ev := r.at.ev; ev != nil && ev.Fits && !costly(ev) {
		return false
	}
	return grapplerBound(cur, r.pr, r.rs)
}

// WrittenAsked says whether passTighterWritten, where the written bypass may win at a
// tighter budget, tries it at the budget asked for first (planState.writtenAsked); tests turn
// it off to compare.
var WrittenAsked = true

// writtenAsked plans the written bypass at the budget asked for, as the tighter-wbypass pass
// plans a tighter budget (writtenAt without the passes in tighterRetrySkips), and keeps its
// plan when it fits and beats the best so far; the tighter budgets' written bypass then has
// to beat it. passTighterWritten calls it where the written-bypass pass's gate held at a
// tighter budget but not at the budget asked for: the plan tfswap's accounting chooses for
// the budget asked for may be faster than a tighter budget's. The ResNet fixture
// (testmodels/fixtures/resnet.pb, v100-16gb, all accountings, --min-bytes 0, simulated at
// 41d1df9): at 3100 KiB the written-bypass pass ran (+29.0%, tfswap's plan +19.7%); at
// 3136 KiB it did not, and the written bypass at 95% of it (tfswap's plan +28.1%) gave
// +32.7%.
func (st *planState) writtenAsked() error {
	if !WrittenAsked {
		return nil
	}
	best, sub, err := st.writtenAt(st.po, tighterRetrySkips, st.final.ev)
	if err != nil || best == nil {
		return err
	}
	st.keepWritten(best, sub)
	return nil
}
