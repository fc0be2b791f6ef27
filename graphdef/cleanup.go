package graphdef

import (
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"
)

// temps is the registry of the temporary files and directories being written, removed when
// the process is interrupted (SIGINT, SIGTERM, SIGHUP) so that an interrupted write leaves
// nothing behind. The signals are caught only while something is registered; otherwise they
// have their default effect.
var temps struct {
	sync.Mutex
	paths   map[string]bool
	active  int // writes under way
	ch      chan os.Signal
	started bool
}

// cleanupSignals are the signals that remove the registered temporaries before the process
// dies.
var cleanupSignals = []os.Signal{syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP}

// watchSignals starts catching the cleanup signals; it is called before a temporary is
// created, so that no signal between its creation and its registration is missed.
// The returned function registers the temporary's path once it exists.
func watchSignals() (register func(path string), done func()) {
	temps.Lock()
	defer temps.Unlock()
	if !temps.started {
		temps.started = true
		temps.paths = map[string]bool{}
		temps.ch = make(chan os.Signal, 1)
		go onSignal()
	}
	if temps.active == 0 {
		signal.Notify(temps.ch, cleanupSignals...)
	}
	temps.active++
	var mine string
	register = func(path string) {
		temps.Lock()
		defer temps.Unlock()
		mine = path
		temps.paths[path] = true
	}
	done = func() {
		temps.Lock()
		defer temps.Unlock()
		if mine != "" {
			delete(temps.paths, mine)
		}
		temps.active--
		if temps.active == 0 {
			signal.Stop(temps.ch)
		}
	}
	return register, done
}

// onSignal removes the registered temporaries when a cleanup signal arrives, then lets the
// signal take its default effect, so that the process dies of it (its parent sees the
// signal); should it survive, it exits with status 128 + the signal's number.
func onSignal() {
	for sig := range temps.ch {
		temps.Lock()
		for p := range temps.paths {
			os.RemoveAll(p)
		}
		signal.Reset(sig)
		if s, ok := sig.(syscall.Signal); ok {
			syscall.Kill(os.Getpid(), s)
			time.Sleep(100 * time.Millisecond)
			os.Exit(128 + int(s))
		}
		os.Exit(1)
	}
}

// testHookTempCreated, when set (by tests), is called with the path of a temporary file or
// directory right after it is registered for removal, before anything is written to it.
var testHookTempCreated func(path string)
