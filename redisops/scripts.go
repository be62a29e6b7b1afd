package redisops

import (
	_ "embed"
	"regexp"
	"strings"
)

//go:embed lib.lua
var libSource string

// libFunction is one function of lib.lua: its name, and its definition with the comment above it.
type libFunction struct {
	name, source string
	uses         *regexp.Regexp
}

// libFunctions are the functions of lib.lua, in the order they are defined there.
var libFunctions = parseLib(libSource)

// parseLib splits lib.lua into its functions: each starts at the comment block above its "local
// function" line and runs to the next one's.
func parseLib(src string) []libFunction {
	var fns []libFunction
	lines := strings.SplitAfter(src, "\n")
	start := -1 // the first line of the current function's comment block
	for i, line := range lines {
		if strings.HasPrefix(line, "--") && (i == 0 || strings.TrimSpace(lines[i-1]) == "") {
			start = i
		}
		name, ok := strings.CutPrefix(line, "local function ")
		if !ok {
			continue
		}
		name = name[:strings.Index(name, "(")]
		if start < 0 || start > i {
			start = i
		}
		end := i + 1
		for end < len(lines) && !strings.HasPrefix(lines[end], "end") {
			end++
		}
		fns = append(fns, libFunction{name: name, source: strings.Join(lines[start:end+1], "") + "\n",
			uses: regexp.MustCompile(`\b` + name + `\(`)})
		start = -1
	}
	return fns
}

// withLib returns the script source with the functions of lib.lua that it calls (typeRefusal,
// kindRefusal, wrongType, kindMismatch, familyMismatch, issueToken, raiseTo, purgeLapsed,
// shiftDeadlines, keepReadExpiry), and those that they call, defined ahead of it, so that the scripts
// share one definition of each. Only those: every function defined costs Redis a closure on every run of the
// script.
func withLib(source string) string {
	need := make([]bool, len(libFunctions))
	for changed := true; changed; {
		changed = false
		for i, f := range libFunctions {
			if need[i] {
				continue
			}
			used := f.uses.MatchString(source)
			for j, g := range libFunctions {
				used = used || (need[j] && j != i && f.uses.MatchString(g.source))
			}
			if used {
				need[i], changed = true, true
			}
		}
	}
	var b strings.Builder
	for i, f := range libFunctions {
		if need[i] {
			b.WriteString(f.source)
		}
	}
	b.WriteString(source)
	return b.String()
}
