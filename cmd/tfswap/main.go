// Command tfswap rewrites TensorFlow training graphs so that tensors idle on the GPU between
// their forward and backward use are swapped out to host memory and swapped back in just in
// time.
//
// Exit status: 0 on success; 1 when the input is bad (unreadable, empty or invalid graph, a
// plan that cannot be made); 2 on a usage error (unknown command or flag, bad or empty option
// value, a refused output path); 3 on an internal error (a bug in tfswap, a recovered panic).
// The rewrite command is built on the tfswap package (the module's root), whose error kinds
// map to them: ErrBadInput, ErrNoFit and ErrWriteFailed to 1, ErrBadOptions and
// ErrRefusedOutput to 2, ErrInternal to 3.
//
// Outputs are written by graphdef.WriteFileAtomic's rules: a regular file or a new path
// atomically (temporary file and rename in the same directory), through a symbolic link to
// its target, a FIFO or character device written through, anything else refused; a
// SavedModel only into a new or empty directory. Every output must differ from every input and
// from the other outputs, compared as resolved files.
//
// The commands that run graphs in TensorFlow (train, profile, tune) need the TensorFlow
// runtime. A tfswap built without it (the default, and bin/tfswap of make setup, which then
// never loads TensorFlow) runs them with tfswap-runtime, built with -tags tensorflow, from its
// own directory or from $TFSWAP_RUNTIME, as a child process whose TensorFlow log is silenced
// unless -v is given.
package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"runtime/debug"
	"sort"
	"strings"

	"github.com/tfswap/tfswap"
	"github.com/tfswap/tfswap/graphdef"
	"github.com/urfave/cli/v2"
)

// commands holds the subcommands; each file registers its own in init.
var commands []*cli.Command

func register(c *cli.Command) { commands = append(commands, c) }

// usageError marks an error as the user's misuse of the command line (exit status 2).
type usageError struct{ msg string }

func (e usageError) Error() string { return e.msg }

func usagef(format string, args ...any) error { return usageError{fmt.Sprintf(format, args...)} }

// internalError marks an error as a bug in tfswap (exit status 3).
type internalError struct{ msg string }

func (e internalError) Error() string { return e.msg }

func internalf(format string, args ...any) error {
	return internalError{fmt.Sprintf(format, args...)}
}

// Exit statuses.
const (
	exitOK       = 0
	exitBadInput = 1
	exitUsage    = 2
	exitInternal = 3
)

// verboseFlag is -v/--verbose, which every command takes: with it, an internal error prints
// its stack and TensorFlow's log is not silenced (rewrite also lists every swap).
func verboseFlag() cli.Flag {
	return &cli.BoolFlag{Name: "verbose", Aliases: []string{"v"}, Usage: "say more: rewrite lists every swap; an internal error prints its stack; TensorFlow logs"}
}

// hasFlag reports whether a command defines the flag name.
func hasFlag(c *cli.Command, name string) bool {
	for _, f := range c.Flags {
		for _, n := range f.Names() {
			if n == name {
				return true
			}
		}
	}
	return false
}

// refuseEmptyValues refuses a string option given an empty value (--budget "", -o ""), which
// would otherwise silently mean its default.
func refuseEmptyValues(c *cli.Context) error {
	for _, f := range c.Command.Flags {
		var vals []string
		name := f.Names()[0]
		switch f.(type) {
		case *cli.StringFlag:
			vals = []string{c.String(name)}
		case *cli.StringSliceFlag:
			vals = c.StringSlice(name)
			if len(vals) == 0 {
				vals = []string{""}
			}
		default:
			continue
		}
		if !c.IsSet(name) {
			continue
		}
		for _, v := range vals {
			if strings.TrimSpace(v) == "" {
				return usagef("%s: empty value", flagNames(f))
			}
		}
	}
	return nil
}

// flagNames spells a flag's names as the user may have typed them: "--output (-o)".
func flagNames(f cli.Flag) string {
	names := f.Names()
	s := "--" + names[0]
	for _, a := range names[1:] {
		if len(a) == 1 {
			s += " (-" + a + ")"
		} else {
			s += " (--" + a + ")"
		}
	}
	return s
}

func newApp(stdin io.Reader, stdout, stderr io.Writer) *cli.App {
	sort.Slice(commands, func(i, j int) bool { return commands[i].Name < commands[j].Name })
	app := &cli.App{
		Name:      "tfswap",
		Usage:     "train TensorFlow models larger than GPU memory by swapping tensors to host memory",
		UsageText: "tfswap command [options] model",
		Description: "tfswap rewrites a TensorFlow GraphDef (.pb, .pbtxt or SavedModel directory): tensors that sit\n" +
			"idle on the GPU between their forward and backward use are swapped out to host memory by a\n" +
			"CPU-pinned Identity and swapped back in before their consumer runs, gated by a trigger op.",
		Commands:        commands,
		Reader:          stdin,
		Writer:          stdout,
		ErrWriter:       stderr,
		HideHelpCommand: true,
		Flags:           []cli.Flag{verboseFlag()},
		ExitErrHandler:  func(*cli.Context, error) {},
		OnUsageError: func(_ *cli.Context, err error, _ bool) error {
			return usageError{err.Error()}
		},
	}
	for _, c := range commands {
		if c.OnUsageError == nil {
			c.OnUsageError = func(_ *cli.Context, err error, _ bool) error { return usageError{err.Error()} }
		}
		if !c.SkipFlagParsing && !hasFlag(c, "verbose") {
			c.Flags = append(c.Flags, verboseFlag())
		}
		if c.Before == nil {
			c.Before = refuseEmptyValues
		}
	}
	return app
}

// run runs the command line args and returns the exit status. A panic is recovered here and
// reported in one line as an internal error (exit status 3), with its stack only under -v.
func run(args []string, stdin io.Reader, stdout, stderr io.Writer) (code int) {
	verbose := verboseArg(args)
	defer func() {
		if r := recover(); r != nil {
			if verbose {
				fmt.Fprintf(stderr, "tfswap: internal error: %v (please report it, with this stack)\n%s", r, debug.Stack())
			} else {
				fmt.Fprintf(stderr, "tfswap: internal error: %v (please report; -v for the stack)\n", r)
			}
			code = exitInternal
		}
	}()
	app := newApp(stdin, stdout, stderr)
	if len(args) < 2 {
		app.Run(append(args[:1:1], "--help"))
		return exitUsage
	}
	args = commandFirst(args)
	if i, name := commandOf(args); i > 0 && !knownCommand(app, name) {
		fmt.Fprintf(stderr, "tfswap: unknown command %q (commands: %s)\n(see 'tfswap --help')\n", name, strings.Join(commandNames(app), ", "))
		return exitUsage
	}
	return exitStatus(app.Run(interspersed(app, args)), stderr, verbose)
}

// exitStatus prints err, if any, and returns the exit status it calls for; verbose prints
// the stack of a panic the tfswap package recovered.
func exitStatus(err error, stderr io.Writer, verbose bool) int {
	if err == nil {
		return exitOK
	}
	var ue usageError
	if errors.As(err, &ue) || errors.Is(err, tfswap.ErrBadOptions) {
		fmt.Fprintf(stderr, "tfswap: %v\n(see 'tfswap --help' or 'tfswap COMMAND --help')\n", err)
		return exitUsage
	}
	var oe *graphdef.OutputError
	if errors.As(err, &oe) || errors.Is(err, tfswap.ErrRefusedOutput) {
		fmt.Fprintf(stderr, "tfswap: %v\n", err)
		return exitUsage
	}
	var tie *tfswap.InternalError
	if errors.As(err, &tie) {
		switch {
		case tie.Stack != nil && verbose:
			fmt.Fprintf(stderr, "tfswap: internal error: %v (please report it, with this stack)\n%s", tie.Value, tie.Stack)
		case tie.Stack != nil:
			fmt.Fprintf(stderr, "tfswap: internal error: %v (please report; -v for the stack)\n", tie.Value)
		default:
			fmt.Fprintf(stderr, "tfswap: %v (please report)\n", err)
		}
		return exitInternal
	}
	var ie internalError
	if errors.As(err, &ie) {
		fmt.Fprintf(stderr, "tfswap: internal error: %v (please report)\n", err)
		return exitInternal
	}
	if isUsageMessage(err) {
		fmt.Fprintf(stderr, "tfswap: %v\n(see 'tfswap --help')\n", err)
		return exitUsage
	}
	var ec cli.ExitCoder
	if errors.As(err, &ec) {
		if msg := err.Error(); msg != "" {
			fmt.Fprintf(stderr, "tfswap: %s\n", msg)
		}
		return ec.ExitCode()
	}
	fmt.Fprintf(stderr, "tfswap: %v\n", err)
	return exitBadInput
}

// isGlobalVerbose reports whether a is the global -v/--verbose flag.
func isGlobalVerbose(a string) bool {
	switch a {
	case "-v", "--v", "-verbose", "--verbose", "-v=true", "--v=true", "-verbose=true", "--verbose=true":
		return true
	}
	return false
}

// verboseArg reports whether -v/--verbose appears among args before "--".
func verboseArg(args []string) bool {
	for _, a := range args[1:] {
		if a == "--" {
			break
		}
		if isGlobalVerbose(a) {
			return true
		}
	}
	return false
}

// commandOf returns the command word of args and its index: the first argument after the
// global -v flags; 0 and "" when there is none (only flags, such as --help).
func commandOf(args []string) (int, string) {
	for i := 1; i < len(args); i++ {
		a := args[i]
		if isGlobalVerbose(a) {
			continue
		}
		if strings.HasPrefix(a, "-") {
			return 0, ""
		}
		return i, a
	}
	return 0, ""
}

// commandFirst moves global -v flags given before the command after it, where every command
// takes -v: "tfswap -v rewrite m.pb" is "tfswap rewrite -v m.pb".
func commandFirst(args []string) []string {
	i, name := commandOf(args)
	if i <= 1 {
		return args
	}
	out := []string{args[0], name}
	out = append(out, args[1:i]...)
	return append(out, args[i+1:]...)
}

func knownCommand(app *cli.App, name string) bool {
	if name == "help" {
		return true
	}
	for _, c := range app.Commands {
		if c.HasName(name) {
			return true
		}
	}
	return false
}

func commandNames(app *cli.App) []string {
	var names []string
	for _, c := range app.Commands {
		if !c.Hidden {
			names = append(names, c.Name)
		}
	}
	return names
}

// isUsageMessage recognises the errors urfave/cli returns for an unknown command or a
// missing required flag without calling OnUsageError.
func isUsageMessage(err error) bool {
	msg := err.Error()
	for _, p := range []string{"No help topic for", "Required flag", "flag provided but not defined", "invalid value"} {
		if strings.Contains(msg, p) {
			return true
		}
	}
	return false
}

// interspersed lets flags follow the model argument ("tfswap rewrite model.pb -o out.pb"),
// which Go's flag parsing does not allow: it moves the command's flags, with their values,
// in front of its positional arguments. Everything after "--" stays positional.
func interspersed(app *cli.App, args []string) []string {
	if len(args) < 3 {
		return args
	}
	var cmd *cli.Command
	for _, c := range app.Commands {
		if c.HasName(args[1]) {
			cmd = c
		}
	}
	if cmd == nil {
		return args
	}
	takesValue := map[string]bool{}
	for _, f := range cmd.Flags {
		_, isBool := f.(*cli.BoolFlag)
		for _, name := range f.Names() {
			takesValue[name] = !isBool
		}
	}
	var flags, positional []string
	rest := args[2:]
	for i := 0; i < len(rest); i++ {
		a := rest[i]
		if a == "--" {
			positional = append(positional, rest[i+1:]...)
			break
		}
		if len(a) < 2 || a[0] != '-' {
			positional = append(positional, a)
			continue
		}
		flags = append(flags, a)
		name := strings.TrimLeft(a, "-")
		if strings.Contains(name, "=") {
			continue
		}
		if takesValue[name] && i+1 < len(rest) {
			flags = append(flags, rest[i+1])
			i++
		}
	}
	out := append([]string{args[0], args[1]}, flags...)
	if len(positional) > 0 {
		out = append(out, "--")
		out = append(out, positional...)
	}
	return out
}

func main() {
	if os.Getenv("GOGC") == "" {
		boundGC()
	}
	if !haveRuntime {
		if _, name := commandOf(os.Args); runtimeCommands[name] {
			code, ran, err := delegate(os.Args)
			if err != nil {
				fmt.Fprintf(os.Stderr, "tfswap: %v\n", err)
				os.Exit(exitBadInput)
			}
			if ran {
				os.Exit(code)
			}
			// No runtime binary: the command says how to get one.
		}
	}
	stop := startProfiles()
	code := run(os.Args, os.Stdin, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}
