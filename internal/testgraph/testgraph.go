// Package testgraph loads the committed test graphs (testmodels/...) for the tests of other
// packages: the model as graphdef.Load reads it and its indexed graph view.
package testgraph

import (
	"testing"

	"github.com/tfswap/tfswap/graphdef"
)

// Load reads the GraphDef at path with graphdef's default load options and indexes it,
// failing the test on any error. It returns the model (for rewrites) and its graph view.
func Load(t testing.TB, path string) (*graphdef.Model, *graphdef.Graph) {
	t.Helper()
	m, err := graphdef.Load(path, graphdef.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	g, err := graphdef.NewGraph(m.Graph, path)
	if err != nil {
		t.Fatal(err)
	}
	return m, g
}

// Parse parses text as a GraphDef in text format named name and indexes it, failing the
// test on any error. It returns the model and its graph view.
func Parse(t testing.TB, text, name string) (*graphdef.Model, *graphdef.Graph) {
	t.Helper()
	m, err := graphdef.Parse([]byte(text), graphdef.FormatPBTXT, name)
	if err != nil {
		t.Fatal(err)
	}
	g, err := graphdef.NewGraph(m.Graph, name)
	if err != nil {
		t.Fatal(err)
	}
	return m, g
}
