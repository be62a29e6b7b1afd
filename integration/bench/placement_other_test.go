//go:build unix && !linux

package bench

import (
	"testing"

	"github.com/lockwarden/lockwarden/integration/redistest"
)

// placeApart does nothing outside Linux: see the Linux version.
func placeApart(*testing.B, ...*redistest.Server) {}
