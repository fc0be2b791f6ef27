package testgraph

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Golden fails the test unless got is the content of the golden file file, showing where
// they first differ; with update it writes got to file instead (creating its folder).
func Golden(t testing.TB, file, got string, update bool) {
	t.Helper()
	if update {
		if err := os.MkdirAll(filepath.Dir(file), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(file, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(file)
	if err != nil {
		t.Fatalf("%v (the test's -update flag writes it)", err)
	}
	if got != string(want) {
		t.Errorf("the outcome differs from %s (the test's -update flag rewrites it):\n%s", file, lineDiff(string(want), got))
	}
}

// lineDiff returns the lines of want and got from the first that differs.
func lineDiff(want, got string) string {
	w, g := strings.Split(want, "\n"), strings.Split(got, "\n")
	i := 0
	for i < len(w) && i < len(g) && w[i] == g[i] {
		i++
	}
	return fmt.Sprintf("from line %d\nwant:\n%s\ngot:\n%s", i+1, strings.Join(w[i:], "\n"), strings.Join(g[i:], "\n"))
}
