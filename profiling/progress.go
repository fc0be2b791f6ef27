package profiling

import (
	"fmt"
	"io"
	"os"
	"strings"
	"time"
)

// Progress reports how far a run of steps has come on a writer (stderr): on a terminal a
// bar redrawn in place, with the steps done, the elapsed time and the estimated time left;
// otherwise plain lines, about one per tenth of the steps, so that logs stay short.
type Progress struct {
	w        io.Writer
	terminal bool
	now      func() time.Time
	label    string
	total    int
	start    time.Time
	last     int // steps done at the last plain line
	drawn    bool
}

// NewProgress returns a progress reporter writing to w; terminal says whether w is a
// terminal (IsTerminal).
func NewProgress(w io.Writer, terminal bool) *Progress {
	return &Progress{w: w, terminal: terminal, now: time.Now}
}

// IsTerminal reports whether f is a character device (a terminal).
func IsTerminal(f *os.File) bool {
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

// Start begins a phase of total steps ("warm-up", "measured").
func (p *Progress) Start(label string, total int) {
	if p == nil {
		return
	}
	p.finishLine()
	p.label, p.total, p.start, p.last = label, total, p.now(), 0
	p.Step(0)
}

// Step reports that done of the phase's steps are done.
func (p *Progress) Step(done int) {
	if p == nil || p.total <= 0 {
		return
	}
	elapsed := p.now().Sub(p.start)
	eta := "?"
	if done > 0 {
		eta = fmtSeconds(time.Duration(float64(elapsed) / float64(done) * float64(p.total-done)))
	}
	if p.terminal {
		const width = 30
		fill := width * done / p.total
		bar := strings.Repeat("=", fill)
		if fill < width {
			bar += ">" + strings.Repeat(" ", width-fill-1)
		}
		fmt.Fprintf(p.w, "\r%-9s [%s] %d/%d  elapsed %s  ETA %s   ", p.label, bar, done, p.total, fmtSeconds(elapsed), eta)
		p.drawn = true
		return
	}
	every := max(1, p.total/10)
	if done == 0 || (done < p.total && done-p.last < every) {
		return
	}
	p.last = done
	fmt.Fprintf(p.w, "%s: %d/%d steps, elapsed %s, ETA %s\n", p.label, done, p.total, fmtSeconds(elapsed), eta)
}

// Done ends the current line of a terminal bar.
func (p *Progress) Done() {
	if p == nil {
		return
	}
	p.finishLine()
}

func (p *Progress) finishLine() {
	if p.terminal && p.drawn {
		fmt.Fprintln(p.w)
		p.drawn = false
	}
}

// fmtSeconds formats a duration to a tenth of a second.
func fmtSeconds(d time.Duration) string {
	if d >= time.Minute {
		return fmt.Sprintf("%dm%04.1fs", int(d.Minutes()), d.Seconds()-60*float64(int(d.Minutes())))
	}
	return fmt.Sprintf("%.1fs", d.Seconds())
}
