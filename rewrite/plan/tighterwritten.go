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
	for _, r := range st.tighter.runs {
		if !tighterWrittenWanted(st.final.ev, r) {
			continue
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
