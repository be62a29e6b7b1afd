// Package doccheck finds the exported identifiers of a module's public packages that have no doc
// comment. Its test runs it on this module, so that an undocumented identifier fails the suite.
//
// A public package is one whose directory is not, and is not under, a directory named internal,
// examples, integration or testdata, nor one whose name starts with "." or "_"; package main is
// skipped. Test files (_test.go) are not read; files of every GOOS and build tag are.
//
// What needs a comment, and what counts as one:
//   - the package: a package comment in at least one of its files;
//   - an exported function, and an exported method of an exported type: its doc comment;
//   - an exported type: its doc comment (the comment above a lone "type T ..." declaration, or above T
//     itself inside a "type (...)" group);
//   - each exported field of an exported struct type, including embedded ones and the fields of a struct
//     type written inside a field's type: its own doc comment or a line comment;
//   - each exported method of an exported interface type: its own doc comment or a line comment
//     (embedded interfaces are documented where they are declared);
//   - an exported constant or variable: its own doc comment or a line comment, or the comment above a
//     lone "const X ..." or "var X ..." declaration. The comment above a "const (...)" group counts
//     for its members only when the group is one enumeration: every member after the first repeats
//     the first one's expression (no type, no value, as after iota), or every member declares the same
//     type, declared in the package itself. The comment above a "var (...)" group never counts for its
//     members.
//
// A comment counts only if, with compiler directives (//go:...) left out, it says more than the
// identifier's name.
package doccheck

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/printer"
	"go/token"
	"go/types"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// skippedDirs are the directory names whose whole tree Undocumented does not read: packages that are
// not part of the module's API.
var skippedDirs = map[string]bool{
	"internal":    true,
	"examples":    true,
	"integration": true,
	"testdata":    true,
	"vendor":      true,
}

// Undocumented walks the Go packages under root (a module's root directory, or any directory) and
// returns one line per exported identifier that lacks a doc comment, as
// "path/to/file.go:line: kind Name", with path relative to root and kinds "package", "func",
// "method", "type", "field", "interface method", "const" and "var". The lines are sorted by file and
// line. An empty result means every exported identifier is documented. The error is that of walking
// root or of parsing a file (a syntax error): the result is then nil.
func Undocumented(root string) ([]string, error) {
	var dirs []string
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() {
			return nil
		}
		name := d.Name()
		if path != root && (skippedDirs[name] || strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_")) {
			return filepath.SkipDir
		}
		dirs = append(dirs, path)
		return nil
	})
	if err != nil {
		return nil, err
	}
	var out []finding
	for _, dir := range dirs {
		found, err := checkDir(root, dir)
		if err != nil {
			return nil, err
		}
		out = append(out, found...)
	}
	sort.SliceStable(out, func(i, j int) bool {
		if out[i].file != out[j].file {
			return out[i].file < out[j].file
		}
		return out[i].line < out[j].line
	})
	lines := make([]string, len(out))
	for i, f := range out {
		lines[i] = fmt.Sprintf("%s:%d: %s %s", f.file, f.line, f.kind, f.name)
	}
	return lines, nil
}

// finding is one undocumented identifier.
type finding struct {
	file string // relative to the walked root, with forward slashes
	line int
	kind string
	name string
}

// checker collects the findings of one package.
type checker struct {
	fset *token.FileSet
	root string
	out  []finding
}

// checkDir parses the non-test Go files of dir as one package and returns its findings; a directory
// without Go files, or of package main, has none.
func checkDir(root, dir string) ([]finding, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	c := &checker{fset: token.NewFileSet(), root: root}
	var files []*ast.File
	for _, e := range entries {
		name := e.Name()
		if e.IsDir() || !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") ||
			strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_") {
			continue
		}
		f, err := parser.ParseFile(c.fset, filepath.Join(dir, name), nil, parser.ParseComments)
		if err != nil {
			return nil, err
		}
		files = append(files, f)
	}
	if len(files) == 0 || files[0].Name.Name == "main" {
		return nil, nil
	}
	sort.Slice(files, func(i, j int) bool {
		return c.fset.File(files[i].Pos()).Name() < c.fset.File(files[j].Pos()).Name()
	})
	hasPackageDoc := false
	for _, f := range files {
		if says(f.Doc, f.Name.Name) {
			hasPackageDoc = true
		}
		c.file(f)
	}
	if !hasPackageDoc {
		c.add(files[0].Name, "package", files[0].Name.Name)
	}
	return c.out, nil
}

// add records an undocumented identifier at the position of node.
func (c *checker) add(node ast.Node, kind, name string) {
	pos := c.fset.Position(node.Pos())
	rel, err := filepath.Rel(c.root, pos.Filename)
	if err != nil {
		rel = pos.Filename
	}
	c.out = append(c.out, finding{file: filepath.ToSlash(rel), line: pos.Line, kind: kind, name: name})
}

// file checks the top-level declarations of f.
func (c *checker) file(f *ast.File) {
	for _, decl := range f.Decls {
		switch d := decl.(type) {
		case *ast.FuncDecl:
			c.funcDecl(d)
		case *ast.GenDecl:
			switch d.Tok {
			case token.TYPE:
				for _, spec := range d.Specs {
					c.typeSpec(d, spec.(*ast.TypeSpec))
				}
			case token.CONST, token.VAR:
				c.valueDecl(d)
			}
		}
	}
}

// funcDecl checks a function, or a method whose receiver's type is exported.
func (c *checker) funcDecl(d *ast.FuncDecl) {
	if !d.Name.IsExported() {
		return
	}
	if d.Recv == nil {
		if !says(d.Doc, d.Name.Name) {
			c.add(d.Name, "func", d.Name.Name)
		}
		return
	}
	recv := receiverType(d.Recv.List[0].Type)
	if recv == "" || !ast.IsExported(recv) {
		return
	}
	if !says(d.Doc, d.Name.Name) {
		c.add(d.Name, "method", recv+"."+d.Name.Name)
	}
}

// receiverType is the name of the type of a method receiver expression (T, *T, T[P], *T[P]), or "".
func receiverType(expr ast.Expr) string {
	for {
		switch e := expr.(type) {
		case *ast.StarExpr:
			expr = e.X
		case *ast.ParenExpr:
			expr = e.X
		case *ast.IndexExpr:
			expr = e.X
		case *ast.IndexListExpr:
			expr = e.X
		case *ast.Ident:
			return e.Name
		default:
			return ""
		}
	}
}

// typeSpec checks an exported type, the exported fields of its struct and the exported methods of its
// interface.
func (c *checker) typeSpec(d *ast.GenDecl, s *ast.TypeSpec) {
	if !s.Name.IsExported() {
		return
	}
	doc := s.Doc
	if doc == nil && !d.Lparen.IsValid() {
		doc = d.Doc
	}
	if !says(doc, s.Name.Name) {
		c.add(s.Name, "type", s.Name.Name)
	}
	c.members(s.Name.Name, s.Type)
}

// members checks the exported fields of a struct type, or the exported methods of an interface type,
// written in expr; owner names the type they belong to in the findings.
func (c *checker) members(owner string, expr ast.Expr) {
	switch t := expr.(type) {
	case *ast.StructType:
		for _, field := range t.Fields.List {
			names := field.Names
			if len(names) == 0 { // embedded: the field's name is its type's
				name := receiverType(embeddedType(field.Type))
				if name == "" {
					continue
				}
				names = []*ast.Ident{{NamePos: field.Type.Pos(), Name: name}}
			}
			for _, n := range names {
				if !n.IsExported() {
					continue
				}
				if !says(field.Doc, n.Name) && !says(field.Comment, n.Name) {
					c.add(n, "field", owner+"."+n.Name)
				}
				c.members(owner+"."+n.Name, fieldStruct(field.Type))
			}
		}
	case *ast.InterfaceType:
		for _, m := range t.Methods.List {
			for _, n := range m.Names {
				if n.IsExported() && !says(m.Doc, n.Name) && !says(m.Comment, n.Name) {
					c.add(n, "interface method", owner+"."+n.Name)
				}
			}
		}
	}
}

// embeddedType is the type named by an embedded field's type expression: pkg.T for pkg.T and *pkg.T.
func embeddedType(expr ast.Expr) ast.Expr {
	if s, ok := expr.(*ast.StarExpr); ok {
		expr = s.X
	}
	if sel, ok := expr.(*ast.SelectorExpr); ok {
		return sel.Sel
	}
	return expr
}

// fieldStruct is the struct type written in a field's type (struct{...}, *struct{...}, []struct{...},
// map[K]struct{...}), whose fields are then part of the API too, or nil.
func fieldStruct(expr ast.Expr) ast.Expr {
	for {
		switch e := expr.(type) {
		case *ast.StarExpr:
			expr = e.X
		case *ast.ArrayType:
			expr = e.Elt
		case *ast.MapType:
			expr = e.Value
		case *ast.ChanType:
			expr = e.Value
		case *ast.StructType:
			return e
		default:
			return nil
		}
	}
}

// valueDecl checks the exported constants or variables of a const or var declaration.
func (c *checker) valueDecl(d *ast.GenDecl) {
	kind := "var"
	if d.Tok == token.CONST {
		kind = "const"
	}
	groupDoc := (*ast.CommentGroup)(nil)
	if !d.Lparen.IsValid() || (d.Tok == token.CONST && c.isEnum(d)) {
		groupDoc = d.Doc
	}
	for _, spec := range d.Specs {
		s := spec.(*ast.ValueSpec)
		for _, n := range s.Names {
			if !n.IsExported() {
				continue
			}
			if !says(s.Doc, n.Name) && !says(s.Comment, n.Name) && !says(groupDoc, n.Name) {
				c.add(n, kind, n.Name)
			}
		}
	}
}

// isEnum reports whether a parenthesized const declaration is one enumeration: every spec after the
// first has neither a type nor values (it repeats the first one's expression, as after iota), or every
// spec declares the same type, one of the package's own.
func (c *checker) isEnum(d *ast.GenDecl) bool {
	if len(d.Specs) == 0 {
		return false
	}
	implicit := true
	for _, spec := range d.Specs[1:] {
		s := spec.(*ast.ValueSpec)
		if s.Type != nil || len(s.Values) != 0 {
			implicit = false
			break
		}
	}
	if implicit {
		return true
	}
	first := d.Specs[0].(*ast.ValueSpec).Type
	if id, ok := first.(*ast.Ident); !ok || types.Universe.Lookup(id.Name) != nil {
		return false // no type, another package's type or a predeclared one: not an enum's own type
	}
	want := c.expr(first)
	for _, spec := range d.Specs[1:] {
		s := spec.(*ast.ValueSpec)
		if s.Type == nil || c.expr(s.Type) != want {
			return false
		}
	}
	return true
}

// expr prints a type expression, to compare two of them.
func (c *checker) expr(e ast.Expr) string {
	var b strings.Builder
	if err := printer.Fprint(&b, c.fset, e); err != nil {
		return fmt.Sprintf("%p", e)
	}
	return b.String()
}

// says reports whether a comment group documents name: it has text, compiler directives left out,
// other than the name alone.
func says(g *ast.CommentGroup, name string) bool {
	if g == nil {
		return false
	}
	text := strings.TrimSpace(g.Text())
	text = strings.TrimSpace(strings.TrimSuffix(text, "."))
	return text != "" && text != name
}
