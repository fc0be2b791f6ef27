package graphdef

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// OutputError is an output path tfswap refuses to write: a directory where a file is
// expected, a socket, a non-empty directory where a SavedModel would go, an output that names
// an input. It is the user's misuse of the command line (exit status 2 in the CLI), not bad
// input.
type OutputError struct {
	Path string
	Msg  string
}

// Error returns "PATH: MSG".
func (e *OutputError) Error() string { return e.Path + ": " + e.Msg }

func refuse(path, format string, args ...any) *OutputError {
	return &OutputError{Path: path, Msg: fmt.Sprintf(format, args...)}
}

// outputKind says how a file output is written.
type outputKind int

const (
	// outAtomic: a regular file or a new path, written to a temporary file in the same
	// directory that is then renamed over it.
	outAtomic outputKind = iota
	// outStream: a FIFO or a character device (/dev/null, a terminal), opened and written
	// through; it is never replaced.
	outStream
)

// maxLinks bounds the symbolic links followed when resolving a path that does not exist yet.
const maxLinks = 40

// fileOutput returns the file to write for the output path and how to write it, or an
// *OutputError when path may not be written:
//
//   - a regular file, or a path that does not exist, is written atomically (outAtomic);
//   - a symbolic link is followed and its target written by these rules, the link kept;
//   - a FIFO or a character device is written through (outStream), never replaced;
//   - anything else (a directory, a socket, a block device) is refused.
func fileOutput(path string) (target string, kind outputKind, err error) {
	if path == "" {
		return "", 0, refuse(`""`, "empty output path")
	}
	st, err := os.Stat(path)
	switch {
	case err == nil:
	case errors.Is(err, fs.ErrNotExist):
		// A new file, or a dangling symbolic link: create the file the link names.
		t, err := followLinks(path)
		if err != nil {
			return "", 0, err
		}
		return t, outAtomic, nil
	default:
		return "", 0, &Error{File: path, Msg: "cannot write output", Err: unwrapPathError(err)}
	}
	mode := st.Mode()
	switch {
	case mode.IsRegular():
		t, err := filepath.EvalSymlinks(path)
		if err != nil {
			// A link the kernel follows but that does not name a path (/proc/self/fd/N of a
			// deleted file): write it through.
			return path, outStream, nil
		}
		return t, outAtomic, nil
	case mode&fs.ModeNamedPipe != 0, mode&fs.ModeCharDevice != 0:
		return path, outStream, nil
	case mode.IsDir():
		return "", 0, refuse(path, "is a directory; give a file name")
	case mode&fs.ModeSocket != 0:
		return "", 0, refuse(path, "is a socket; tfswap writes only regular files, FIFOs and character devices")
	case mode&fs.ModeDevice != 0:
		return "", 0, refuse(path, "is a block device; tfswap writes only regular files, FIFOs and character devices")
	}
	return "", 0, refuse(path, "is not a regular file (%v); tfswap writes only regular files, FIFOs and character devices", mode.Type())
}

// followLinks resolves the symbolic links of a path whose final target does not exist: the
// path to create. A path that is not a link is returned as it is.
func followLinks(path string) (string, error) {
	for i := 0; i < maxLinks; i++ {
		st, err := os.Lstat(path)
		if err != nil || st.Mode()&fs.ModeSymlink == 0 {
			return path, nil
		}
		t, err := os.Readlink(path)
		if err != nil {
			return "", &Error{File: path, Msg: "cannot read symbolic link", Err: unwrapPathError(err)}
		}
		if !filepath.IsAbs(t) {
			t = filepath.Join(filepath.Dir(path), t)
		}
		path = t
	}
	return "", refuse(path, "too many levels of symbolic links")
}

// CheckFileOutput checks, before any work is done, that path may be written as a file output
// (see WriteFileAtomic for the rules). It returns an *OutputError when it may not.
func CheckFileOutput(path string) error {
	_, _, err := fileOutput(path)
	return err
}

// CheckSavedModelOutput checks, before any work is done, that a SavedModel may be written to
// dir: dir must not exist, or be an empty directory (or a symbolic link to one). tfswap never
// deletes a file it did not write, so it refuses a directory that holds anything, and a file.
// The input SavedModel's own directory is the exception that Save handles (--in-place).
func CheckSavedModelOutput(dir string) error {
	_, err := savedModelTarget(dir)
	return err
}

// savedModelTarget resolves the directory a SavedModel is written to and checks it (see
// CheckSavedModelOutput).
func savedModelTarget(dir string) (string, error) {
	if dir == "" {
		return "", refuse(`""`, "empty output path")
	}
	st, err := os.Stat(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return followLinks(filepath.Clean(dir))
	case err != nil:
		return "", &Error{File: dir, Msg: "cannot write output", Err: unwrapPathError(err)}
	case !st.IsDir():
		return "", refuse(dir, "exists and is not a directory; a SavedModel is written as a directory")
	}
	t, err := filepath.EvalSymlinks(dir)
	if err != nil {
		return "", &Error{File: dir, Msg: "cannot write output", Err: unwrapPathError(err)}
	}
	f, err := os.Open(t)
	if err != nil {
		return "", &Error{File: dir, Msg: "cannot write output", Err: unwrapPathError(err)}
	}
	names, err := f.Readdirnames(1)
	f.Close()
	if len(names) > 0 {
		return "", refuse(dir, "is a directory that is not empty; tfswap writes a SavedModel only to a new or empty directory, and never deletes files it did not write (remove it or name another)")
	}
	if err != nil && !errors.Is(err, io.EOF) {
		return "", &Error{File: dir, Msg: "cannot read directory", Err: err}
	}
	return t, nil
}

// ResolvePath returns the absolute path p names with every symbolic link resolved. A path
// that does not exist (yet) is resolved through its nearest existing ancestor, and through a
// dangling link to the path the link names, so that two spellings of the same future file
// resolve to the same string.
func ResolvePath(p string) string {
	abs, err := filepath.Abs(p)
	if err != nil {
		return filepath.Clean(p)
	}
	return resolve(abs, 0)
}

func resolve(abs string, depth int) string {
	if r, err := filepath.EvalSymlinks(abs); err == nil {
		return r
	}
	if depth < maxLinks {
		if st, err := os.Lstat(abs); err == nil && st.Mode()&fs.ModeSymlink != 0 {
			if t, err := os.Readlink(abs); err == nil {
				if !filepath.IsAbs(t) {
					t = filepath.Join(filepath.Dir(abs), t)
				}
				return resolve(filepath.Clean(t), depth+1)
			}
		}
	}
	parent := filepath.Dir(abs)
	if parent == abs {
		return abs
	}
	return filepath.Join(resolve(parent, depth+1), filepath.Base(abs))
}

// SamePath reports whether a and b name the same file: the same existing file (os.SameFile,
// which also sees hard links), or the same resolved path (ResolvePath) for files that do not
// exist yet.
func SamePath(a, b string) bool {
	sa, errA := os.Stat(a)
	sb, errB := os.Stat(b)
	if errA == nil && errB == nil {
		return os.SameFile(sa, sb)
	}
	return ResolvePath(a) == ResolvePath(b)
}

// Within reports whether path p lies inside directory dir (or is dir), after resolving both
// with ResolvePath.
func Within(p, dir string) bool {
	rp, rd := ResolvePath(p), ResolvePath(dir)
	rel, err := filepath.Rel(rd, rp)
	if err != nil {
		return false
	}
	return rel == "." || (rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator)))
}

// IsStream reports whether path is a FIFO or a character device (after following links):
// an output written through, which several outputs may share.
func IsStream(path string) bool {
	st, err := os.Stat(path)
	return err == nil && st.Mode()&(fs.ModeNamedPipe|fs.ModeCharDevice) != 0
}
