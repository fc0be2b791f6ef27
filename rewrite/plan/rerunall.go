package plan

// RerunEveryStrategy says whether auto runs every strategy it requires again on a graph with
// recomputations (planRecomputeLevel), instead of only those of the two best plans that fit
// without them (rerunStrategies); tests turn it off to compare.
//
// The narrower set made auto's plan worse for a larger budget (issue 14 item 3: auto monotone
// in the budget). rerunStrategies runs every strategy again only when the best swap-only
// plan that fits is costly (more than +50%), so a better swap-only plan at a larger budget
// narrowed the search on the recomputed graph, where a strategy that did worst without
// recomputation may do best with it. On the ResNet fixture (testmodels/fixtures/resnet.pb,
// v100-16gb, --min-bytes 0, simulated at 567846e): by tfswap's accounting alone, window's
// swap-only plan cost +51.3% at 3 MiB, so every strategy ran again and lms's plan on the
// recomputed graph led to +19.7%, while at 3104 KiB window's plan cost +49.6%, only window
// and auto ran again, and the plan cost +28.8%; by every accounting, 3520 KiB gave +15.0%
// against +10.6% at 3456 KiB (window alone ran again). With every strategy run again both
// larger budgets give the smaller one's plan. ResNet-50 4x (the benchmark's 740 batch at the
// default budget) is unchanged: its best swap-only plans cost more than +50%, so every
// strategy ran again there already.
var RerunEveryStrategy = true
