package redisops

import (
	"slices"
	"strings"
	"testing"
)

// TestWithLib: a script gets the functions of lib.lua that it calls and those they call, defined in
// lib.lua's order ahead of it, and no other.
func TestWithLib(t *testing.T) {
	var names []string
	for _, f := range libFunctions {
		names = append(names, f.name)
	}
	want := []string{"typeRefusal", "kindRefusal", "wrongType", "kindMismatch", "familyMismatch",
		"issueToken", "raiseTo", "purgeLapsed", "shiftDeadlines", "keepReadExpiry"}
	if !slices.Equal(names, want) {
		t.Fatalf("lib.lua's functions read as %v, want %v", names, want)
	}
	if got := withLib("return 1"); got != "return 1" {
		t.Errorf("a script that calls no lib function got %q", got)
	}
	defines := func(s, name string) int { return strings.Index(s, "local function "+name+"(") }
	s := withLib("return raiseTo(KEYS[1], ARGV[1], ARGV[2])")
	if defines(s, "raiseTo") < 0 || defines(s, "issueToken") >= 0 {
		t.Errorf("raiseTo calls no other function of lib.lua:\n%s", s)
	}
	s = withLib("local e = wrongType({'hash'}) if e then return e end return 1")
	if defines(s, "typeRefusal") < 0 || defines(s, "wrongType") < 0 || defines(s, "issueToken") >= 0 {
		t.Errorf("wrongType should come with typeRefusal and nothing else:\n%s", s)
	}
	if !strings.HasSuffix(s, "return 1") || strings.Contains(s, "lib.lua:") {
		t.Errorf("the script should follow the functions, without lib.lua's header:\n%s", s)
	}
}
