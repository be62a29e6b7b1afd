package doccheck

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestModuleIsDocumented fails listing every exported identifier of the module's public packages
// (coordinator, messages, actors, redisops, telemetry, and any other package outside internal/,
// examples/ and integration/) that has no doc comment.
func TestModuleIsDocumented(t *testing.T) {
	root := moduleRoot(t)
	missing, err := Undocumented(root)
	if err != nil {
		t.Fatal(err)
	}
	if len(missing) > 0 {
		t.Fatalf("%d exported identifiers have no doc comment (see the package doc of internal/doccheck for the rules):\n%s",
			len(missing), strings.Join(missing, "\n"))
	}
	// The walk must have read the public packages: a root that holds none would pass above.
	for _, pkg := range []string{"coordinator", "messages", "actors", "redisops", "telemetry"} {
		if _, err := os.Stat(filepath.Join(root, pkg)); err != nil {
			t.Errorf("public package %s not found under %s: %v", pkg, root, err)
		}
	}
}

// TestUndocumentedFixture runs the check on testdata/mod, whose identifiers named Bad* lack the
// comment they need and those named Good* have it, and compares the whole list.
func TestUndocumentedFixture(t *testing.T) {
	got, err := Undocumented(filepath.Join("testdata", "mod"))
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"api/api.go:10: func BadFunc",
		"api/api.go:19: field GoodType.BadField",
		"api/api.go:22: field GoodType.BadTwo",
		"api/api.go:28: field GoodType.GoodNested.BadInner",
		"api/api.go:31: field GoodType.BadType",
		"api/api.go:34: field GoodType.BadSlice",
		"api/api.go:35: field GoodType.BadSlice.BadDeep",
		"api/api.go:39: type BadType",
		"api/api.go:47: type BadGrouped",
		"api/api.go:60: method GoodType.BadMethod",
		"api/api.go:69: interface method GoodIface.BadM",
		"api/api.go:77: method GoodGeneric.BadGenericMethod",
		"api/api.go:82: const BadConst",
		"api/api.go:102: const BadMixed1",
		"api/api.go:103: const BadMixed2",
		"api/api.go:111: var BadVar1",
		"api/api.go:119: var BadVar",
		"api/api.go:122: var BadEcho",
		"api/api.go:125: func BadDirective",
		"api/api.go:131: const BadInt1",
		"api/api.go:132: const BadInt2",
		"bare/bare.go:1: package bare",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("Undocumented(testdata/mod):\n got:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// TestUndocumentedSyntaxError checks that a file that does not parse is an error, not a pass.
func TestUndocumentedSyntaxError(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "broken.go"), []byte("package broken\n\nfunc {\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if got, err := Undocumented(dir); err == nil {
		t.Fatalf("Undocumented on a file with a syntax error: no error, result %q", got)
	}
}

// moduleRoot is the directory of the go.mod above the test's working directory.
func moduleRoot(t *testing.T) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("no go.mod above the test's directory")
		}
		dir = parent
	}
}
