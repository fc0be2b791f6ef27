package plan

import (
	"math"
	"math/rand/v2"
)

// bayesOpt is a small Bayesian optimiser over [-1, 1]^d, minimising: a Gaussian process prior
// with a squared-exponential kernel (unit signal variance on standardised observations, a
// small noise term, the length scale picked from a short list by marginal likelihood), and
// expected improvement maximised over random points and perturbations of the best point so
// far. Its random numbers come from a generator seeded by the caller, so it is deterministic.
type bayesOpt struct {
	dim int
	rng *rand.Rand
	xs  [][]float64
	ys  []float64
}

// boSeed is the seed used when PlanOptions.Seed is 0.
const boSeed = 0x7f5a_0b0c

func newBayesOpt(dim int, seed uint64) *bayesOpt {
	if seed == 0 {
		seed = boSeed
	}
	return &bayesOpt{dim: dim, rng: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))}
}

func (b *bayesOpt) observe(x []float64, y float64) {
	b.xs = append(b.xs, append([]float64(nil), x...))
	b.ys = append(b.ys, y)
}

const boNoise = 1e-6

func sqDist(a, b []float64) float64 {
	var s float64
	for i := range a {
		d := a[i] - b[i]
		s += d * d
	}
	return s
}

// gp is a fitted Gaussian process: the Cholesky factor of the kernel matrix and alpha =
// K^-1 y over standardised observations.
type gp struct {
	xs        [][]float64
	l         [][]float64
	alpha     []float64
	ls        float64
	mean, std float64
}

// fit fits the process with length scale ls and returns it with its log marginal likelihood.
func (b *bayesOpt) fit(ls float64) (*gp, float64) {
	n := len(b.xs)
	g := &gp{xs: b.xs, ls: ls}
	for _, y := range b.ys {
		g.mean += y
	}
	g.mean /= float64(n)
	for _, y := range b.ys {
		g.std += (y - g.mean) * (y - g.mean)
	}
	g.std = math.Sqrt(g.std / float64(n))
	if g.std == 0 {
		g.std = 1
	}
	y := make([]float64, n)
	for i := range y {
		y[i] = (b.ys[i] - g.mean) / g.std
	}
	k := make([][]float64, n)
	for i := range k {
		k[i] = make([]float64, n)
		for j := range k[i] {
			k[i][j] = math.Exp(-sqDist(b.xs[i], b.xs[j]) / (2 * ls * ls))
		}
		k[i][i] += boNoise + 1e-4
	}
	l := cholesky(k)
	if l == nil {
		return nil, math.Inf(-1)
	}
	g.l = l
	z := forward(l, y)
	g.alpha = backward(l, z)
	ll := 0.0
	for i := range y {
		ll -= 0.5 * y[i] * g.alpha[i]
		ll -= math.Log(l[i][i])
	}
	return g, ll
}

// predict returns the posterior mean and standard deviation at x, in observation units.
func (g *gp) predict(x []float64) (float64, float64) {
	n := len(g.xs)
	ks := make([]float64, n)
	for i := range ks {
		ks[i] = math.Exp(-sqDist(g.xs[i], x) / (2 * g.ls * g.ls))
	}
	var mu float64
	for i := range ks {
		mu += ks[i] * g.alpha[i]
	}
	v := forward(g.l, ks)
	var vv float64
	for _, e := range v {
		vv += e * e
	}
	s2 := math.Max(1+boNoise-vv, 1e-12)
	return g.mean + g.std*mu, g.std * math.Sqrt(s2)
}

// next returns the point of greatest expected improvement over the best observation.
func (b *bayesOpt) next() []float64 {
	var best *gp
	bestLL := math.Inf(-1)
	for _, ls := range []float64{0.25, 0.5, 1, 2} {
		if g, ll := b.fit(ls); g != nil && ll > bestLL {
			best, bestLL = g, ll
		}
	}
	randPoint := func() []float64 {
		x := make([]float64, b.dim)
		for i := range x {
			x[i] = 2*b.rng.Float64() - 1
		}
		return x
	}
	if best == nil {
		return randPoint()
	}
	yMin, xMin := b.ys[0], b.xs[0]
	for i, y := range b.ys {
		if y < yMin {
			yMin, xMin = y, b.xs[i]
		}
	}
	ei := func(x []float64) float64 {
		mu, sd := best.predict(x)
		if sd <= 0 {
			return 0
		}
		z := (yMin - mu) / sd
		return (yMin-mu)*normCDF(z) + sd*normPDF(z)
	}
	var arg []float64
	bestEI := -1.0
	try := func(x []float64) {
		if e := ei(x); e > bestEI {
			arg, bestEI = x, e
		}
	}
	for i := 0; i < 256; i++ {
		try(randPoint())
	}
	for i := 0; i < 64; i++ {
		x := make([]float64, b.dim)
		for j := range x {
			x[j] = math.Max(-1, math.Min(1, xMin[j]+0.2*b.rng.NormFloat64()))
		}
		try(x)
	}
	return arg
}

func normPDF(z float64) float64 { return math.Exp(-z*z/2) / math.Sqrt(2*math.Pi) }
func normCDF(z float64) float64 { return 0.5 * math.Erfc(-z/math.Sqrt2) }

// cholesky returns the lower-triangular L with L L^T = a, or nil when a is not positive
// definite.
func cholesky(a [][]float64) [][]float64 {
	n := len(a)
	l := make([][]float64, n)
	for i := range l {
		l[i] = make([]float64, n)
	}
	for i := 0; i < n; i++ {
		for j := 0; j <= i; j++ {
			s := a[i][j]
			for k := 0; k < j; k++ {
				s -= l[i][k] * l[j][k]
			}
			if i == j {
				if s <= 0 {
					return nil
				}
				l[i][i] = math.Sqrt(s)
			} else {
				l[i][j] = s / l[j][j]
			}
		}
	}
	return l
}

// forward solves L z = y.
func forward(l [][]float64, y []float64) []float64 {
	z := make([]float64, len(y))
	for i := range y {
		s := y[i]
		for k := 0; k < i; k++ {
			s -= l[i][k] * z[k]
		}
		z[i] = s / l[i][i]
	}
	return z
}

// backward solves L^T x = z.
func backward(l [][]float64, z []float64) []float64 {
	n := len(z)
	x := make([]float64, n)
	for i := n - 1; i >= 0; i-- {
		s := z[i]
		for k := i + 1; k < n; k++ {
			s -= l[k][i] * x[k]
		}
		x[i] = s / l[i][i]
	}
	return x
}
