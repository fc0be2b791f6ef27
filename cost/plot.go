package cost

import (
	"bufio"
	"fmt"
	"io"
	"math"
	"strings"
)

// PlotOptions describe a memory plot.
type PlotOptions struct {
	// Title is drawn above the plot; empty for a default naming the device and profile.
	Title string
	// Width and Height are the image size in pixels (default 960 x 480).
	Width, Height int
}

// plot geometry and series colours
const (
	plotLeft, plotRight, plotTop, plotBottom = 96.0, 28.0, 56.0, 64.0
)

var seriesColors = []string{"#4c72b0", "#dd8452", "#55a868", "#c44e52", "#8172b3"}

type pt struct{ x, y float64 }

// canvas is what the plot draws on (SVG here; the same drawing could feed a raster).
type canvas interface {
	line(x1, y1, x2, y2 float64, color string, width float64, dashed bool)
	rect(x, y, w, h float64, fill, stroke string)
	path(pts []pt, color string, width float64)
	circle(x, y, r float64, fill string)
	// text draws s with its baseline at y; anchor is "start", "middle" or "end"; vertical
	// rotates it by -90 degrees around (x, y).
	text(x, y float64, s string, size float64, anchor, color string, bold, vertical bool)
}

// WritePlotSVG draws the memory of each run's compute device (its first GPU) over the step,
// with the profile's memory size as the budget line, as an SVG image.
func WritePlotSVG(w io.Writer, runs []Run, opts PlotOptions) error {
	if opts.Width == 0 {
		opts.Width = 960
	}
	if opts.Height == 0 {
		opts.Height = 480
	}
	bw := bufio.NewWriter(w)
	c := &svgCanvas{w: bw}
	fmt.Fprintf(bw, "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" viewBox=\"0 0 %d %d\" font-family=\"DejaVu Sans, Helvetica, Arial, sans-serif\">\n", opts.Width, opts.Height, opts.Width, opts.Height)
	if err := drawPlot(c, runs, opts); err != nil {
		return err
	}
	fmt.Fprint(bw, "</svg>\n")
	return bw.Flush()
}

func drawPlot(c canvas, runs []Run, opts PlotOptions) error {
	if len(runs) == 0 {
		return fmt.Errorf("nothing to plot")
	}
	W, H := float64(opts.Width), float64(opts.Height)
	c.rect(0, 0, W, H, "#ffffff", "")
	var maxT, maxB int64
	var budget int64
	devName, profName := "", ""
	for _, r := range runs {
		tl := r.Result.Timeline
		if tl == nil {
			return fmt.Errorf("run %q was simulated without a timeline", r.Label)
		}
		d := r.Result.Compute()
		if d == nil {
			return fmt.Errorf("run %q has no GPU", r.Label)
		}
		devName = d.Name
		profName = r.Result.Profile.Name
		budget = d.MemoryLimit
		if r.Result.StepTime > maxT {
			maxT = r.Result.StepTime
		}
		if d.PeakBytes > maxB {
			maxB = d.PeakBytes
		}
	}
	if maxT <= 0 {
		maxT = 1
	}
	if maxB <= 0 {
		maxB = 1
	}
	// The budget is drawn when it is within reach of the curves; otherwise it is noted.
	top := float64(maxB) * 1.12
	budgetShown := budget > 0 && float64(budget) <= 1.6*float64(maxB)
	if budgetShown && float64(budget)*1.05 > top {
		top = float64(budget) * 1.05
	}
	yUnit, yDiv := byteUnit(top)
	yStep := niceStep(top/yDiv, 6)
	yMax := math.Ceil(top/yDiv/yStep) * yStep * yDiv
	tUnit, tDiv := timeUnit(float64(maxT))
	tStep := niceStep(float64(maxT)/tDiv, 8)
	tMax := math.Ceil(float64(maxT)/tDiv/tStep) * tStep * tDiv

	x0, x1 := plotLeft, W-plotRight
	y0, y1 := H-plotBottom, plotTop
	X := func(t float64) float64 { return x0 + (x1-x0)*t/tMax }
	Y := func(b float64) float64 { return y0 - (y0-y1)*b/yMax }

	title := opts.Title
	if title == "" {
		title = fmt.Sprintf("Memory allocated on %s over one training step (simulated, profile %s)", devName, profName)
	}
	c.text(W/2, 28, title, 16, "middle", "#222222", true, false)
	// Grid and ticks.
	for v := 0.0; v <= yMax/yDiv+1e-9; v += yStep {
		y := Y(v * yDiv)
		c.line(x0, y, x1, y, "#e5e5e5", 1, false)
		c.text(x0-8, y+4, trimNum(v), 12, "end", "#333333", false, false)
	}
	for v := 0.0; v <= tMax/tDiv+1e-9; v += tStep {
		x := X(v * tDiv)
		c.line(x, y0, x, y1, "#f0f0f0", 1, false)
		c.line(x, y0, x, y0+5, "#333333", 1, false)
		c.text(x, y0+20, trimNum(v), 12, "middle", "#333333", false, false)
	}
	c.line(x0, y0, x1, y0, "#333333", 1.2, false)
	c.line(x0, y0, x0, y1, "#333333", 1.2, false)
	c.text((x0+x1)/2, H-18, "time since the start of the step ("+tUnit+")", 13, "middle", "#222222", false, false)
	c.text(24, (y0+y1)/2, "device memory allocated ("+yUnit+")", 13, "middle", "#222222", false, true)
	// Budget.
	if budget > 0 {
		label := fmt.Sprintf("budget %s (%s memory)", fmtBytes(budget), profName)
		if budgetShown {
			y := Y(float64(budget))
			c.line(x0, y, x1, y, "#c0392b", 1.5, true)
			c.text(x1-4, y-6, label, 12, "end", "#c0392b", false, false)
		} else {
			c.text(x1-4, y1-8, label+fmt.Sprintf(": %.0fx the highest peak, above this scale", float64(budget)/float64(maxB)), 12, "end", "#c0392b", false, false)
		}
	}
	// Series.
	cols := int(x1 - x0)
	type box struct{ x0, x1, y0, y1 float64 }
	var placed []box
	if budgetShown {
		yb := Y(float64(budget))
		placed = append(placed, box{x0, x1, yb - 2, yb + 2})
	}
	overlaps := func(b box) bool {
		for _, p := range placed {
			if b.x0 < p.x1 && p.x0 < b.x1 && b.y0 < p.y1 && p.y0 < b.y1 {
				return true
			}
		}
		return false
	}
	for i, r := range runs {
		color := seriesColors[i%len(seriesColors)]
		d := r.Result.Compute()
		idx := 0
		for j, dd := range r.Result.Devices {
			if dd == d {
				idx = j
			}
		}
		pts := r.Result.Timeline.Memory[idx]
		c.path(stepPath(pts, r.Result.StepTime, cols, X, Y, tMax), color, 1.8)
		px, py := X(float64(d.PeakTime)), Y(float64(d.PeakBytes))
		c.circle(px, py, 4, color)
		label := "peak " + fmtBytes(d.PeakBytes)
		w := 7.2 * float64(len(label)) // approximate width of 12 px bold text
		anchor, dx := "start", 8.0
		if px > (x0+x1)*0.7 {
			anchor, dx = "end", -8
		}
		// Above the point if there is room, else below, further away each try.
		var lx, ly float64
		for k, dy := range []float64{-8, 20, -24, 36, -40, 52, -56, 68} {
			lx, ly = px+dx, py+dy
			bx := box{lx, lx + w, ly - 12, ly + 3}
			if anchor == "end" {
				bx.x0, bx.x1 = lx-w, lx
			}
			if !overlaps(bx) || k == 7 {
				placed = append(placed, bx)
				break
			}
		}
		c.text(lx, ly, label, 12, anchor, color, true, false)
	}
	// Legend.
	ly := y1 + 14
	lx := x0 + 14
	for i, r := range runs {
		color := seriesColors[i%len(seriesColors)]
		d := r.Result.Compute()
		c.line(lx, ly-4, lx+26, ly-4, color, 3, false)
		label := fmt.Sprintf("%s: peak %s, step %s", r.Label, fmtBytes(d.PeakBytes), fmtDuration(r.Result.StepTime))
		c.text(lx+34, ly, label, 12, "start", "#222222", false, false)
		ly += 18
	}
	return nil
}

// stepPath turns a memory series into a step curve sampled per pixel column: each column
// shows the most memory allocated during it.
func stepPath(pts []MemPoint, end int64, cols int, X, Y func(float64) float64, tMax float64) []pt {
	if len(pts) == 0 || cols <= 0 {
		return nil
	}
	colMax := make([]float64, cols+1)
	for i := range colMax {
		colMax[i] = -1
	}
	col := func(t int64) int {
		c := int(float64(t) / tMax * float64(cols))
		if c > cols {
			c = cols
		}
		if c < 0 {
			c = 0
		}
		return c
	}
	last := col(end)
	for i, p := range pts {
		next := end
		if i+1 < len(pts) {
			next = pts[i+1].T
		}
		a, b := col(p.T), col(next)
		if b > last {
			b = last
		}
		for c := a; c <= b; c++ {
			if float64(p.Bytes) > colMax[c] {
				colMax[c] = float64(p.Bytes)
			}
		}
		if float64(p.Max) > colMax[a] {
			colMax[a] = float64(p.Max)
		}
	}
	var out []pt
	prev := 0.0
	for c := 0; c <= last; c++ {
		v := colMax[c]
		if v < 0 {
			v = prev
		}
		x := X(float64(c) / float64(cols) * tMax)
		if c > 0 {
			out = append(out, pt{x, Y(prev)})
		}
		out = append(out, pt{x, Y(v)})
		prev = v
	}
	return out
}

// byteUnit picks a binary unit for an axis reaching max bytes.
func byteUnit(max float64) (string, float64) {
	switch {
	case max >= 4<<30:
		return "GiB", 1 << 30
	case max >= 4<<20:
		return "MiB", 1 << 20
	case max >= 4<<10:
		return "KiB", 1 << 10
	}
	return "bytes", 1
}

// timeUnit picks a unit for an axis reaching max nanoseconds.
func timeUnit(max float64) (string, float64) {
	switch {
	case max >= 4e9:
		return "s", 1e9
	case max >= 4e6:
		return "ms", 1e6
	case max >= 4e3:
		return "µs", 1e3
	}
	return "ns", 1
}

// niceStep returns a round tick step (1, 2 or 5 x 10^k) giving about n ticks up to max.
func niceStep(max float64, n int) float64 {
	if max <= 0 {
		return 1
	}
	raw := max / float64(n)
	p := math.Pow(10, math.Floor(math.Log10(raw)))
	for _, m := range []float64{1, 2, 5, 10} {
		if m*p >= raw {
			return m * p
		}
	}
	return 10 * p
}

func trimNum(v float64) string {
	s := fmt.Sprintf("%.3f", v)
	s = strings.TrimRight(strings.TrimRight(s, "0"), ".")
	if s == "-0" {
		s = "0"
	}
	return s
}

// fmtBytes formats a size with a binary unit ("7.89 MiB").
func fmtBytes(n int64) string {
	f := float64(n)
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.2f GiB", f/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.2f MiB", f/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", f/(1<<10))
	}
	return fmt.Sprintf("%d B", n)
}

// fmtDuration formats nanoseconds ("1.096 ms").
func fmtDuration(ns int64) string {
	f := float64(ns)
	switch {
	case ns >= 1e9:
		return fmt.Sprintf("%.3f s", f/1e9)
	case ns >= 1e6:
		return fmt.Sprintf("%.3f ms", f/1e6)
	case ns >= 1e3:
		return fmt.Sprintf("%.1f µs", f/1e3)
	}
	return fmt.Sprintf("%d ns", ns)
}

// FormatDuration formats nanoseconds for reports ("1.096 ms", "12.5 µs").
func FormatDuration(ns int64) string { return fmtDuration(ns) }

type svgCanvas struct{ w *bufio.Writer }

func svgEsc(s string) string {
	return strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;", "\"", "&quot;").Replace(s)
}

func (c *svgCanvas) line(x1, y1, x2, y2 float64, color string, width float64, dashed bool) {
	dash := ""
	if dashed {
		dash = ` stroke-dasharray="8 5"`
	}
	fmt.Fprintf(c.w, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"%s\" stroke-width=\"%.1f\"%s/>\n", x1, y1, x2, y2, color, width, dash)
}

func (c *svgCanvas) rect(x, y, w, h float64, fill, stroke string) {
	st := ""
	if stroke != "" {
		st = fmt.Sprintf(" stroke=%q", stroke)
	}
	fmt.Fprintf(c.w, "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"%s\"%s/>\n", x, y, w, h, fill, st)
}

func (c *svgCanvas) path(pts []pt, color string, width float64) {
	if len(pts) == 0 {
		return
	}
	var b strings.Builder
	for i, p := range pts {
		if i == 0 {
			fmt.Fprintf(&b, "M%.1f %.1f", p.x, p.y)
		} else {
			fmt.Fprintf(&b, "L%.1f %.1f", p.x, p.y)
		}
	}
	fmt.Fprintf(c.w, "<path d=\"%s\" fill=\"none\" stroke=\"%s\" stroke-width=\"%.1f\" stroke-linejoin=\"round\"/>\n", b.String(), color, width)
}

func (c *svgCanvas) circle(x, y, r float64, fill string) {
	fmt.Fprintf(c.w, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"%.1f\" fill=\"%s\"/>\n", x, y, r, fill)
}

func (c *svgCanvas) text(x, y float64, s string, size float64, anchor, color string, bold, vertical bool) {
	extra := ""
	if bold {
		extra += ` font-weight="bold"`
	}
	if vertical {
		extra += fmt.Sprintf(` transform="rotate(-90 %.1f %.1f)"`, x, y)
	}
	fmt.Fprintf(c.w, "<text x=\"%.1f\" y=\"%.1f\" font-size=\"%.0f\" text-anchor=\"%s\" fill=\"%s\"%s>%s</text>\n", x, y, size, anchor, color, extra, svgEsc(s))
}
