package redisops

import _ "embed"

//go:embed lib.lua
var libSource string

// withLib returns the script source with the functions of lib.lua (typeRefusal, kindRefusal,
// wrongType, kindMismatch, familyMismatch, setGet, issueToken, purgeLapsed, shiftDeadlines) defined
// ahead of it, so that the scripts share one definition of each.
func withLib(source string) string { return libSource + source }
