package tfswap

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

// fieldDocPackages are the packages whose exported struct fields must be documented too: the
// facade and the session package, whose documentation is what a Go user reads first.
var fieldDocPackages = map[string]bool{".": true, "session": true}

// TestExportedIdentifiersHaveDocs is the module's doc check: every package has a package
// comment, and every exported identifier of every package (functions, methods of exported
// types, types, constants and variables; in any build, the "tensorflow" tag's files
// included) has a doc comment, which for a function, method or type begins with its name
// (a type's may begin "A", "An" or "The" first), as go doc shows them. In the facade and the
// session package every exported struct field is documented as well, by its own comment or
// by the comment of the fields it is declared with.
func TestExportedIdentifiersHaveDocs(t *testing.T) {
	fset := token.NewFileSet()
	var problems []string
	pkgDoc := map[string]bool{}
	dirs := map[string]bool{}
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if path != "." && (strings.HasPrefix(d.Name(), ".") || strings.HasPrefix(d.Name(), "_") || d.Name() == "testdata" || d.Name() == "vendor") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.ParseComments)
		if err != nil {
			return err
		}
		dir := filepath.Dir(path)
		dirs[dir] = true
		if f.Doc != nil {
			pkgDoc[dir] = true
		}
		problems = append(problems, fileDocProblems(fset, f, fieldDocPackages[dir])...)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for dir := range dirs {
		if !pkgDoc[dir] {
			problems = append(problems, dir+": no package comment")
		}
	}
	if len(dirs) < 10 {
		t.Fatalf("only %d packages found: the walk missed the module", len(dirs))
	}
	sort.Strings(problems)
	for _, p := range problems {
		t.Error(p)
	}
}

// fileDocProblems returns the undocumented exported identifiers of one file.
func fileDocProblems(fset *token.FileSet, f *ast.File, fields bool) []string {
	var out []string
	bad := func(pos token.Pos, format string, args ...any) {
		out = append(out, fset.Position(pos).String()+": "+sprintf(format, args...))
	}
	startsWith := func(doc *ast.CommentGroup, name string, articles bool) bool {
		text := doc.Text()
		if articles {
			for _, a := range []string{"A ", "An ", "The "} {
				text = strings.TrimPrefix(text, a)
			}
		}
		rest, ok := strings.CutPrefix(text, name)
		return ok && (rest == "" || strings.ContainsAny(rest[:1], " ,.'\n"))
	}
	for _, decl := range f.Decls {
		switch d := decl.(type) {
		case *ast.FuncDecl:
			if !d.Name.IsExported() || (d.Recv != nil && !exportedReceiver(d.Recv)) {
				continue
			}
			switch {
			case d.Doc == nil:
				bad(d.Pos(), "%s has no doc comment", d.Name.Name)
			case !startsWith(d.Doc, d.Name.Name, false):
				bad(d.Pos(), "the doc comment of %s does not begin with its name", d.Name.Name)
			}
		case *ast.GenDecl:
			for _, spec := range d.Specs {
				switch s := spec.(type) {
				case *ast.TypeSpec:
					if !s.Name.IsExported() {
						continue
					}
					doc := s.Doc
					if doc == nil && len(d.Specs) == 1 {
						doc = d.Doc
					}
					switch {
					case doc == nil && d.Doc == nil:
						bad(s.Pos(), "type %s has no doc comment", s.Name.Name)
					case doc != nil && !startsWith(doc, s.Name.Name, true):
						bad(s.Pos(), "the doc comment of type %s does not begin with its name", s.Name.Name)
					}
					if st, ok := s.Type.(*ast.StructType); ok && fields {
						out = append(out, fieldProblems(fset, s.Name.Name, st)...)
					}
				case *ast.ValueSpec:
					for _, n := range s.Names {
						if n.IsExported() && s.Doc == nil && s.Comment == nil && d.Doc == nil {
							bad(n.Pos(), "%s has no doc comment", n.Name)
						}
					}
				}
			}
		}
	}
	return out
}

// fieldProblems returns the undocumented exported fields of a struct. A field without a
// comment of its own is documented by the nearest comment above it in the same run of
// fields when that comment names it.
func fieldProblems(fset *token.FileSet, typ string, st *ast.StructType) []string {
	var out []string
	var last *ast.CommentGroup
	for _, f := range st.Fields.List {
		if f.Doc != nil {
			last = f.Doc
		}
		for _, n := range f.Names {
			if !n.IsExported() || f.Doc != nil || f.Comment != nil {
				continue
			}
			if last == nil || !strings.Contains(last.Text(), n.Name) {
				out = append(out, fset.Position(n.Pos()).String()+": field "+typ+"."+n.Name+" has no doc comment")
			}
		}
	}
	return out
}

// exportedReceiver reports whether a method's receiver type is exported.
func exportedReceiver(recv *ast.FieldList) bool {
	t := recv.List[0].Type
	if s, ok := t.(*ast.StarExpr); ok {
		t = s.X
	}
	switch x := t.(type) {
	case *ast.IndexExpr:
		t = x.X
	case *ast.IndexListExpr:
		t = x.X
	}
	id, ok := t.(*ast.Ident)
	return ok && id.IsExported()
}

// TestDocCheckFindsProblems checks the check on a file with every kind of problem.
func TestDocCheckFindsProblems(t *testing.T) {
	src := `package p

func Undocumented() {}

// wrong begins otherwise.
func Wrong() {}

// Good is fine.
func Good() {}

type T struct {
	// A is documented.
	A int
	B int
}

// An U is fine.
type U int

func (U) M() {}

var V = 1

const (
	// C is fine.
	C = 1
	D = 2
)
`
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, "p.go", src, parser.ParseComments)
	if err != nil {
		t.Fatal(err)
	}
	got := strings.Join(fileDocProblems(fset, f, true), "\n")
	for _, want := range []string{"Undocumented has no doc", "of Wrong does not begin", "type T has no doc", "T.B has no doc", "M has no doc", "V has no doc", "D has no doc"} {
		if !strings.Contains(got, want) {
			t.Errorf("the check misses %q; it says:\n%s", want, got)
		}
	}
	for _, fine := range []string{"Good", "T.A", " U ", "C has"} {
		if strings.Contains(got, fine) {
			t.Errorf("the check complains about %q:\n%s", fine, got)
		}
	}
}

func sprintf(format string, args ...any) string { return fmt.Sprintf(format, args...) }
